package agent

import (
	"context"
	"fmt"

	"github.com/pyrualean/pyrualean/kernel"
)

// Controller adapts the episode to the gateway's EpisodeController and EpisodeTrace.
func (e *Episode) Controller() *Controller { return &Controller{e: e} }

// Controller is an episode as /api/episodes sees it: what people do through it is theirs.
type Controller struct{ e *Episode }

func (c *Controller) ID() string    { return c.e.ID() }
func (c *Controller) Status() any   { return c.e.Status() }
func (c *Controller) Pause() error  { return c.e.Pause() }
func (c *Controller) Resume() error { return c.e.Resume() }
func (c *Controller) Step() error   { return c.e.Step() }

// TraceJSON is the episode's trace notebook as it is now (the live document starts from it).
func (c *Controller) TraceJSON() ([]byte, error) { return c.e.trace.Snapshot().Bytes() }

// PersonKernel is the episode's kernel as the gateway serves it to people: an interrupt that comes
// through it (JupyterLab's stop button) is a person's, so the agent is told plainly that a person
// interrupted its cell, and the trace records the event.
func (e *Episode) PersonKernel() *PersonKernel { return &PersonKernel{Kernel: e.kern, e: e} }

// PersonKernel is a *kernel.Kernel whose Interrupt is a person's (see Episode.PersonKernel).
type PersonKernel struct {
	*kernel.Kernel
	e *Episode
}

// Interrupt marks the running agent cell as interrupted by a person, then interrupts the kernel.
func (p *PersonKernel) Interrupt(ctx context.Context) error {
	e := p.e
	e.mu.Lock()
	detail := "no agent cell was running"
	if e.running != nil {
		e.interrupted = true
		detail = fmt.Sprintf("agent cell %d", e.running.Turn)
	}
	e.mu.Unlock()
	e.recordEvent("interrupt", "person", detail)
	return p.Kernel.Interrupt(ctx)
}

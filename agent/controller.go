package agent

import (
	"context"
	"fmt"

	"github.com/pyrualean/pyrualean/kernel"
)

// Controller adapts the episode to the gateway's EpisodeController and EpisodeTrace: what people do
// through it (pause, step, resume) is theirs, and the trace records it.
type Controller struct{ e *Episode }

// Controller is the episode as /api/episodes sees it.
func (e *Episode) Controller() *Controller { return &Controller{e: e} }

func (c *Controller) ID() string  { return c.e.ID() }
func (c *Controller) Status() any { return c.e.Status() }

// Pause holds the agent before its next decision (and holds a tool call already decided).
func (c *Controller) Pause() error { return c.act("pause", c.e.gate.pause) }

// Resume lets the agent decide and act again.
func (c *Controller) Resume() error { return c.act("resume", c.e.gate.resume) }

// Step lets one decision (or the held tool call) through while paused.
func (c *Controller) Step() error { return c.act("step", c.e.gate.step) }

// Discard drops the held cell: it is not run, the model is told a person discarded it and decides
// again (the episode stays paused). The trace records the discarded code.
func (c *Controller) Discard() error {
	_, _, held := c.e.gate.view()
	if err := c.e.gate.discardHeld(); err != nil {
		return err
	}
	detail := ""
	if held != nil {
		detail = TrimMiddle(held.Code, 2000)
	}
	c.e.book.event(c.e.log, "discard", "person", detail)
	return nil
}

func (c *Controller) act(kind string, act func() error) error {
	if err := act(); err != nil {
		return err
	}
	c.e.book.event(c.e.log, kind, "person", "")
	return nil
}

// TraceJSON is the episode's trace notebook as it is now (the live document starts from it).
func (c *Controller) TraceJSON() ([]byte, error) { return c.e.trace.Snapshot().Bytes() }

// PersonKernel is the episode's kernel as the gateway serves it to people: the requests that come
// through it are people's, so the host knows a person's cell from where it came, never from what the
// kernel says (Forward); an interrupt through it (JupyterLab's stop button) is a person's.
func (e *Episode) PersonKernel() *PersonKernel { return &PersonKernel{Kernel: e.kern, e: e} }

// PersonKernel is a *kernel.Kernel whose requests and interrupts are a person's (Episode.PersonKernel).
type PersonKernel struct {
	*kernel.Kernel
	e *Episode
}

// Forward takes a person's message for the kernel: an execute_request waits its turn behind the agent's
// cells and is followed and accounted as the person's (people.go); anything else goes straight on.
func (p *PersonKernel) Forward(ch kernel.Channel, m *kernel.Message) error {
	if ch == kernel.Shell && m.MsgType == "execute_request" {
		return p.e.people.submit(m)
	}
	return p.Client().Send(ch, m)
}

// Interrupt marks the running agent cell as interrupted by a person, then interrupts the kernel.
func (p *PersonKernel) Interrupt(ctx context.Context) error {
	detail := "no agent cell was running"
	if turn, ok := p.e.exec.markInterrupted(); ok {
		detail = fmt.Sprintf("agent cell %d", turn)
	}
	p.e.book.event(p.e.log, "interrupt", "person", detail)
	return p.Kernel.Interrupt(ctx)
}

package agent

import (
	"context"
	"sync"
)

// Pause holds the next tool call until Resume or Step (a person wants to look or type cells).
func (e *Episode) Pause() { e.gate.pause() }

// Resume lets tool calls run again.
func (e *Episode) Resume() { e.gate.resume() }

// Step lets exactly one tool call through while paused.
func (e *Episode) Step() { e.gate.step() }

// gate implements Pause/Resume/Step for tool calls.
type gate struct {
	mu      sync.Mutex
	paused  bool
	steps   int
	changed chan struct{}
}

func newGate() *gate { return &gate{changed: make(chan struct{})} }

func (g *gate) signalLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *gate) pause() { g.mu.Lock(); g.paused = true; g.signalLocked(); g.mu.Unlock() }

func (g *gate) resume() { g.mu.Lock(); g.paused = false; g.steps = 0; g.signalLocked(); g.mu.Unlock() }

func (g *gate) step() { g.mu.Lock(); g.steps++; g.signalLocked(); g.mu.Unlock() }

func (g *gate) isPaused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused
}

// wait blocks while paused, unless a Step lets this call through.
func (g *gate) wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		if !g.paused {
			g.mu.Unlock()
			return nil
		}
		if g.steps > 0 {
			g.steps--
			g.mu.Unlock()
			return nil
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		}
	}
}

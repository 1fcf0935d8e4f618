package agent

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
)

// The pause gate. A person pauses an episode before the model's next decision: runtimes that make
// the model call themselves (openai, local, replay) call AwaitTurn first, which waits while paused,
// so the person's cells and notes reach that decision. A tool call whose decision was already under
// way when the pause came is held at the tool gate (runCell) and shown as the held cell; after a
// person's cells it is not run but handed back to the model to re-plan. Step lets one decision (and
// the tool calls it makes) through, or one held call. Runtimes whose model runs in another program
// (codex, claude) only ever meet the tool gate, which then holds every call while paused.

// ErrNotPaused refuses a Step while the episode runs (there is nothing to step through).
var ErrNotPaused = errors.New("the episode is not paused: Step lets one decision through a paused episode")

// recordEvent appends an event to the trace's episode metadata (never after the trace is closed).
func (l *ledger) event(log *slog.Logger, kind, by, detail string) {
	ev := notebooks.EpisodeEvent{At: time.Now().UTC().Format(time.RFC3339Nano), Kind: kind, By: by, Turn: l.callsMade(), Detail: detail}
	if l.hasEnded() {
		return
	}
	if err := l.setMeta(func(m *notebooks.EpisodeMeta) { m.Events = append(m.Events, ev) }); err != nil &&
		!errors.Is(err, notebooks.ErrTraceClosed) {
		log.Warn("trace: event", "kind", kind, "err", err)
	}
}

// gate implements Pause/Resume/Step: the decision gate (awaitTurn) and the tool gate (toolWait).
type gate struct {
	mu      sync.Mutex
	paused  bool
	steps   int  // Steps not used yet
	granted bool // the decision under way was let through by a Step: its tool calls run though paused
	over    bool
	waiting bool      // a decision waits at the gate
	held    *CellInfo // the tool call waiting at the gate
	changed chan struct{}
}

func newGate() *gate { return &gate{changed: make(chan struct{})} }

func (g *gate) signalLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *gate) act(change func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.over {
		return ErrEpisodeOver
	}
	if err := change(); err != nil {
		return err
	}
	g.signalLocked()
	return nil
}

func (g *gate) pause() error { return g.act(func() error { g.paused = true; return nil }) }

func (g *gate) resume() error {
	return g.act(func() error { g.paused, g.steps = false, 0; return nil })
}

func (g *gate) step() error {
	return g.act(func() error {
		if !g.paused {
			return ErrNotPaused
		}
		g.steps++
		return nil
	})
}

// close ends the gate with the episode: later actions are refused.
func (g *gate) close() {
	g.mu.Lock()
	g.over, g.paused, g.held = true, false, nil
	g.signalLocked()
	g.mu.Unlock()
}

// view is the gate as the status shows it.
func (g *gate) view() (paused, waiting bool, held *CellInfo) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		h := *g.held
		held = &h
	}
	return g.paused, g.waiting, held
}

// awaitTurn blocks before a decision while paused, unless a Step lets this decision through.
func (g *gate) awaitTurn(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		if !g.paused || g.over {
			g.granted, g.waiting = false, false
			return nil
		}
		if g.steps > 0 {
			g.steps--
			g.granted, g.waiting = true, false
			return nil
		}
		g.waiting = true
		if err := g.waitLocked(ctx); err != nil {
			g.waiting = false
			return err
		}
	}
}

// toolWait blocks a tool call while paused, unless its decision was stepped through or a Step lets
// it through; held says whether it had to wait (it was the held cell).
func (g *gate) toolWait(ctx context.Context, call CellInfo) (held bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	defer func() { g.held = nil }()
	for {
		if !g.paused || g.granted || g.over {
			return held, nil
		}
		if g.steps > 0 {
			g.steps--
			return held, nil
		}
		held = true
		c := call
		g.held = &c
		if err := g.waitLocked(ctx); err != nil {
			return held, err
		}
	}
}

// waitLocked waits, unlocked, for the next change or the end of ctx.
func (g *gate) waitLocked(ctx context.Context) error {
	ch := g.changed
	g.mu.Unlock()
	defer g.mu.Lock()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-ch:
		return nil
	}
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
//
// Paused time is not the agent's: while a decision or a tool call waits at the gate the policy clock
// is held (its budget timer stopped; result.json's paused_s, never in policy_wall_s). A Pause that
// comes while the model decides (a decision not let through by a Step) cancels that model call
// (Decide's context, cause ErrDecisionPaused): the runtime records it as cancelled and asks again
// after the gate opens, so the person is not kept waiting for a reply that is thrown away.

// ErrNotPaused refuses a Step while the episode runs (there is nothing to step through).
var ErrNotPaused = errors.New("the episode is not paused: Step lets one decision through a paused episode")

// ErrNothingHeld refuses a Discard when no agent call waits at the pause.
var ErrNothingHeld = errors.New("no agent cell is held: Discard drops the cell the agent decided and the pause holds")

// errHeldDiscarded ends a held call's wait: a person discarded it (it is not run; the model decides again).
var errHeldDiscarded = errors.New("a person discarded the held call")

// ErrDecisionPaused ends a model call that was under way when a person paused the episode.
var ErrDecisionPaused = errors.New("a person paused the episode while the model decided: the call was cancelled, to be asked again when the episode goes on")

// event appends an event to the trace's episode metadata and, for a person reading the trace, a small
// markdown note where it happened (never after the trace is closed).
func (l *ledger) event(log *slog.Logger, kind, by, detail string) {
	ev := notebooks.EpisodeEvent{At: time.Now().UTC().Format(time.RFC3339Nano), Kind: kind, By: by, Turn: l.callsMade(), Detail: detail}
	if l.hasEnded() {
		return
	}
	if err := l.setMeta(func(m *notebooks.EpisodeMeta) { m.Events = append(m.Events, ev) }); err != nil &&
		!errors.Is(err, notebooks.ErrTraceClosed) {
		log.Warn("trace: event", "kind", kind, "err", err)
	}
	l.mu.Lock()
	tr := l.trace
	l.mu.Unlock()
	if tr == nil {
		return
	}
	meta := notebooks.CellMeta{Kind: "event", Extra: map[string]any{"event": kind, "by": by}}.Map()
	if err := tr.AddMarkdown(eventNote(ev), meta); err != nil && !errors.Is(err, notebooks.ErrTraceClosed) {
		log.Warn("trace: event note", "kind", kind, "err", err)
	}
}

// eventNote is an event as a person reads it in the trace: one quoted line, and the code of a held
// cell that was not run (fenced longer than any backtick run in it: the code is the agent's).
func eventNote(ev notebooks.EpisodeEvent) string {
	who := "by a person"
	if ev.By == "" {
		who = "by the episode"
	}
	at := ev.At
	if t, err := time.Parse(time.RFC3339Nano, ev.At); err == nil {
		at = t.Format("15:04:05 UTC")
	}
	next := ev.Turn + 1
	var line string
	code := ""
	switch ev.Kind {
	case "pause":
		line = fmt.Sprintf("⏸ **Paused** %s: the agent is held before its call %d", who, next)
	case "resume":
		line = fmt.Sprintf("▶ **Resumed** %s", who)
	case "step":
		line = fmt.Sprintf("⏯ **Step** %s: one decision (or the held cell) let through", who)
	case "interrupt":
		line = fmt.Sprintf("⏹ **Interrupted** %s (%s)", who, ev.Detail)
	case "discard":
		line, code = fmt.Sprintf("🗑 **Discarded** %s: the agent's held call %d was not run; the agent decides again", who, next), ev.Detail
	case "replan":
		line, code = fmt.Sprintf("↺ **Not run**: the agent's held call %d was stale after a person's cells; the agent decides again", next), ev.Detail
	default:
		line = fmt.Sprintf("**%s** %s", ev.Kind, who)
		if ev.Detail != "" {
			line += ": " + ev.Detail
		}
	}
	out := "> " + line + " · " + at
	if code != "" {
		fence := "```"
		for strings.Contains(code, fence) {
			fence += "`"
		}
		out += "\n>\n> " + fence + "python\n> " + strings.ReplaceAll(code, "\n", "\n> ") + "\n> " + fence
	}
	return out
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
	discard bool      // a person discarded the held call
	changed chan struct{}
	clock   *policyClock
	// deciding cancels the model call under way (nil: none, or one a Step let through).
	deciding context.CancelCauseFunc
}

func newGate(clock *policyClock) *gate { return &gate{changed: make(chan struct{}), clock: clock} }

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

func (g *gate) pause() error {
	return g.act(func() error {
		if !g.paused && g.deciding != nil {
			g.deciding(ErrDecisionPaused)
			g.deciding = nil
		}
		g.paused = true
		return nil
	})
}

// decide derives the context of one model decision: a Pause while it is under way cancels it
// (cause ErrDecisionPaused), unless a Step let this decision through a pause.
func (g *gate) decide(ctx context.Context) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithCancelCause(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused && !g.over && !g.granted { // paused between the gate and the call: do not start it
		cancel(ErrDecisionPaused)
		return dctx, func() {}
	}
	if !g.granted {
		g.deciding = cancel
	}
	return dctx, func() {
		g.mu.Lock()
		g.deciding = nil
		g.mu.Unlock()
		cancel(context.Canceled)
	}
}

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

// discardHeld drops the held call: it is not run, and the model is told and decides again (still paused).
func (g *gate) discardHeld() error {
	return g.act(func() error {
		if g.held == nil {
			return ErrNothingHeld
		}
		g.discard = true
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
		err := g.heldWaitLocked(ctx)
		g.waiting = false
		if err != nil {
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
		if held && g.discard {
			g.discard = false
			return held, errHeldDiscarded
		}
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
		if err := g.heldWaitLocked(ctx); err != nil {
			return held, err
		}
	}
}

// heldWaitLocked is waitLocked with the policy clock held: the agent waits on a person.
func (g *gate) heldWaitLocked(ctx context.Context) error {
	if g.clock != nil {
		g.clock.hold(holdPause)
		defer g.clock.release(holdPause)
	}
	return g.waitLocked(ctx)
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

// policyClock is the policy's wall clock: when it started, its budget, and the time the agent was
// held, which is not the agent's (it neither counts in policy time nor spends the budget): by a
// person's pause, or waiting for a model server that other episodes' calls occupy.
type policyClock struct {
	mu      sync.Mutex
	started time.Time
	budget  time.Duration
	held    [holdKinds]time.Duration // holds that ended, by kind
	holds   [holdKinds]int           // holds under way (a decision and a CLI's tool calls may wait at once)
	since   [holdKinds]time.Time
	out     func()      // called when the budget runs out (onBudget)
	timer   *time.Timer // armed while not held
}

// holdKind says why the clock is held.
type holdKind int

const (
	holdPause      holdKind = iota // a person paused the agent (result.json's paused_s)
	holdModelQueue                 // the model call waits its turn on a shared server (model_queued_s)
	holdKinds
)

func (c *policyClock) start(budget time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started, c.budget = time.Now(), budget
}

// heldLocked is the time held for kind so far, the hold under way included.
func (c *policyClock) heldLocked(now time.Time, k holdKind) time.Duration {
	p := c.held[k]
	if c.holds[k] > 0 {
		p += now.Sub(c.since[k])
	}
	return p
}

// offLocked is the time held for any reason (the kinds' holds never overlap: a pause cuts a queued call).
func (c *policyClock) offLocked(now time.Time) time.Duration {
	var p time.Duration
	for k := range holdKinds {
		p += c.heldLocked(now, k)
	}
	return p
}

func (c *policyClock) heldNow() bool {
	for _, n := range c.holds {
		if n > 0 {
			return true
		}
	}
	return false
}

// fill sets a live status's paused and policy times and the budget left (where there is a budget).
func (c *policyClock) fill(st *EpisodeStatus) {
	st.PausedS = Round(c.pausedFor().Seconds(), 3)
	st.PolicyS = Round(c.elapsed().Seconds(), 3)
	if left, ok := c.left(); ok {
		v := Round(left.Seconds(), 3)
		st.BudgetLeftS = &v
	}
}

// elapsed is the policy's time so far: wall time since the start less the time held.
func (c *policyClock) elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started.IsZero() {
		return 0
	}
	now := time.Now()
	return now.Sub(c.started) - c.offLocked(now)
}

// pausedFor is the time the agent has been held by a pause.
func (c *policyClock) pausedFor() time.Duration { return c.heldFor(holdPause) }

// heldFor is the time the clock has been held for kind.
func (c *policyClock) heldFor(k holdKind) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.heldLocked(time.Now(), k)
}

// left is the budget not spent yet (ok false: no budget).
func (c *policyClock) left() (left time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.budget <= 0 {
		return 0, false
	}
	if c.started.IsZero() {
		return c.budget, true
	}
	now := time.Now()
	return max(0, c.budget-(now.Sub(c.started)-c.offLocked(now))), true
}

// onBudget calls f when the budget runs out (never without one; the clock stops while held); the
// returned func stops that. One f at a time: a later call replaces an earlier one.
func (c *policyClock) onBudget(f func()) (stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.budget <= 0 {
		return func() {}
	}
	c.out = f
	if !c.heldNow() {
		c.armLocked()
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.disarmLocked()
		c.out = nil
	}
}

func (c *policyClock) armLocked() {
	c.disarmLocked()
	if c.out == nil {
		return
	}
	now := time.Now()
	left := c.budget - (now.Sub(c.started) - c.offLocked(now))
	c.timer = time.AfterFunc(max(0, left), c.out)
}

func (c *policyClock) disarmLocked() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// hold stops the clock for kind (the agent waits on a person or a shared model); release starts it again.
func (c *policyClock) hold(k holdKind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.heldNow() {
		c.disarmLocked()
	}
	if c.holds[k] == 0 {
		c.since[k] = time.Now()
	}
	c.holds[k]++
}

func (c *policyClock) release(k holdKind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holds[k] == 0 {
		return
	}
	c.holds[k]--
	if c.holds[k] == 0 {
		c.held[k] += time.Since(c.since[k])
	}
	if !c.heldNow() {
		c.armLocked()
	}
}

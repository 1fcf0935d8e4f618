package agent

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestGateDiscardAndDecide: Discard drops only a held call (refused when none is held) and the
// episode stays paused; a Pause cancels the decision under way (cause ErrDecisionPaused) but not one
// a Step let through, and a decision that begins while paused is never sent.
func TestGateDiscardAndDecide(t *testing.T) {
	g := newGate(&policyClock{})
	ctx := context.Background()
	if err := g.discardHeld(); !errors.Is(err, ErrNothingHeld) {
		t.Errorf("discard with nothing held: %v", err)
	}
	dctx, done := g.decide(ctx)
	if err := g.pause(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(dctx), ErrDecisionPaused) {
		t.Errorf("the decision under way after a Pause: cause %v", context.Cause(dctx))
	}
	done()
	if dctx, done := g.decide(ctx); !errors.Is(context.Cause(dctx), ErrDecisionPaused) {
		t.Errorf("a decision begun while paused was not refused: %v", context.Cause(dctx))
	} else {
		done()
	}
	if err := g.step(); err != nil {
		t.Fatal(err)
	}
	if err := g.awaitTurn(ctx); err != nil {
		t.Fatal(err)
	}
	dctx, done = g.decide(ctx)
	_ = g.pause()
	if dctx.Err() != nil {
		t.Errorf("a stepped decision was cancelled: %v", context.Cause(dctx))
	}
	done()

	g.granted = false // the stepped decision is over; its next call waits
	res := make(chan error, 1)
	go func() { _, err := g.toolWait(ctx, CellInfo{Tool: "python", Code: "x = 1"}); res <- err }()
	waitFor(t, func() bool { _, _, h := g.view(); return h != nil })
	if err := g.discardHeld(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, errHeldDiscarded) {
		t.Errorf("the discarded call's wait: %v", err)
	}
	if paused, _, held := g.view(); !paused || held != nil {
		t.Errorf("after discard: paused %v, held %+v", paused, held)
	}
}

// TestPolicyClockStopsWhileHeld: the budget timer does not fire while the agent is held, and fires
// for the rest of the budget after; elapsed leaves the hold out.
func TestPolicyClockStopsWhileHeld(t *testing.T) {
	var c policyClock
	c.start(150 * time.Millisecond)
	fired := make(chan time.Time, 1)
	stop := c.onBudget(func() { fired <- time.Now() })
	defer stop()
	time.Sleep(50 * time.Millisecond)
	c.hold(holdPause)
	select {
	case <-fired:
		t.Fatal("the budget ran out while held")
	case <-time.After(300 * time.Millisecond):
	}
	left, ok := c.left()
	if !ok || left < 60*time.Millisecond || left > 110*time.Millisecond {
		t.Errorf("left while held: %s", left)
	}
	released := time.Now()
	c.release(holdPause)
	at := <-fired
	if d := at.Sub(released); d < 60*time.Millisecond || d > 400*time.Millisecond {
		t.Errorf("the budget ran out %s after the release, want the ~100 ms left", d)
	}
	if p := c.pausedFor(); p < 300*time.Millisecond {
		t.Errorf("paused %s", p)
	}
	if e := c.elapsed(); e > 300*time.Millisecond {
		t.Errorf("elapsed %s includes the hold", e)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("timed out")
		}
	}
}

// TestPolicyClockModelQueue: a wait for a shared model server stops the clock as a pause does, but is
// counted apart (model_queued_s): paused_s stays the person's.
func TestPolicyClockModelQueue(t *testing.T) {
	var c policyClock
	c.start(time.Hour)
	c.hold(holdModelQueue)
	time.Sleep(100 * time.Millisecond)
	c.release(holdModelQueue)
	c.release(holdModelQueue) // a second release is a no-op
	if p := c.pausedFor(); p != 0 {
		t.Errorf("paused %s, want 0: the queue is not a person's pause", p)
	}
	if q := c.heldFor(holdModelQueue); q < 100*time.Millisecond {
		t.Errorf("queued %s, want ≥ 100 ms", q)
	}
	if e := c.elapsed(); e > 50*time.Millisecond {
		t.Errorf("elapsed %s includes the queue", e)
	}
}

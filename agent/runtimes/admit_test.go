package runtimes

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
)

// slowChat answers after a fixed time, counting the calls in flight at once.
type slowChat struct {
	took             time.Duration
	inFlight, maxAny atomic.Int32
}

func (c *slowChat) Reply(ctx context.Context, _ ChatRequest) (Reply, error) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		m := c.maxAny.Load()
		if n <= m || c.maxAny.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-ctx.Done():
		return Reply{}, ctx.Err()
	case <-time.After(c.took):
	}
	return Reply{Text: "thinking"}, nil
}

// waitingDriver is a fakeDriver that counts the time its clock was stopped for the model (ModelWaiter).
type waitingDriver struct {
	fakeDriver
	mu      sync.Mutex
	stopped time.Duration
}

func (d *waitingDriver) WaitForModel() func() {
	start := time.Now()
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.stopped += time.Since(start)
	}
}

// TestAdmitQueuesOutsideTheDeadline: episodes sharing one model slot (LoopConfig.Admit) take turns;
// the wait for the slot is the turn's queued_s, with the episode's clock stopped, and neither counts
// in its latency nor its deadline. Each reply takes 300 ms under a 450 ms deadline: three episodes at
// once wait up to 600 ms, which would cut the later ones if the deadline began before the wait.
func TestAdmitQueuesOutsideTheDeadline(t *testing.T) {
	const took = 300 * time.Millisecond
	chat := &slowChat{took: took}
	slot := make(chan struct{}, 1)
	cfg := LoopConfig{MaxLLMCalls: 1, PlannerAttempts: 1,
		TurnDeadline: func(int) time.Duration { return took * 3 / 2 },
		Admit: func(ctx context.Context) (func(), error) {
			select {
			case slot <- struct{}{}:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			return func() { <-slot }, nil
		}}
	drivers := make([]*waitingDriver, 3)
	var wg sync.WaitGroup
	for i := range drivers {
		drivers[i] = &waitingDriver{fakeDriver: fakeDriver{dir: t.TempDir(), prompt: "go"}}
		wg.Add(1)
		go func(d *waitingDriver) {
			defer wg.Done()
			_ = RunLoop(context.Background(), d, chat, cfg) // ends at the ceiling of 1 call: no tool call
		}(drivers[i])
	}
	wg.Wait()
	if m := chat.maxAny.Load(); m != 1 {
		t.Errorf("%d calls were in flight at once, want 1 (the slot)", m)
	}
	var queued []float64
	for i, d := range drivers {
		if len(d.turns) != 1 {
			t.Fatalf("episode %d recorded %d turns, want 1: %+v", i, len(d.turns), d.turns)
		}
		tr := d.turns[0]
		if tr.Error != "" {
			t.Errorf("episode %d: %s (queued %.3f s): the wait for the slot counted in the deadline", i, tr.Error, tr.QueuedS)
		}
		if tr.LatencyS > took.Seconds()*1.4 {
			t.Errorf("episode %d: latency %.3f s includes the wait (queued %.3f s)", i, tr.LatencyS, tr.QueuedS)
		}
		if s := d.stopped.Seconds(); s < tr.QueuedS-0.01 || s > tr.QueuedS+0.05 {
			t.Errorf("episode %d: clock stopped %.3f s for a queue of %.3f s", i, s, tr.QueuedS)
		}
		queued = append(queued, tr.QueuedS)
	}
	// One went first; the last waited for the other two's replies.
	lo, hi := queued[0], queued[0]
	for _, q := range queued {
		lo, hi = min(lo, q), max(hi, q)
	}
	if lo > 0.1 || hi < 2*took.Seconds()*0.9 {
		t.Errorf("queued_s %v: want one near 0 and one near %.1f s", queued, 2*took.Seconds())
	}
}

// TestAdmitPausedWhileQueued: a Pause while the call waits for the slot sends nothing (no turn is
// recorded); the episode ending meanwhile ends the loop with its cause.
func TestAdmitPausedWhileQueued(t *testing.T) {
	blocked := func(ctx context.Context) (func(), error) { <-ctx.Done(); return nil, context.Cause(ctx) }
	ctx, cancel := context.WithCancelCause(context.Background())
	d := &pausingDriver{fakeDriver: fakeDriver{dir: t.TempDir(), prompt: "go"}}
	l := &loop{ep: d, chat: &slowChat{}, cfg: LoopConfig{Admit: blocked}}
	l.cfg.defaults()
	go func() { time.Sleep(50 * time.Millisecond); d.cut(agent.ErrDecisionPaused) }()
	if _, err := l.call(ctx, 1); err != errNotSent || len(d.turns) != 0 {
		t.Errorf("paused in the queue: %v, turns %+v; want errNotSent and none", err, d.turns)
	}
	stop := context.Canceled
	go func() { time.Sleep(50 * time.Millisecond); cancel(stop) }()
	if _, err := l.call(ctx, 1); err != stop {
		t.Errorf("episode ended in the queue: %v, want its cause", err)
	}
}

// pausingDriver's Decide contexts can be cut as a person's Pause cuts them.
type pausingDriver struct {
	fakeDriver
	mu   sync.Mutex
	cuts []context.CancelCauseFunc
}

func (d *pausingDriver) Decide(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	d.mu.Lock()
	d.cuts = append(d.cuts, cancel)
	d.mu.Unlock()
	return c, func() { cancel(context.Canceled) }
}

func (d *pausingDriver) cut(cause error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.cuts {
		c(cause)
	}
}

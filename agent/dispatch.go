package agent

import (
	"context"
	"sync"
	"time"
)

// dispatcher lets one execute at a time into the episode's kernel, the agent's cells and people's
// alike (people's requests come through the gateway: PersonKernel.Forward), and keeps the span of
// each: who ran it, when it was sent, when its reply came. The host thus knows which cell the kernel
// runs without believing anything the kernel says (agent code can forge iopub messages), and
// attribution.go puts every robot call under the span it started in: a person's cell, an agent's
// cell, or between cells (the agent's: code it left running).
type dispatcher struct {
	slot chan struct{} // held while an execute runs and is judged

	mu          sync.Mutex
	spans       []span    // newest last, at most maxSpans
	running     *CellInfo // the agent cell the kernel runs now
	interrupted bool      // a person interrupted it
}

// owner is whom a span (and the robot calls in it) belongs to: an agent call (turn > 0), a person's cell
// (person > 0), or the agent's own silent executes (both zero).
type owner struct{ turn, person int }

// span is one execute the dispatcher let through; end is zero while it runs.
type span struct {
	owner      owner
	start, end time.Time
}

// spanSlack absorbs the robot ledger's millisecond rounding of started_at.
const spanSlack = 2 * time.Millisecond

// maxSpans bounds the spans kept: only those since the last verdict are ever looked up.
const maxSpans = 256

func newDispatcher() *dispatcher { return &dispatcher{slot: make(chan struct{}, 1)} }

// acquire waits for the kernel to be free of other executes (or ctx to end).
func (d *dispatcher) acquire(ctx context.Context) error {
	select {
	case d.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (d *dispatcher) release() { <-d.slot }

// begin records that the holder of the slot sends an execute for o now; end closes that span.
func (d *dispatcher) begin(o owner) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.spans = append(d.spans, span{owner: o, start: time.Now()})
	if n := len(d.spans); n > maxSpans {
		d.spans = append([]span(nil), d.spans[n-maxSpans:]...)
	}
}

func (d *dispatcher) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := len(d.spans); n > 0 && d.spans[n-1].end.IsZero() {
		d.spans[n-1].end = time.Now()
	}
}

// ownerAt says whose span t falls in; between spans (or before the first) it is the agent's, under
// the last agent call that started before t (between is true).
func (d *dispatcher) ownerAt(t time.Time) (o owner, between bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := len(d.spans) - 1; i >= 0; i-- {
		s := d.spans[i]
		if s.start.After(t.Add(spanSlack)) {
			continue
		}
		if s.end.IsZero() || !t.After(s.end.Add(spanSlack)) {
			if s.owner == (owner{}) {
				return owner{turn: d.lastTurnLocked(i)}, true // the agent's own silent execute
			}
			return s.owner, false
		}
		return owner{turn: d.lastTurnLocked(i + 1)}, true
	}
	return owner{}, true
}

// lastTurnLocked is the last agent call among spans[:upto].
func (d *dispatcher) lastTurnLocked(upto int) int {
	for i := min(upto, len(d.spans)) - 1; i >= 0; i-- {
		if t := d.spans[i].owner.turn; t > 0 {
			return t
		}
	}
	return 0
}

// setRunning names the agent cell the kernel runs now (nil: none).
func (d *dispatcher) setRunning(c *CellInfo) {
	d.mu.Lock()
	d.running, d.interrupted = c, false
	d.mu.Unlock()
}

// setMsgID records the running agent cell's execute_request id (the live view names it by that).
func (d *dispatcher) setMsgID(id string) {
	d.mu.Lock()
	if d.running != nil {
		d.running.MsgID = id
	}
	d.mu.Unlock()
}

// runningCell is a copy of the running agent cell, if any.
func (d *dispatcher) runningCell() *CellInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running == nil {
		return nil
	}
	c := *d.running
	return &c
}

// markInterrupted records a person's interrupt of the running agent cell; it says which cell, if any.
func (d *dispatcher) markInterrupted() (turn int, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running == nil {
		return 0, false
	}
	d.interrupted = true
	return d.running.Turn, true
}

// wasInterrupted says whether a person interrupted the running agent cell.
func (d *dispatcher) wasInterrupted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.interrupted
}

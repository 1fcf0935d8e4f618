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

	mu sync.Mutex
	// tell, when set, passes each span to the robot server as it opens and closes (sealed episodes): the
	// server tags every robot call with the span it started in, so attribution does not depend on clocks.
	tell        func(kind string, cell int)
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
	d.spans = append(d.spans, span{owner: o, start: time.Now()})
	if n := len(d.spans); n > maxSpans {
		d.spans = append([]span(nil), d.spans[n-maxSpans:]...)
	}
	last, tell := d.lastTurnLocked(len(d.spans)), d.tell
	d.mu.Unlock()
	if tell != nil {
		switch {
		case o.person > 0:
			tell(spanPerson, o.person)
		case o.turn > 0:
			tell(spanAgent, o.turn)
		default: // the agent's own silent executes: the agent's, as between its cells
			tell(spanBetween, last)
		}
	}
}

func (d *dispatcher) end() {
	d.mu.Lock()
	if n := len(d.spans); n > 0 && d.spans[n-1].end.IsZero() {
		d.spans[n-1].end = time.Now()
	}
	last, tell := d.lastTurnLocked(len(d.spans)), d.tell
	d.mu.Unlock()
	if tell != nil {
		tell(spanBetween, last)
	}
}

// The robot server's span kinds (host.span), as its ledger records carry them ("span": {"owner", "cell"}).
const (
	spanAgent   = "agent"
	spanPerson  = "person"
	spanBetween = "between"
)

// ownerOfSpan is whose a call is that the robot server tagged with span (sealed episodes): a person's
// cell's, an agent cell's, or the agent's between cells (under its last call).
func ownerOfSpan(sp map[string]any) (o owner, between, ok bool) {
	kind, _ := sp["owner"].(string)
	f, isNum := sp["cell"].(float64)
	if !isNum || f < 0 {
		return owner{}, false, false
	}
	switch n := int(f); kind {
	case spanPerson:
		return owner{person: n}, false, n > 0
	case spanAgent:
		return owner{turn: n}, false, n > 0
	case spanBetween:
		return owner{turn: n}, true, true
	}
	return owner{}, false, false
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

// tellSpans sets where spans are passed on (nil: nowhere).
func (d *dispatcher) tellSpans(f func(kind string, cell int)) {
	d.mu.Lock()
	d.tell = f
	d.mu.Unlock()
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

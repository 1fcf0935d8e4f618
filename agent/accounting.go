package agent

import (
	"context"
	"maps"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/robotapi"
)

// Who made a robot call. A person's cells run in the same kernel as the agent's, on the same robot,
// and a robot report (cell_report(), or the robot server's host.report when sealed) covers whatever
// ran since the previous one: a person's calls would be charged to the agent's next cell. So every
// ledger record is put under the cell that was running when the call started — the kernel runs one
// cell at a time — and a person's records, env steps and images are the person's: calls.jsonl says
// author "human" and the person's cell number, result.json counts them apart (human_*), the agent's
// feedback and counters never see them.

// execSpan is one cell the kernel ran: the agent's (turn > 0) or a person's (human > 0), with the
// kernel's own timestamps (iopub header dates; the robot's records carry the same machine clock).
type execSpan struct {
	turn, human int
	start, end  time.Time // end zero while it runs
}

// spanSlack absorbs the ledger's millisecond rounding of started_at.
const spanSlack = 2 * time.Millisecond

// maxSpans bounds the spans kept: only cells since the last reports are ever looked up.
const maxSpans = 256

// humanTally is what one person's cell did to the robot.
type humanTally struct {
	ledger notebooks.CellLedger
	tools  []string
}

// addSpan records a cell the kernel started (the watcher for a person's, runCell for the agent's).
func (e *Episode) addSpan(s execSpan) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.spans = append(e.spans, s)
	if n := len(e.spans); n > maxSpans {
		e.spans = append([]execSpan(nil), e.spans[n-maxSpans:]...)
	}
}

// endSpan records when a person's cell ended.
func (e *Episode) endSpan(human int, end time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.spans) - 1; i >= 0; i-- {
		if e.spans[i].human == human {
			e.spans[i].end = end
			return
		}
	}
}

// spanAtLocked finds the cell that was running at t: the last one started by then. ok is false when
// t is past the end of that cell (a cell not known yet ran it) or before every known cell.
func (e *Episode) spanAtLocked(t time.Time) (execSpan, bool) {
	for i := len(e.spans) - 1; i >= 0; i-- {
		s := e.spans[i]
		if s.start.After(t.Add(spanSlack)) {
			continue
		}
		if !s.end.IsZero() && t.After(s.end.Add(spanSlack)) {
			return s, false
		}
		return s, true
	}
	return execSpan{}, false
}

// owner is whom a report's unattributed remainder belongs to: the agent's cell (turn) or a person's.
type owner struct{ turn, human int }

// recordTime is a ledger record's started_at (Unix seconds).
func recordTime(c map[string]any) (time.Time, bool) {
	f, ok := c["started_at"].(float64)
	if !ok || f <= 0 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(f*1e9)), true
}

func recordSteps(c map[string]any) int {
	f, _ := c["env_steps"].(float64)
	return int(f)
}

// account splits a robot report among the cells that made its calls, writes each record to
// calls.jsonl under its cell and author, counts a person's share apart, and returns the agent's
// share (nil when r is nil): its calls, its env steps, moved only if it moved the robot. A record
// made after the cell it would fall in had ended was made by a cell not known yet (a person's, seen
// a moment later on iopub): it waits in pendingCalls for the next report, or for Finish.
func (e *Episode) account(r *cellReport, own owner) *cellReport {
	if r == nil {
		return nil
	}
	type placed struct {
		rec   map[string]any
		raw   []byte
		owner owner
	}
	var out []placed
	e.mu.Lock()
	earlier := e.pendingCalls
	e.pendingCalls = nil
	place := func(c map[string]any, raw []byte, fallback owner, final bool) {
		o := fallback
		if t, ok := recordTime(c); ok {
			s, inside := e.spanAtLocked(t)
			switch {
			case inside:
				o = owner{turn: s.turn, human: s.human}
			case (s.turn > 0 || s.human > 0) && !final:
				e.pendingCalls = append(e.pendingCalls, c)
				return
			}
		}
		out = append(out, placed{c, raw, o})
	}
	for _, c := range earlier {
		place(c, nil, own, false)
	}
	unexplained := r.EnvSteps // steps no record of this report explains are the report owner's
	for i, c := range r.Calls {
		var raw []byte
		if len(r.RawCalls) == len(r.Calls) {
			raw = r.RawCalls[i]
		}
		unexplained -= recordSteps(c)
		place(c, raw, own, false)
	}
	unexplained = max(unexplained, 0)
	agent := *r
	agent.Calls, agent.RawCalls = nil, nil
	agentSteps := 0
	for _, p := range out {
		steps, stateful := recordSteps(p.rec), e.statefulLocked(p.rec)
		if p.owner.human == 0 {
			agentSteps += steps
			agent.Calls = append(agent.Calls, p.rec)
			if p.raw != nil {
				agent.RawCalls = append(agent.RawCalls, p.raw)
			}
			continue
		}
		name, _ := p.rec["tool"].(string)
		e.chargeHumanLocked(p.owner.human, 1, boolInt(stateful), steps, name)
	}
	if len(agent.RawCalls) != len(agent.Calls) {
		agent.RawCalls = nil
	}
	if own.human > 0 {
		e.chargeHumanLocked(own.human, 0, 0, unexplained, "")
	} else {
		agentSteps += unexplained
	}
	agent.EnvSteps, agent.Moved = agentSteps, agentSteps > 0
	e.mu.Unlock()
	recs := make([]ownedRecord, len(out))
	for i, p := range out {
		recs[i] = ownedRecord{p.rec, p.owner}
	}
	e.writeCalls(recs)
	return &agent
}

// flushPending puts records still waiting for their cell under the last person's cell (Finish).
func (e *Episode) flushPending() {
	e.mu.Lock()
	pend := e.pendingCalls
	e.pendingCalls = nil
	last := 0
	for _, s := range e.spans {
		if s.human > 0 {
			last = s.human
		}
	}
	if last == 0 || len(pend) == 0 {
		e.mu.Unlock()
		return
	}
	for _, c := range pend {
		name, _ := c["tool"].(string)
		e.chargeHumanLocked(last, 1, boolInt(e.statefulLocked(c)), recordSteps(c), name)
	}
	e.mu.Unlock()
	recs := make([]ownedRecord, len(pend))
	for i, c := range pend {
		recs[i] = ownedRecord{c, owner{human: last}}
	}
	e.writeCalls(recs)
}

// chargeHumanLocked counts calls and steps against a person's cell and result.json's human_* totals.
func (e *Episode) chargeHumanLocked(human, calls, stateful, steps int, tool string) {
	t := e.tallyLocked(human)
	t.ledger.Calls += calls
	t.ledger.StatefulCalls += stateful
	t.ledger.EnvSteps += steps
	if tool != "" {
		t.tools = append(t.tools, tool)
	}
	e.res.HumanCalls += calls
	e.res.HumanStatefulCalls += stateful
	e.res.HumanEnvSteps += steps
}

// ownedRecord is a ledger record and the cell it is put under.
type ownedRecord struct {
	rec   map[string]any
	owner owner
}

// writeCalls appends records to calls.jsonl with their author and cell.
func (e *Episode) writeCalls(recs []ownedRecord) {
	for _, r := range recs {
		rec := maps.Clone(r.rec)
		if r.owner.human > 0 {
			rec["author"], rec["human_cell"] = notebooks.AuthorHuman, r.owner.human
		} else {
			rec["author"], rec["cell"] = notebooks.AuthorAgent, r.owner.turn
		}
		if err := e.callsW.Write(rec); err != nil {
			e.log.Warn("calls.jsonl", "err", err)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (e *Episode) tallyLocked(human int) *humanTally {
	if e.tallies == nil {
		e.tallies = map[int]*humanTally{}
	}
	t := e.tallies[human]
	if t == nil {
		t = &humanTally{}
		e.tallies[human] = t
	}
	return t
}

// statefulLocked says whether a ledger record is a stateful call (its own flag, else the robot's list).
func (e *Episode) statefulLocked(c map[string]any) bool {
	if s, ok := c["stateful"].(bool); ok {
		return s
	}
	name, _ := c["tool"].(string)
	return e.stateful[name]
}

// humanReport takes the robot's report after a person's cells: the robot server's (sealed), else
// cell_report() by a silent execute, which runs after the person's cells in the kernel's queue.
func (e *Episode) humanReport(ctx context.Context) *cellReport {
	if e.served != nil {
		return e.judgeReport(ctx, "", nil) // a person's code is not the agent's: no source check
	}
	if isDone(e.kern.Done()) {
		return nil
	}
	res, err := e.kern.Client().Execute(ctx, "", kernel.ExecuteOptions{Silent: true,
		UserExpressions: map[string]string{"pyrualean": robotapi.CellReportExpr}, Timeout: 30 * time.Second})
	if err != nil {
		e.log.Warn("robot report after a person's cell", "err", err)
		return nil
	}
	r, err := parseReport(res.UserExpressions)
	if err != nil {
		e.log.Warn("robot report after a person's cell", "err", err)
		return nil
	}
	r.SandboxFlags = nil // a person's cells are not the agent's to answer for
	return r
}

package agent

import (
	"maps"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
)

// Who made a robot call. A person's cells run in the same kernel as the agent's, on the same robot, and
// a verdict covers whatever ran since the previous one. So every ledger record is put under the span
// it started in (dispatch.go: the host's own record of which execute ran when; when sealed, the robot
// server tags each call with the span the host told it, host.span, so no clock is compared): a person's calls are
// the person's (calls.jsonl author "human" and their cell number, result.json's human_* totals, never
// the agent's feedback or counters); everything else is the agent's, including calls made between
// cells by code the agent left running (calls.jsonl "between_cells": true). The agent's env steps plus
// people's add up to the robot's total.

// agentShare is the agent's part of a verdict.
type agentShare struct {
	report  *cellReport // the agent's calls and steps (nil when the verdict was nil)
	between int         // how many of its calls were made between cells
}

// attribute splits a verdict among the cells that made its calls, writes each record to calls.jsonl
// under its cell and author, charges people's, and returns the agent's share. Steps no record explains
// belong to own, whom the verdict was taken for.
func (st stepper) attribute(r *cellReport, own owner) agentShare {
	e := st.e
	if r == nil {
		return agentShare{}
	}
	unexplained := r.EnvSteps
	agent := *r
	agent.Calls, agent.RawCalls = nil, nil
	share := agentShare{report: &agent}
	steps := 0
	for i, c := range r.Calls {
		s := recordSteps(c)
		unexplained -= s
		o, between := own, false
		if sp, ok := c["span"].(map[string]any); ok {
			// sealed: the robot server tagged the call with the span the host had told it
			if so, sb, ok := ownerOfSpan(sp); ok {
				o, between = so, sb
			}
		} else if t, ok := recordTime(c); ok {
			o, between = e.exec.ownerAt(t)
		}
		delete(c, "span")
		e.steps.writeCall(c, o, between)
		if o.person > 0 {
			name, _ := c["tool"].(string)
			e.people.charge(o.person, 1, boolInt(isStateful(c, e.brief.stateful)), s, name)
			continue
		}
		steps += s
		agent.Calls = append(agent.Calls, c)
		if len(r.RawCalls) == len(r.Calls) {
			agent.RawCalls = append(agent.RawCalls, r.RawCalls[i])
		}
		if between {
			share.between++
		}
	}
	if len(agent.RawCalls) != len(agent.Calls) {
		agent.RawCalls = nil
	}
	if unexplained = max(unexplained, 0); own.person > 0 {
		e.people.charge(own.person, 0, 0, unexplained, "")
	} else {
		steps += unexplained
	}
	agent.EnvSteps, agent.Moved = steps, steps > 0
	return share
}

// writeCall appends one record to calls.jsonl with its author and cell.
func (st stepper) writeCall(c map[string]any, o owner, between bool) {
	e := st.e
	rec := maps.Clone(c)
	switch {
	case o.person > 0:
		rec["author"], rec["human_cell"] = notebooks.AuthorHuman, o.person
	default:
		rec["author"], rec["cell"] = notebooks.AuthorAgent, o.turn
		if between {
			rec["between_cells"] = true
		}
	}
	if err := e.files.calls.Write(rec); err != nil {
		e.log.Warn("calls.jsonl", "err", err)
	}
}

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

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

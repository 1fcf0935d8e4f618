package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
)

// ledger is the episode's accounting, under its own lock: result.json's contents, the agent's calls
// counted against the budget, token usage, the model's finish and the trace's episode metadata. It
// writes result.json (save) and the trace's metadata (setMeta); it never blocks on the kernel.
type ledger struct {
	files *runFolder

	mu        sync.Mutex
	res       Result
	calls     int // the agent's calls counted so far (python, primitive, run_program)
	usage     Usage
	finish    *FinishInfo
	finished  bool // finish called, or the episode ended
	budgetOut bool
	lastTool  string
	ended     bool // Finish ran
	meta      notebooks.EpisodeMeta
	trace     *notebooks.Trace // set once the trace exists (boot)
	linger    time.Time        // the kernel is kept after the end until then (play --serve-linger)
}

func newLedger(res Result, files *runFolder) *ledger { return &ledger{res: res, files: files} }

// update changes result.json's contents (not yet written: save).
func (l *ledger) update(change func(r *Result)) {
	l.mu.Lock()
	change(&l.res)
	l.mu.Unlock()
}

// result is a copy of result.json's contents now.
func (l *ledger) result() Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return copyResult(l.res)
}

// copyResult is r with its own copy of what it shares (a copy is marshalled outside the lock).
func copyResult(r Result) Result {
	r.Generation.SandboxFlags = append([]string{}, r.Generation.SandboxFlags...)
	return r
}

// save writes result.json from the current state.
func (l *ledger) save() error {
	return l.files.writeJSON("result.json", l.result())
}

// setMeta changes the trace's episode metadata and writes it to the trace.
func (l *ledger) setMeta(change func(*notebooks.EpisodeMeta)) error {
	l.mu.Lock()
	change(&l.meta)
	m, tr := l.meta.Map(), l.trace
	l.mu.Unlock()
	if tr == nil {
		return nil
	}
	return tr.SetEpisodeMeta(m)
}

// recordTurn appends one LLM call to turns.jsonl and the accounting, then saves result.json.
func (l *ledger) recordTurn(t Turn) error {
	l.mu.Lock()
	l.usage.Add(t.Usage)
	g := &l.res.Generation
	g.Turns++
	if t.Error != "" && !t.Cancelled { // a call a person's Pause cut is not the provider's error
		g.Errors++
	}
	g.ToolCalls += len(t.ToolCalls)
	if g.Sampling == nil {
		g.Sampling = t.Sampling
	}
	l.setTokensLocked(l.usage)
	g.LatencyS = Round(g.LatencyS+t.LatencyS, 3)
	if l.res.EnvironmentSuccess != nil && *l.res.EnvironmentSuccess {
		// What the episode spent after the task predicate fired (letting the model call finish).
		if l.res.AfterSuccess == nil {
			l.res.AfterSuccess = &AfterSuccess{}
		}
		l.res.AfterSuccess.LLMCalls++
		l.res.AfterSuccess.InputTokens += t.Usage.InputTokens
		l.res.AfterSuccess.OutputTokens += t.Usage.OutputTokens
	}
	if t.CostUSD != nil && l.res.CostUSD != nil {
		c := *l.res.CostUSD + *t.CostUSD
		l.res.CostUSD = &c
	}
	l.mu.Unlock()
	if err := l.files.turns.Write(t); err != nil {
		return fmt.Errorf("turns.jsonl: %w", err)
	}
	return l.save()
}

func (l *ledger) setTokensLocked(u Usage) {
	g := &l.res.Generation
	g.InputTokens, g.CachedInputTokens = u.InputTokens, u.CachedTokens
	g.OutputTokens, g.ReasoningOutputTokens = u.OutputTokens, u.ReasoningTokens
	g.TotalTokens = u.InputTokens + u.OutputTokens
}

// setUsageTotals replaces the token totals with a runtime's authoritative ones (a CLI's own summary),
// keeping the LLM-call count when the totals do not say.
func (l *ledger) setUsageTotals(u Usage, costUSD *float64) {
	l.mu.Lock()
	if u.Calls == 0 {
		u.Calls = l.usage.Calls
	}
	l.usage = u
	l.setTokensLocked(u)
	if u.Calls > l.res.Generation.Turns {
		l.res.Generation.Turns = u.Calls
	}
	if costUSD != nil {
		c := *costUSD
		l.res.CostUSD = &c
	}
	l.mu.Unlock()
}

// callAdmission is what admitCall decides about one agent call.
type callAdmission struct {
	index   int    // the call's number (1-based) when admitted
	over    bool   // the episode has ended (Finish ran)
	refusal string // a reason the call is refused without running ("" : admitted)
	// budgetOut: the call budget is spent; firstOut: this call is the first to find it spent.
	budgetOut, firstOut bool
}

// admitCall counts one agent call against the call budget, or says why it may not run.
func (l *ledger) admitCall(tool string, maxCalls int) callAdmission {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.ended:
		return callAdmission{over: true}
	case l.finish != nil:
		return callAdmission{refusal: "the episode is over: finish was already called"}
	case maxCalls > 0 && l.calls >= maxCalls:
		first := !l.budgetOut
		l.budgetOut = true
		return callAdmission{index: l.calls, budgetOut: true, firstOut: first}
	}
	l.calls++
	l.lastTool = tool
	return callAdmission{index: l.calls}
}

// llmTurns is the number of LLM calls recorded so far (lines of turns.jsonl).
func (l *ledger) llmTurns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.res.Generation.Turns
}

// callsMade is the number of agent calls counted so far.
func (l *ledger) callsMade() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// setFinish records the model's finish (the first one counts) and returns whether the task predicate
// had fired by then.
func (l *ledger) setFinish(status, summary string) (terminated bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	terminated = l.res.EnvironmentSuccess != nil && *l.res.EnvironmentSuccess
	if l.finish == nil {
		l.finish = &FinishInfo{Status: status, Summary: summary, EnvironmentTerminated: terminated, AfterCallBudgetExhaust: l.budgetOut}
	}
	l.finished = true
	l.lastTool = "finish"
	return terminated
}

// success is the environment's verdict so far (nil: not known yet).
func (l *ledger) success() *bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.res.EnvironmentSuccess == nil {
		return nil
	}
	s := *l.res.EnvironmentSuccess
	return &s
}

func (l *ledger) hasEnded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended
}

func (l *ledger) isFinished() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.finished
}

// absorb folds the agent's share of a verdict into result.json's counters; it returns the
// environment's verdict and whether this one changed it.
func (l *ledger) absorb(r *cellReport, stateful map[string]bool) (success, changed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r == nil {
		return false, false
	}
	l.res.Calls += len(r.Calls) + r.CallsOmitted
	for _, c := range r.Calls {
		if isStateful(c, stateful) {
			l.res.StatefulCalls++
		}
		if p, _ := c["privileged"].(bool); p {
			l.res.PrivilegedCalls++
		}
	}
	l.res.EnvSteps += r.EnvSteps
	if r.EnvStepsTotal > 0 {
		l.res.EnvStepsTotal = r.EnvStepsTotal
	}
	if r.Success != nil {
		s := *r.Success
		if prev := l.res.EnvironmentSuccess; prev == nil || !*prev {
			changed = prev == nil || *prev != s
			l.res.EnvironmentSuccess = &s
		}
	}
	if len(r.SandboxFlags) > 0 {
		// Keep the first and the latest flags: a flood cannot push a later attempt out of the record.
		g := &l.res.Generation
		g.SandboxFlagsTotal += len(r.SandboxFlags)
		g.SandboxFlags = append(g.SandboxFlags, r.SandboxFlags...)
		if n := len(g.SandboxFlags); n > 200 {
			g.SandboxFlags = append(g.SandboxFlags[:100:100], g.SandboxFlags[n-100:]...)
		}
	}
	if l.res.EnvironmentSuccess != nil {
		success = *l.res.EnvironmentSuccess
	}
	return success, changed
}

// toolTurn records one tool call of the agent's in tool_turns.json and result.json's tool_turns.
func (l *ledger) toolTurn(row ToolTurn) error {
	n, err := l.files.toolTurns.add(row)
	l.update(func(r *Result) { r.ToolTurns = n })
	return err
}

// chargePeople counts a person's calls and steps in result.json's human_* totals.
func (l *ledger) chargePeople(calls, stateful, steps int) {
	l.mu.Lock()
	l.res.HumanCalls += calls
	l.res.HumanStatefulCalls += stateful
	l.res.HumanEnvSteps += steps
	l.mu.Unlock()
}

// isStateful says whether a ledger record is a stateful call (its own flag, else the robot's list).
func isStateful(c map[string]any, stateful map[string]bool) bool {
	if s, ok := c["stateful"].(bool); ok {
		return s
	}
	name, _ := c["tool"].(string)
	return stateful[name]
}

// beginEnd marks the episode ended; false when it already was (Finish runs once).
func (l *ledger) beginEnd() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return false
	}
	l.ended, l.finished = true, true
	return true
}

// close writes the episode's end into result.json's contents: its status (derived when status is ""),
// the error, the reason, the model's finish and the wall times. It returns the final result.
func (l *ledger) close(status string, runErr error, kernelDead bool, policy, total time.Duration) Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	if status == "" {
		status = deriveStatus(l.res.EnvironmentSuccess, l.finish, l.budgetOut, runErr, kernelDead)
	}
	r := &l.res
	r.Status = status
	if runErr != nil && (status != StatusCompleted || errors.Is(runErr, ErrPlanner)) {
		r.Error = &ErrorField{Type: errorType(runErr), Message: runErr.Error()}
	}
	if r.Reason == "" {
		r.Reason = reason(l.finish, l.res.EnvironmentSuccess, status, runErr)
	}
	r.Finish = l.finish
	if r.EnvironmentSuccess == nil { // as the original: a boolean once the episode is over
		f := false
		r.EnvironmentSuccess = &f
	}
	r.PolicyWallS, r.TotalWallS = Round(policy.Seconds(), 3), Round(total.Seconds(), 3)
	r.Notes = append(r.Notes, endNotes(*r)...)
	r.FinishedAt = time.Now().UTC().Format(time.RFC3339)
	r.PID = 0
	return copyResult(l.res)
}

// deriveStatus is an episode's status from how it ended: the verdict, the model's finish, whether the
// call budget ran out, what ended the runtime and whether the kernel died.
func deriveStatus(verdict *bool, finish *FinishInfo, budgetOut bool, runErr error, kernelDead bool) string {
	success := verdict != nil && *verdict
	switch {
	case errors.Is(runErr, kernel.ErrKernelDied) || (kernelDead && finish == nil && !success):
		return StatusError
	case finish != nil && !(budgetOut && !success):
		return StatusCompleted
	case errors.Is(runErr, ErrBudgetExceeded):
		return StatusTimeout
	case errors.Is(runErr, context.Canceled):
		return StatusInterrupted
	case errors.Is(runErr, ErrPlanner) && success:
		// A planner that fails after the task predicate fired does not undo the success; the error
		// field says what else happened.
		return StatusCompleted
	case errors.Is(runErr, ErrPlanner):
		return StatusPlannerError
	case budgetOut && !success:
		return StatusCallBudget
	case runErr != nil && !errors.Is(runErr, ErrNoToolCall):
		return StatusError
	default:
		return StatusCompleted
	}
}

// reason is result.json's reason: the model's finish, else what ended the episode.
func reason(finish *FinishInfo, verdict *bool, status string, runErr error) string {
	switch {
	case finish != nil:
		return "finish:" + finish.Status
	case status == StatusCallBudget:
		return "call_budget"
	case status == StatusTimeout:
		return "timeout"
	case verdict != nil && *verdict:
		return "terminated"
	case errors.Is(runErr, ErrNoToolCall):
		return "no_finish"
	case runErr != nil:
		return "error"
	}
	return "no_finish"
}

// endNotes are the plain words a reader of result.json's numbers should see (the original's notes).
func endNotes(r Result) []string {
	var notes []string
	if r.PlannerAttempts > 1 {
		notes = append(notes, fmt.Sprintf("the planner failed before its first tool call and was started %d times", r.PlannerAttempts))
	}
	if n := r.Generation.SandboxFlagsTotal; n > 0 || len(r.Generation.SandboxFlags) > 0 {
		notes = append(notes, fmt.Sprintf("%d sandbox flag(s) on the agent's cells; see tool_turns.json", max(n, len(r.Generation.SandboxFlags))))
	}
	if r.HumanCells > 0 {
		notes = append(notes, fmt.Sprintf("people ran %d cell(s) in the episode's kernel (%d robot calls, %d env steps: not the agent's)",
			r.HumanCells, r.HumanCalls, r.HumanEnvSteps))
	}
	if r.PrivilegedCalls > 0 {
		notes = append(notes, fmt.Sprintf("%d call(s) of privileged primitives (they read the simulator's ground truth; the paper's agent had none)", r.PrivilegedCalls))
	}
	if r.Perception == "simulator-masks" {
		notes = append(notes, "segment() read the simulator's own masks (privileged perception; the paper's agent used SAM 3)")
	}
	if !r.Sealed {
		notes = append(notes, "not sealed: the agent's kernel could read this machine's files (see seal.reason)")
	}
	return notes
}

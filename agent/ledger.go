package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/atomicfile"
	"github.com/pyrualean/pyrualean/notebooks"
)

// ledger is the episode's accounting, guarded by mu: result.json's contents, the tool calls made,
// the token usage, the model's finish and the trace's episode metadata.
type ledger struct {
	mu        sync.Mutex
	res       Result
	turns     int
	usage     Usage
	finish    *FinishInfo
	finished  bool // finish called, or the episode ended (budget, success refusal, death)
	budgetOut bool
	lastTool  string
	humans    []humanNote           // cells a person ran since the agent last heard of people
	ended     bool                  // Finish ran
	meta      notebooks.EpisodeMeta // the trace's metadata.pyrualean

	// People in the live episode (humans.go, accounting.go).
	spans         []execSpan          // cells the kernel ran, recent first last
	pendingCalls  []map[string]any    // ledger records whose cell is not known yet
	tallies       map[int]*humanTally // per person's cell: what it did to the robot
	humanSeq      int                 // people's cells seen so far
	humansRunning int                 // people's cells running or being accounted
	humansChanged chan struct{}       // closed and replaced when humansRunning changes
	running       *CellInfo           // the agent cell the kernel runs now
	interrupted   bool                // a person interrupted the running agent cell
	lingerUntil   time.Time           // kernel kept after the end until then (play --serve-linger)
	// accountingOver: Finish no longer accounts people's cells (their notes are still kept).
	accountingOver bool
}

// runFolder is the run folder's append-only files and the robot's workspace in it.
type runFolder struct {
	turnsW, callsW *jsonlWriter
	workspace      string
}

func (e *Episode) baseResult() Result {
	c := e.cfg
	host, _ := os.Hostname()
	r := Result{
		Schema: ResultSchema, System: "pyrualean", Arm: c.Arm, Backend: c.Robot, Robot: c.Robot,
		Suite: c.Suite, Task: c.Task, Seed: c.Seed, Model: c.Model, Runtime: c.Runtime,
		ReasoningEffort: c.ReasoningEffort, Images: c.Images, Feedback: c.Feedback, Primitives: c.Primitives,
		Guides: c.Guides, Status: StatusRunning, TimeoutS: c.Budget.Seconds(), CellTimeoutS: c.CellTimeout.Seconds(),
		Host: host, PID: os.Getpid(), CreatedAt: e.createdAt.UTC().Format(time.RFC3339),
		Generation: Generation{SandboxFlags: []string{}},
		Files:      RunFiles{Trace: "trace.ipynb", Prompt: "prompt.txt", Turns: "turns.jsonl", Calls: "calls.jsonl", Card: "card.json"},
	}
	r.BudgetMode = "wall"
	if c.MaxTurns > 0 {
		mt := c.MaxTurns
		r.MaxTurns = &mt
		r.BudgetMode = "calls"
	}
	if _, ok := c.Prices.Lookup(c.Model); ok {
		zero := 0.0
		r.CostUSD = &zero
	}
	return r
}

// updateTraceMeta changes the episode's trace metadata and writes it to the trace.
func (e *Episode) updateTraceMeta(change func(*notebooks.EpisodeMeta)) error {
	e.mu.Lock()
	change(&e.meta)
	m := e.meta.Map()
	e.mu.Unlock()
	return e.trace.SetEpisodeMeta(m)
}

// SetPlannerAttempts records how many times the runtime had to start the planner.
func (e *Episode) SetPlannerAttempts(n int) {
	e.mu.Lock()
	e.res.PlannerAttempts = n
	e.mu.Unlock()
}

// RecordTurn appends one LLM call to turns.jsonl and the episode's accounting.
func (e *Episode) RecordTurn(t Turn) error {
	e.mu.Lock()
	e.usage.Add(t.Usage)
	g := &e.res.Generation
	g.Turns++
	if t.Error != "" {
		g.Errors++
	}
	g.ToolCalls += len(t.ToolCalls)
	g.InputTokens, g.CachedInputTokens = e.usage.InputTokens, e.usage.CachedTokens
	g.OutputTokens, g.ReasoningOutputTokens = e.usage.OutputTokens, e.usage.ReasoningTokens
	g.TotalTokens = e.usage.InputTokens + e.usage.OutputTokens
	g.LatencyS = round3(g.LatencyS + t.LatencyS)
	if e.res.EnvironmentSuccess != nil && *e.res.EnvironmentSuccess {
		// What the episode spent after the task predicate fired (letting the model call finish).
		if e.res.AfterSuccess == nil {
			e.res.AfterSuccess = &AfterSuccess{}
		}
		e.res.AfterSuccess.LLMCalls++
		e.res.AfterSuccess.InputTokens += t.Usage.InputTokens
		e.res.AfterSuccess.OutputTokens += t.Usage.OutputTokens
	}
	if t.CostUSD != nil && e.res.CostUSD != nil {
		c := *e.res.CostUSD + *t.CostUSD
		e.res.CostUSD = &c
	}
	e.mu.Unlock()
	if err := e.turnsW.Write(t); err != nil {
		return fmt.Errorf("turns.jsonl: %w", err)
	}
	return e.saveResult()
}

// saveResult writes result.json from the current state.
func (e *Episode) saveResult() error {
	e.mu.Lock()
	r := e.res
	r.Generation.SandboxFlags = append([]string{}, e.res.Generation.SandboxFlags...)
	e.mu.Unlock()
	return atomicfile.WriteJSON(filepath.Join(e.cfg.Out, "result.json"), r)
}

// SetCLI records the agent CLI that drives the episode (codex, claude runtimes).
func (e *Episode) SetCLI(info CLIInfo) {
	e.mu.Lock()
	e.res.CLI = &info
	e.mu.Unlock()
	_ = e.saveResult()
}

// SetUsageTotals replaces the episode's token totals with a runtime's authoritative ones (a CLI's
// own summary), keeping the LLM-call count when the totals do not say.
func (e *Episode) SetUsageTotals(u Usage, costUSD *float64) {
	e.mu.Lock()
	if u.Calls == 0 {
		u.Calls = e.usage.Calls
	}
	e.usage = u
	g := &e.res.Generation
	g.InputTokens, g.CachedInputTokens = u.InputTokens, u.CachedTokens
	g.OutputTokens, g.ReasoningOutputTokens = u.OutputTokens, u.ReasoningTokens
	g.TotalTokens = u.InputTokens + u.OutputTokens
	if u.Calls > g.Turns {
		g.Turns = u.Calls
	}
	if costUSD != nil {
		c := *costUSD
		e.res.CostUSD = &c
	}
	e.mu.Unlock()
	_ = e.saveResult()
}

// absorbReport folds the agent's share of a cell report (account) into the episode's counters; it
// returns the environment's verdict and whether this report changed it.
func (e *Episode) absorbReport(r *cellReport) (success bool, changed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.res.ToolTurns = e.turns
	if r == nil {
		return false, false
	}
	e.res.Calls += len(r.Calls)
	for _, c := range r.Calls {
		if e.statefulLocked(c) {
			e.res.StatefulCalls++
		}
	}
	e.res.EnvSteps += r.EnvSteps
	if r.EnvStepsTotal > 0 {
		e.res.EnvStepsTotal = r.EnvStepsTotal
	}
	if r.Success != nil {
		s := *r.Success
		if prev := e.res.EnvironmentSuccess; prev == nil || !*prev {
			changed = prev == nil || *prev != s
			e.res.EnvironmentSuccess = &s
		}
	}
	if len(r.SandboxFlags) > 0 {
		// Keep the first and the latest flags: a flood cannot push a later attempt out of the record.
		g := &e.res.Generation
		g.SandboxFlagsTotal += len(r.SandboxFlags)
		g.SandboxFlags = append(g.SandboxFlags, r.SandboxFlags...)
		if n := len(g.SandboxFlags); n > 200 {
			g.SandboxFlags = append(g.SandboxFlags[:100:100], g.SandboxFlags[n-100:]...)
		}
	}
	if e.res.EnvironmentSuccess != nil {
		success = *e.res.EnvironmentSuccess
	}
	return success, changed
}

// jsonlWriter appends one JSON object per line; each line is one write(2), so a killed process leaves
// only whole lines behind.
type jsonlWriter struct {
	mu sync.Mutex
	f  *os.File
}

func openJSONL(path string) (*jsonlWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &jsonlWriter{f: f}, nil
}

func (w *jsonlWriter) Write(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return fmt.Errorf("jsonl writer closed")
	}
	_, err := w.f.Write(buf.Bytes())
	return err
}

func (w *jsonlWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

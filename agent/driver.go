package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
)

// Driver is what a runtime sees of a live episode: the tools to call, the prompt to send, and where
// to record each LLM call. *Episode implements it; package agent/runtimes drives it.
type Driver interface {
	Toolkit() Toolkit
	Prompt() Prompt
	Record() Recorder // where the runtime records what its model did
	Finished() bool   // finish was called or the episode is over
	Success() *bool   // the benchmark predicate so far (nil: unknown)
	Dir() string      // the run folder
	// AwaitTurn comes before each model decision of a runtime that makes the model call itself: it
	// waits while a person has the episode paused and returns what people did meanwhile, to tell the
	// model before it decides (people.go).
	AwaitTurn(ctx context.Context) (PeopleUpdate, error)
	// Decide derives the context of one model call (after AwaitTurn): a person's Pause while it is
	// under way ends it with cause ErrDecisionPaused; the runtime records the call as cancelled and
	// goes back to AwaitTurn, so the model is asked again when the episode goes on.
	Decide(ctx context.Context) (context.Context, context.CancelFunc)
}

// Recorder is where a runtime records what its model did: each LLM call, and what an agent CLI reports of
// itself. An episode's goes to turns.jsonl and result.json.
type Recorder interface {
	Turn(Turn) error                       // one LLM call: turns.jsonl and the episode's accounting
	PlannerAttempts(n int)                 // how many times the runtime had to start the planner
	CLI(CLIInfo)                           // result.json "cli" (agent CLI runtimes)
	UsageTotals(u Usage, costUSD *float64) // authoritative totals from a CLI's own summary
}

// ModelWaiter is a Driver whose policy clock can stop while its model call waits for a shared model
// server (result.json's model_queued_s): the wait is other episodes' time, not the agent's.
type ModelWaiter interface {
	WaitForModel() (done func())
}

// ErrPlanner marks a provider failure that ended an episode (status planner_error).
var ErrPlanner = errors.New("planner error")

// ErrNoToolCall marks a model that kept answering without calling a tool.
var ErrNoToolCall = errors.New("the model stopped calling tools")

// Turn is one LLM call, one line of turns.jsonl.
type Turn struct {
	Turn         int      `json:"turn"`
	StartedAt    string   `json:"started_at"`
	LatencyS     float64  `json:"latency_s"`
	Attempts     int      `json:"attempts"`
	Usage        Usage    `json:"usage"`
	CostUSD      *float64 `json:"cost_usd"`
	FinishReason string   `json:"finish_reason,omitempty"`
	ToolCalls    []string `json:"tool_calls"`
	Content      string   `json:"content,omitempty"`
	Reasoning    string   `json:"reasoning,omitempty"`
	// ReasoningEffort is the effort the request asked for ("" : none was sent).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	Error           string `json:"error,omitempty"`
	// QueuedS is the time the call waited, before it was sent, for a model server busy with other
	// episodes' calls; latency_s starts after it.
	QueuedS float64 `json:"queued_s,omitempty"`
	// Cancelled says a person's Pause cut the call (ErrDecisionPaused); its tokens, when the server
	// said them, are still counted.
	Cancelled bool `json:"cancelled,omitempty"`
	Images    int  `json:"images_sent"`
	// Timings are the server's own account of the reply (llama.cpp), when it gives one.
	Timings *ServerTimings `json:"timings,omitempty"`
	// Sampling is what the request's body asked of the sampler (OpenAI-compatible endpoints).
	Sampling *Sampling `json:"sampling,omitempty"`
}

// Sampling is what a request asked of the model's sampler, read from the body as it was sent (the
// runtime's defaults, the settings' extra body and a suite's per-sample seed all merged): what a table
// built from the runs must state to be reproduced. Absent fields were not sent (the endpoint's default).
type Sampling struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
}

// ReadTurns reads a run folder's turns.jsonl. A line that is not a Turn is an error naming its line:
// the file is written whole line by line, so a bad line means a foreign or damaged file.
func ReadTurns(path string) ([]Turn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var turns []Turn
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26) // a turn's content can be long
	for n := 1; sc.Scan(); n++ {
		var t Turn
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return turns, fmt.Errorf("%s: line %d: %w", path, n, err)
		}
		turns = append(turns, t)
	}
	return turns, sc.Err()
}

// ServerTimings is llama.cpp's "timings" of one reply: prompt processing and generation.
type ServerTimings struct {
	CacheN             int     `json:"cache_n"`  // prompt tokens reused from the cache
	PromptN            int     `json:"prompt_n"` // prompt tokens processed
	PromptMS           float64 `json:"prompt_ms"`
	PromptPerSecond    float64 `json:"prompt_per_second"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
}

// Toolkit returns the episode's tools.
func (e *Episode) Toolkit() Toolkit { return e.brief.tk }

// Prompt returns the prompt (prompt.txt and the card images).
func (e *Episode) Prompt() Prompt { return e.brief.prompt }

// Dir returns the run folder.
func (e *Episode) Dir() string { return e.spec.Out }

// Decide derives one model call's context: a Pause while it is under way cancels it (gate.go).
func (e *Episode) Decide(ctx context.Context) (context.Context, context.CancelFunc) {
	return e.gate.decide(ctx)
}

// WaitForModel stops the policy clock while a model call waits its turn on a server that other
// episodes' calls occupy (ModelWaiter); the returned func starts it again.
func (e *Episode) WaitForModel() (done func()) {
	e.clock.hold(holdModelQueue)
	var once sync.Once
	return func() { once.Do(func() { e.clock.release(holdModelQueue) }) }
}

// Record returns the episode's Recorder (its ledger).
func (e *Episode) Record() Recorder { return recorder{e.book} }

// recorder is the ledger as a runtime's Recorder.
type recorder struct{ b *ledger }

// Turn appends one LLM call to turns.jsonl and the episode's accounting.
func (r recorder) Turn(t Turn) error { return r.b.recordTurn(t) }

// PlannerAttempts records how many times the runtime had to start the planner.
func (r recorder) PlannerAttempts(n int) { r.b.update(func(res *Result) { res.PlannerAttempts = n }) }

// CLI records the agent CLI that drives the episode (codex, claude runtimes).
func (r recorder) CLI(info CLIInfo) {
	r.b.update(func(res *Result) { res.CLI = &info })
	_ = r.b.save()
}

// UsageTotals replaces the episode's token totals with a runtime's authoritative ones (a CLI's own
// summary), keeping the LLM-call count when the totals do not say.
func (r recorder) UsageTotals(u Usage, costUSD *float64) {
	r.b.setUsageTotals(u, costUSD)
	_ = r.b.save()
}

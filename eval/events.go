package eval

import "time"

// Event kinds, in the order a suite emits them.
const (
	EventSuiteStart = "suite_start"
	EventSkip       = "skip"  // finished in an earlier run: counted, not re-run
	EventStart      = "start" // an attempt began
	EventRetry      = "retry" // an attempt ended in a retryable state; another follows after Backoff
	EventFinish     = "finish"
	EventSuiteEnd   = "suite_end"
)

// Event is one step of a suite, for the live view and `eval --json`.
type Event struct {
	Time     time.Time `json:"time"`
	Kind     string    `json:"event"`
	ID       string    `json:"id,omitempty"`
	Arm      string    `json:"arm,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`
	Status   string    `json:"status,omitempty"`
	Success  *bool     `json:"environment_success,omitempty"`
	Error    string    `json:"error,omitempty"`
	WallS    float64   `json:"wall_s,omitempty"`
	InTok    int       `json:"input_tokens,omitempty"`
	LLMCalls int       `json:"llm_calls,omitempty"`
	CostUSD  float64   `json:"cost_usd,omitempty"`
	Backoff  float64   `json:"backoff_s,omitempty"`
	Total    int       `json:"total"`
	Done     int       `json:"done"`
	Running  int       `json:"running"`
}

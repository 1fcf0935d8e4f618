package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pyrualean/pyrualean/spec"
)

// ResultSchema names result.json's format: the original's episode fields plus ours (runtime, costs,
// human cells, trace paths, pid while running).
const ResultSchema = "pyrualean-episode-v2"

// Result is result.json. It is written when the episode starts (status "running"), after every tool
// call, and at the end, so a killed play leaves a result that summarize reports as interrupted.
type Result struct {
	Schema             string            `json:"schema"`
	System             string            `json:"system"`
	Arm                string            `json:"arm"`
	Backend            string            `json:"backend"`
	Robot              string            `json:"robot"`
	Suite              string            `json:"suite"`
	Task               string            `json:"task"`
	Seed               int               `json:"seed"`
	Sample             *spec.Sample      `json:"sample,omitempty"`        // its place in a group of rollouts (eval --samples)
	RobotOptions       map[string]string `json:"robot_options,omitempty"` // the robot's own make() options (--robot-opt)
	TaskLanguage       string            `json:"task_language"`
	Model              string            `json:"model"`
	Runtime            string            `json:"runtime"`
	ReasoningEffort    string            `json:"reasoning_effort"`
	Images             string            `json:"images"`
	Feedback           string            `json:"feedback"`
	Primitives         string            `json:"primitives"`
	Guides             Guides            `json:"guides"` // false, or where the guides came from and their sha256
	MaxTurns           *int              `json:"max_turns"`
	MaxPrograms        *int              `json:"max_programs"`      // program arm: run_program calls allowed (null: no limit)
	MaxEpisodeSteps    int               `json:"max_episode_steps"` // the simulator's step budget (the robot's, when not set)
	BudgetMode         string            `json:"budget_mode"`
	EnvironmentSuccess *bool             `json:"environment_success"`
	Status             string            `json:"status"`
	Reason             string            `json:"reason,omitempty"`
	Error              *ErrorField       `json:"error"`
	Finish             *FinishInfo       `json:"finish"`
	Calls              int               `json:"calls"`
	StatefulCalls      int               `json:"stateful_calls"`
	// PrivilegedCalls are the agent's calls of privileged primitives (they read the simulator's ground
	// truth: the paper's agent had none); summarize counts the episodes that made any.
	PrivilegedCalls int     `json:"privileged_calls"`
	EnvSteps        int     `json:"env_steps"`
	EnvStepsTotal   int     `json:"env_steps_total"`
	ToolTurns       int     `json:"tool_turns"`
	PolicyWallS     float64 `json:"policy_wall_s"`
	// PausedS is the time the agent was held by a person's pause: not in policy_wall_s, nor spent of
	// the wall-clock budget.
	PausedS  float64 `json:"paused_s"`
	StartupS float64 `json:"startup_s"`
	QueuedS  float64 `json:"queued_s,omitempty"` // booted, waiting for a suite's slot to act
	// ModelQueuedS is the time the agent's model calls waited for a model server busy with other
	// episodes' calls (the local runtime's one llama.cpp slot): not in policy_wall_s nor the budget.
	ModelQueuedS float64    `json:"model_queued_s,omitempty"`
	TotalWallS   float64    `json:"total_wall_s"`
	TimeoutS     float64    `json:"timeout_s"`
	CellTimeoutS float64    `json:"cell_timeout_s"`
	Prompt       PromptInfo `json:"prompt"`
	Generation   Generation `json:"generation"`
	CostUSD      *float64   `json:"cost_usd"`
	HumanCells   int        `json:"human_cells"`
	// HumanCellsAfterEnd are people's cells run after the episode ended, in the kernel kept for them
	// (play --serve-linger): in the trace (tagged after-end), never in the episode's other counts.
	HumanCellsAfterEnd int `json:"human_cells_after_end,omitempty"`
	// A person's robot calls, their stateful ones and env steps (cells run in JupyterLab): never
	// counted in calls, stateful_calls or env_steps, which are the agent's.
	HumanCalls         int       `json:"human_calls"`
	HumanStatefulCalls int       `json:"human_stateful_calls"`
	HumanEnvSteps      int       `json:"human_env_steps"`
	Host               HostInfo  `json:"host"`
	PID                int       `json:"pid,omitempty"`        // the play process, while it runs
	KernelPID          int       `json:"kernel_pid,omitempty"` // the kernel process (its own process group)
	Perception         string    `json:"perception,omitempty"` // where segment() masks come from, when the robot says (LIBERO)
	Sealed             bool      `json:"sealed"`               // the agent's kernel ran in an OS sandbox
	Seal               *SealInfo `json:"seal,omitempty"`       // where robot and judge live, the sandbox (sealed.go)
	CreatedAt          string    `json:"created_at"`
	FinishedAt         string    `json:"finished_at,omitempty"`
	Notes              []string  `json:"notes"` // plain words on what a reader of the numbers should know
	PlannerAttempts    int       `json:"planner_attempts"`
	Files              RunFiles  `json:"files"`
	CLI                *CLIInfo  `json:"cli,omitempty"`
	// AfterSuccess is what the LLM calls made once the environment said success cost (nil: none).
	AfterSuccess *AfterSuccess `json:"after_success,omitempty"`
}

// AfterSuccess counts the LLM calls made after the task predicate fired (the model calling finish).
type AfterSuccess struct {
	LLMCalls     int `json:"llm_calls"`
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// CLIInfo describes an agent CLI runtime (codex, claude) in result.json.
type CLIInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Events  string `json:"events,omitempty"` // events file in the run folder
	Stderr  string `json:"stderr,omitempty"` // stderr file in the run folder

	SessionID string `json:"session_id,omitempty"`
	ExitCode  *int   `json:"exit_code"`        // nil when the process was killed
	Killed    string `json:"killed,omitempty"` // why we stopped it (budget, cancellation), if we did
}

// ErrorField is result.json's error{type,message}.
type ErrorField struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// FinishInfo is what the model said when it called finish.
type FinishInfo struct {
	Status                 string `json:"status"`
	Summary                string `json:"summary"`
	EnvironmentTerminated  bool   `json:"environment_terminated"`
	AfterCallBudgetExhaust bool   `json:"after_call_budget,omitempty"`
}

// PromptInfo describes prompt.txt.
type PromptInfo struct {
	Profile string   `json:"profile"` // default | compact
	Chars   int      `json:"chars"`
	SHA256  string   `json:"sha256"`
	Images  []string `json:"images"`
}

// Generation is the model side of the episode.
type Generation struct {
	Turns                 int      `json:"turns"` // LLM calls
	ToolCalls             int      `json:"tool_calls"`
	Errors                int      `json:"errors"`
	InputTokens           int      `json:"input_tokens"`
	CachedInputTokens     int      `json:"cached_input_tokens"`
	OutputTokens          int      `json:"output_tokens"`
	ReasoningOutputTokens int      `json:"reasoning_output_tokens"`
	TotalTokens           int      `json:"total_tokens"`
	LatencyS              float64  `json:"latency_s"`
	SandboxFlags          []string `json:"sandbox_flags"`
	SandboxFlagsTotal     int      `json:"sandbox_flags_total,omitempty"` // all flags; the list keeps the first and latest
	// Sampling is the first LLM call's (turns.jsonl has every call's); absent where the runtime sends
	// no body of its own (agent CLIs).
	Sampling *Sampling `json:"sampling,omitempty"`
}

// RunFiles names the run folder's files, relative to it.
type RunFiles struct {
	Trace  string `json:"trace"`
	Prompt string `json:"prompt"`
	Turns  string `json:"turns"`
	Calls  string `json:"calls"`
	Card   string `json:"card,omitempty"`
}

// Guides is result.json's guides: false when the episode had none, else where they came from and each
// file's sha256 (exactly which text the agent could read), as the original records them.
type Guides struct {
	Source string            `json:"source"`
	Files  map[string]string `json:"files"` // file name -> sha256
	// Paper says whether these are the paper's guides (RPent's, from $RPENT_ROOT) or pyrualean's own.
	Paper bool `json:"paper"`
}

// MarshalJSON writes false for no guides.
func (g Guides) MarshalJSON() ([]byte, error) {
	if g.Source == "" && len(g.Files) == 0 {
		return []byte("false"), nil
	}
	type plain Guides
	return json.Marshal(plain(g))
}

// UnmarshalJSON reads false (or true, from older runs) as well as the record.
func (g *Guides) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "false", "null":
		*g = Guides{}
		return nil
	case "true":
		*g = Guides{Source: "unknown"}
		return nil
	}
	type plain Guides
	return json.Unmarshal(b, (*plain)(g))
}

// HostInfo is result.json's host: where and how the episode ran (a dict, as the original's).
type HostInfo struct {
	Name         string `json:"hostname"`
	Python       string `json:"python"`
	CUDADevice   string `json:"cuda_device"`
	PrimitiveSet string `json:"primitive_set"`
	RPentRoot    string `json:"rpent_root,omitempty"`
	// Node is the cluster node that ran the episode (its Ray node id, --engine ray).
	Node string `json:"node,omitempty"`
}

// UnmarshalJSON also reads the plain host name older runs wrote.
func (h *HostInfo) UnmarshalJSON(b []byte) error {
	var name string
	if json.Unmarshal(b, &name) == nil {
		*h = HostInfo{Name: name}
		return nil
	}
	type plain HostInfo
	return json.Unmarshal(b, (*plain)(h))
}

// ReadResult reads a run folder's result.json.
func ReadResult(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "result.json"), err)
	}
	return &r, nil
}

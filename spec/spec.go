// Package spec says what an episode is: one typed value (Episode, with the Policy that drives it),
// built by the command line's flags, by a matrix row or by any Go caller through one table of settings
// (settings.go: each setting's name, help and default have their home there), checked once by
// Validate (validate.go), and carried unchanged to wherever the episode runs (a suite's job, a Ray
// node's job file, an OpenEnv session). Nothing turns a spec into argv and back.
package spec

import (
	"time"

	"github.com/pyrualean/pyrualean/prices"
)

// Arms, image policies, feedback modes, primitive sets, prompt profiles and sealed modes, spelled as the
// original's command line spells them.
const (
	ArmCells   = "cells"   // python(code) + finish: code cells in a persistent kernel
	ArmTools   = "tools"   // one function tool per primitive + finish
	ArmProgram = "program" // run_program(code | path): whole programs defining run(robo) + finish

	ImagesOnMotion = "on-motion"
	ImagesOnDemand = "on-demand"
	ImagesNone     = "none"

	FeedbackPure = "pure"
	FeedbackRich = "rich"

	PrimitivesFull  = "full"
	PrimitivesNoVLA = "no-vla"
	PrimitivesPaper = "paper" // the paper's: no privileged primitive (none that reads the simulator's ground truth)

	ProfileDefault = "default" // the original's prompt
	ProfileCompact = "compact" // fewer words and worked examples, for small local models

	SealOff  = "off"  // the robot lives in the kernel
	SealAuto = "auto" // robot server + OS sandbox where this machine has one; else said loudly
	SealOn   = "on"   // robot server + OS sandbox, or the episode does not start
)

// SeedDefault asks for the robot's own default seed (Validate resolves it from the robot registry).
const SeedDefault = -1

// Episode is one episode: which robot, task and seed, in which arm, under which budgets, driven by which
// policy, recorded where. JSON names follow result.json's where both have the field.
type Episode struct {
	Robot string `json:"robot"`           // a registry name; "" : the robot owning Suite, else the default robot
	Suite string `json:"suite,omitempty"` // a benchmark's task set (it implies its robot)
	Task  string `json:"task,omitempty"`  // a task name or index ("" : the robot's first); "SUITE/INDEX" is split
	Seed  int    `json:"seed"`            // the layout seed; SeedDefault: the robot's own
	// RobotOptions are the robot's own make() keyword arguments (--robot-opt KEY=VALUE), as given: the
	// robot package checks them against its class and turns each into its kind.
	RobotOptions map[string]string `json:"robot_options,omitempty"`

	Arm             string  `json:"arm"`
	MaxPrograms     int     `json:"max_programs"`                // program arm: run_program calls allowed; 0: unlimited
	ProgramTimeoutS float64 `json:"program_timeout_s,omitempty"` // program arm: one program's watchdog; 0: CellTimeoutS
	Images          string  `json:"images"`
	Feedback        string  `json:"feedback"`
	PromptProfile   string  `json:"prompt_profile"` // "" : compact for the local runtime's cells and tools arms, else default
	Primitives      string  `json:"primitives"`
	Guides          bool    `json:"guides"`
	// MaxCalls bounds the agent's calls (python, primitive or run_program; the original's --max-turns);
	// 0: no limit. finish is not bounded by it.
	MaxCalls     int     `json:"max_turns"`
	BudgetS      float64 `json:"budget_s"`       // the policy's wall-clock budget; 0: none
	CellTimeoutS float64 `json:"cell_timeout_s"` // one cell's limit (the kernel is interrupted); 0: none
	MaxEnvSteps  int     `json:"max_env_steps"`  // the simulator's step budget; 0: the robot's own
	Sealed       string  `json:"sealed"`
	CUDADevice   string  `json:"cuda_device,omitempty"`
	Out          string  `json:"out,omitempty"` // the run folder (absolute after Validate)

	Policy Policy `json:"policy"`
	// Sample is the episode's place in a group of rollouts of one instance (eval --samples K > 1);
	// nil: a lone episode.
	Sample *Sample `json:"sample,omitempty"`

	envErrs []error     // a default from the environment that is not a value (New); Validate reports it
	given   [][2]string // flags given and not applied yet (Flags, ApplyFlags)
}

// Sample is one rollout of a group: the K rollouts of the same instance (robot, task, seed, arm, policy,
// settings) that pass@K and a group-normalised advantage are computed over.
type Sample struct {
	Index int `json:"index"` // 0-based, < Of
	Of    int `json:"of"`    // K, the group's size
	// Seed is the sampling seed, sent to the endpoint as the request's `seed` (distinct in a group).
	Seed int64 `json:"seed"`
}

// Policy is what decides the episode's actions: a runtime (a model backend, an agent CLI or the
// replay of recorded actions) and its settings. It holds names, never secrets: the API key is read
// from the environment variable APIKeyEnv names, where the runtime runs.
type Policy struct {
	Runtime   string `json:"runtime"`             // openai | local | codex | claude | replay ...; "" : chosen (runtimes.Resolve)
	Model     string `json:"model,omitempty"`     // "" : the runtime's default
	Reasoning string `json:"reasoning,omitempty"` // reasoning effort
	BaseURL   string `json:"base_url,omitempty"`
	APIKeyEnv string `json:"api_key_env,omitempty"`
	From      string `json:"from,omitempty"` // replay: a trace (.ipynb) or percent-format script (.py)
	OpenAI    OpenAI `json:"openai"`
	// Prices are the user's prices ($ per million tokens by model: --prices, --price-*), over the dated
	// table shipped with pyrualean (PriceTable); a model without a price costs "unknown", never $0.
	Prices *prices.Table `json:"prices,omitempty"`
	// RecordTokens asks the endpoint for token ids and logprobs and keeps them (tokens.jsonl).
	RecordTokens bool `json:"record_tokens,omitempty"`
}

// OpenAI are the request settings of chat-completions runtimes (the --openai-* flags).
type OpenAI struct {
	MaxTokens    int            `json:"max_tokens,omitempty"`  // 0: the server's default
	ToolChoice   string         `json:"tool_choice,omitempty"` // "", auto, required, none
	Temperature  *float64       `json:"temperature,omitempty"` // sent even when 0
	ExtraBody    map[string]any `json:"extra_body,omitempty"`  // merged into every request body
	ImagesInTool bool           `json:"images_in_tool,omitempty"`
	MaxImages    int            `json:"max_images,omitempty"` // keep the newest N images in the history; 0: all
	TextOnly     bool           `json:"text_only,omitempty"`  // the model takes no images
}

// Budget is the policy's wall-clock budget (0: none).
func (e Episode) Budget() time.Duration { return seconds(e.BudgetS) }

// CellTimeout is one cell's limit (0: none).
func (e Episode) CellTimeout() time.Duration { return seconds(e.CellTimeoutS) }

// ProgramTimeout is one program's watchdog in the program arm: ProgramTimeoutS, else CellTimeoutS.
func (e Episode) ProgramTimeout() time.Duration {
	if e.ProgramTimeoutS > 0 {
		return seconds(e.ProgramTimeoutS)
	}
	return e.CellTimeout()
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// PriceTable is the table the policy's LLM calls are priced with: the dated one shipped with pyrualean,
// with the user's Prices over it.
func (p Policy) PriceTable() *prices.Table {
	t, err := prices.Embedded()
	if err != nil { // a build without a readable table prices only what the user gave
		return p.Prices
	}
	if p.Prices != nil {
		t = t.Merge(p.Prices)
	}
	return t
}

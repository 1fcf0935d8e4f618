package spec

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/prices"
)

// Setting is one thing an episode can be told: a command-line flag (--Name), a matrix row's setting
// (name = value) and an OpenEnv reset key, all through the same setter. Default is the value the setting
// has when nobody gives one (Env, when set in the environment, replaces it); it is applied by New.
type Setting struct {
	Name    string
	Usage   string
	Default string
	Env     string // an environment variable whose value, when set, is the default
	Bool    bool   // a flag without a value
	Repeat  bool   // may be given many times (each adds: --robot-opt)
	// PerEpisode settings name the episode itself (robot, task, seed, arm, runtime, model, out, from): a
	// suite sets them per episode, so a matrix row's settings may not.
	PerEpisode bool
	set        func(e *Episode, v string) error
}

// Settings is the table of everything an episode can be told, in the order help lists it. Adding a
// setting: a field in Episode or Policy, one row here.
func Settings() []Setting { return append(episodeSettings(), policySettings()...) }

// episodeSettings are what the episode is: robot, task, arm, budgets, images, seal.
func episodeSettings() []Setting {
	return []Setting{
		{Name: "robot", Usage: "robot (pyrualean suites lists them; default: the robot owning --suite, else the default robot)", PerEpisode: true,
			set: func(e *Episode, v string) error { e.Robot = v; return nil }},
		{Name: "suite", Usage: "benchmark suite (see pyrualean suites); it implies its robot", PerEpisode: true,
			set: func(e *Episode, v string) error { e.Suite = v; return nil }},
		{Name: "task", Usage: "task name or index, or SUITE/INDEX (default: the robot's first task)", PerEpisode: true,
			set: func(e *Episode, v string) error { e.Task = v; return nil }},
		{Name: "seed", Usage: "episode seed (default: the robot's own, as make() picks it)", Default: "", PerEpisode: true,
			set: func(e *Episode, v string) error {
				if v == "" {
					e.Seed = SeedDefault
					return nil
				}
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return errors.New("want an integer >= 0")
				}
				e.Seed = n
				return nil
			}},
		{Name: "robot-opt", Usage: "one of the robot's own make() options, KEY=VALUE (repeatable; pyrualean suites --json lists them)", Repeat: true,
			set: func(e *Episode, v string) error {
				k, val, ok := strings.Cut(v, "=")
				if !ok || k == "" {
					return errors.New("want KEY=VALUE")
				}
				return e.setRobotOption(k, val)
			}},
		robotOption("vla-endpoint", "vla_endpoint", "VLA server for the learned primitives ([ws|http|socket]://host:port; default $PYRUALEAN_VLA_ENDPOINT); the robot option vla_endpoint"),
		robotOption("env-endpoint", "env_url", "running RPent env server for remote robots (http://host:port or socket://host:port; default $PYRUALEAN_ENV_SERVER); the robot option env_url"),
		robotOption("libero-type", "libero_type", "LIBERO variant, as the original: standard or pro; the robot option libero_type"),
		robotOption("sam3-endpoint", "sam3_endpoint", "SAM 3 server for LIBERO's segment (http://host:port); the robot option sam3_endpoint"),
		{Name: "arm", Usage: "cells (python + finish), tools (one tool per primitive + finish) or program (run_program + finish)", Default: ArmCells, PerEpisode: true,
			set: oneOf(func(e *Episode) *string { return &e.Arm }, ArmCells, ArmTools, ArmProgram)},
		{Name: "max-programs", Usage: "program arm: run_program calls allowed (0: no limit; 1: the single-program setup)", Default: "0",
			set: intAtLeast(0, func(e *Episode) *int { return &e.MaxPrograms })},
		{Name: "program-timeout-s", Usage: "program arm: watchdog of one program in seconds (default --cell-timeout-s)", Default: "0",
			set: floatAtLeast(0, func(e *Episode) *float64 { return &e.ProgramTimeoutS })},
		{Name: "max-turns", Usage: "maximum python/primitive/run_program calls (0: no limit; finish never counts)", Default: "0",
			set: intAtLeast(0, func(e *Episode) *int { return &e.MaxCalls })},
		{Name: "budget-s", Usage: "wall-clock budget of the policy in seconds (0: none)", Default: "1200",
			set: floatAtLeast(0, func(e *Episode) *float64 { return &e.BudgetS })},
		{Name: "cell-timeout-s", Usage: "per-cell timeout in seconds: the kernel is interrupted (0: none, as the original: the budget bounds a cell)", Default: "0",
			set: floatAtLeast(0, func(e *Episode) *float64 { return &e.CellTimeoutS })},
		{Name: "max-episode-steps", Usage: "simulator step budget (0: the robot's own, 10000 on the embedded robot)", Default: "0",
			set: intAtLeast(0, func(e *Episode) *int { return &e.MaxEnvSteps })},
		{Name: "out", Usage: "run folder (default runs/<time>-<robot>-<task>-<arm>)", PerEpisode: true,
			set: func(e *Episode, v string) error { e.Out = v; return nil }},
		{Name: "images", Usage: "on-motion, on-demand or none", Default: ImagesOnMotion,
			set: oneOf(func(e *Episode) *string { return &e.Images }, ImagesOnMotion, ImagesOnDemand, ImagesNone)},
		{Name: "feedback", Usage: "pure or rich", Default: FeedbackRich,
			set: oneOf(func(e *Episode) *string { return &e.Feedback }, FeedbackPure, FeedbackRich)},
		{Name: "guides", Usage: "add the robot's guides to the prompt and the workspace", Bool: true, Default: "false",
			set: boolSetting(func(e *Episode) *bool { return &e.Guides })},
		{Name: "primitives", Usage: "full, no-vla (no learned-policy primitives) or paper (no privileged primitive: none that reads the simulator's ground truth); default $PYRUALEAN_PRIMITIVES, else full", Default: PrimitivesFull, Env: "PYRUALEAN_PRIMITIVES",
			set: oneOf(func(e *Episode) *string { return &e.Primitives }, PrimitivesFull, PrimitivesNoVLA, PrimitivesPaper)},
		{Name: "prompt-profile", Usage: "default (the original's prompt) or compact (fewer words, worked examples from other task families); default: compact for --runtime local, else default",
			set: oneOf(func(e *Episode) *string { return &e.PromptProfile }, "", ProfileDefault, ProfileCompact)},
		{Name: "sealed", Usage: "auto (robot server + OS sandbox where available, else said loudly and recorded sealed: false), on (refuse to start unsealed) or off (the robot in the kernel)", Default: SealAuto,
			set: oneOf(func(e *Episode) *string { return &e.Sealed }, SealOff, SealAuto, SealOn)},
		{Name: "cuda-device", Usage: "CUDA_VISIBLE_DEVICES for the robot (its server when sealed, else the kernel)",
			set: func(e *Episode, v string) error { e.CUDADevice = v; return nil }},
	}
}

// policySettings are what decides the actions: the runtime, its model and its requests.
func policySettings() []Setting {
	return []Setting{
		{Name: "runtime", Usage: "what decides: openai (any OpenAI-compatible endpoint), local (embedded llama.cpp model), codex, claude, or replay (recorded actions); default: $PYRUALEAN_RUNTIME, else openai when --base-url or $OPENAI_BASE_URL is set, else local for an embedded --model (or none), else codex", PerEpisode: true,
			set: func(e *Episode, v string) error { e.Policy.Runtime = v; return nil }},
		{Name: "model", Usage: "model name (default $PYRUALEAN_MODEL; the local runtime: its embedded model)", PerEpisode: true,
			set: func(e *Episode, v string) error { e.Policy.Model = v; return nil }},
		{Name: "reasoning", Usage: "reasoning effort, sent as reasoning_effort and recorded (--runtime codex: default xhigh, as the original)",
			set: func(e *Episode, v string) error { e.Policy.Reasoning = v; return nil }},
		{Name: "from", Usage: "replay: a trace (.ipynb) or a percent-format script (.py) of agent cells", PerEpisode: true,
			set: func(e *Episode, v string) error { e.Policy.From = v; return nil }},
		{Name: "base-url", Usage: "OpenAI-compatible base URL (default $OPENAI_BASE_URL; --runtime openai without either: https://api.openai.com/v1)",
			set: func(e *Episode, v string) error { e.Policy.BaseURL = v; return nil }},
		{Name: "api-key-env", Usage: "environment variable holding the API key (default OPENAI_API_KEY; claude: ANTHROPIC_API_KEY)",
			set: func(e *Episode, v string) error { e.Policy.APIKeyEnv = v; return nil }},
		{Name: "openai-max-tokens", Usage: "max_tokens per reply (0: server default)", Default: "0",
			set: intAtLeast(0, func(e *Episode) *int { return &e.Policy.OpenAI.MaxTokens })},
		{Name: "openai-tool-choice", Usage: "tool_choice: auto, required or none (default: not sent)",
			set: oneOf(func(e *Episode) *string { return &e.Policy.OpenAI.ToolChoice }, "", "auto", "required", "none")},
		{Name: "openai-temperature", Usage: "temperature in [0, 2], sent even when 0 (default: not sent)",
			set: func(e *Episode, v string) error {
				if v == "" {
					e.Policy.OpenAI.Temperature = nil
					return nil
				}
				t, err := strconv.ParseFloat(v, 64)
				if err != nil || t < 0 || t > 2 {
					return errors.New("want a number in [0, 2]")
				}
				e.Policy.OpenAI.Temperature = &t
				return nil
			}},
		{Name: "openai-extra-body", Usage: "JSON object merged into every request body (top_p, top_k, chat_template_kwargs, ...)",
			set: func(e *Episode, v string) error {
				if v == "" {
					e.Policy.OpenAI.ExtraBody = nil
					return nil
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(v), &m); err != nil || m == nil {
					return fmt.Errorf("want a JSON object: %v", orText(err, "null"))
				}
				e.Policy.OpenAI.ExtraBody = m
				return nil
			}},
		{Name: "openai-images-in-tool", Usage: "put images inside tool messages instead of a following user message", Bool: true, Default: "false",
			set: boolSetting(func(e *Episode) *bool { return &e.Policy.OpenAI.ImagesInTool })},
		{Name: "openai-max-images", Usage: "keep only the newest N images in the replayed history (0: all)", Default: "0",
			set: intAtLeast(0, func(e *Episode) *int { return &e.Policy.OpenAI.MaxImages })},
		{Name: "openai-text-only", Usage: "the model takes no images: send a note instead (set for --runtime local)", Bool: true, Default: "false",
			set: boolSetting(func(e *Episode) *bool { return &e.Policy.OpenAI.TextOnly })},
		{Name: "record-tokens", Usage: "ask the endpoint for token ids and logprobs and keep them per LLM call (tokens.jsonl), for training", Bool: true, Default: "false",
			set: boolSetting(func(e *Episode) *bool { return &e.Policy.RecordTokens })},
		{Name: "prices", Usage: "price table JSON {model: {input, cached_input, output}} in $ per million tokens",
			set: func(e *Episode, v string) error {
				if v == "" {
					return nil
				}
				t, err := prices.Read(v)
				if err != nil {
					return err
				}
				if e.Policy.Prices != nil {
					t = e.Policy.Prices.Merge(t)
				}
				e.Policy.Prices = t
				return nil
			}},
	}
}

// robotOption is a flag of the original's that sets one robot option.
func robotOption(flagName, option, usage string) Setting {
	return Setting{Name: flagName, Usage: usage, set: func(e *Episode, v string) error { return e.setRobotOption(option, v) }}
}

func (e *Episode) setRobotOption(k, v string) error {
	if v == "" {
		delete(e.RobotOptions, k)
		return nil
	}
	if e.RobotOptions == nil {
		e.RobotOptions = map[string]string{}
	}
	e.RobotOptions[k] = v
	return nil
}

// New is an episode with every setting at its default (the environment's where a setting names one).
func New() Episode {
	e := Episode{Seed: SeedDefault}
	for _, s := range Settings() {
		v := s.Default
		if s.Env != "" {
			if ev, ok := os.LookupEnv(s.Env); ok && ev != "" {
				v = ev
			}
		}
		if v == "" {
			continue
		}
		if err := s.set(&e, v); err != nil {
			// Only an environment variable can be wrong here; Validate reports it with its name.
			e.envErrs = append(e.envErrs, fmt.Errorf("$%s %q: %w (fix or unset it)", s.Env, v, err))
		}
	}
	return e
}

// ErrUnknownSetting is wrapped by Set's error for a name no setting has.
var ErrUnknownSetting = errors.New("no such setting")

// Set gives setting name (a flag's name without dashes; '_' is read as '-') the value v.
func (e *Episode) Set(name, v string) error {
	name = strings.ReplaceAll(name, "_", "-")
	for _, s := range Settings() {
		if s.Name == name {
			if err := s.set(e, v); err != nil {
				return fmt.Errorf("--%s %q: %w", name, v, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%w %q (see pyrualean play -h)", ErrUnknownSetting, name)
}

// Lookup finds a setting by name.
func Lookup(name string) (Setting, bool) {
	name = strings.ReplaceAll(name, "_", "-")
	i := slices.IndexFunc(Settings(), func(s Setting) bool { return s.Name == name })
	if i < 0 {
		return Setting{}, false
	}
	return Settings()[i], true
}

// Flags registers every setting not in skip on fs, bound to e. A flag's value is checked and applied
// when ApplyFlags runs (after fs.Parse), in the order given, so that a bad value is reported as
// `--name "value": why`, without the flag package's usage dump.
func (e *Episode) Flags(fs *flag.FlagSet, skip ...string) {
	for _, s := range Settings() {
		if slices.Contains(skip, s.Name) {
			continue
		}
		fs.Var(&settingFlag{e: e, s: s}, s.Name, s.Usage)
	}
}

// ApplyFlags applies the values Flags' flags were given; the first bad one is the error.
func (e *Episode) ApplyFlags() error {
	given := e.given
	e.given = nil
	for _, g := range given {
		if err := e.Set(g[0], g[1]); err != nil {
			return err
		}
	}
	return nil
}

// settingFlag is a flag.Value over one setting of an episode.
type settingFlag struct {
	e *Episode
	s Setting
}

func (f *settingFlag) String() string {
	if f == nil || f.e == nil {
		return ""
	}
	return f.s.Default
}
func (f *settingFlag) Set(v string) error {
	f.e.given = append(f.e.given, [2]string{f.s.Name, v})
	return nil
}
func (f *settingFlag) IsBoolFlag() bool { return f.s.Bool }

func oneOf(field func(*Episode) *string, allowed ...string) func(*Episode, string) error {
	return func(e *Episode, v string) error {
		if !slices.Contains(allowed, v) {
			shown := slices.DeleteFunc(slices.Clone(allowed), func(a string) bool { return a == "" })
			return fmt.Errorf("want one of %s", strings.Join(shown, ", "))
		}
		*field(e) = v
		return nil
	}
}

func intAtLeast(lo int, field func(*Episode) *int) func(*Episode, string) error {
	return func(e *Episode, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo {
			return fmt.Errorf("want an integer >= %d", lo)
		}
		*field(e) = n
		return nil
	}
}

func floatAtLeast(lo float64, field func(*Episode) *float64) func(*Episode, string) error {
	return func(e *Episode, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < lo {
			// a Go duration is accepted too (90s, 5m), as people write them
			if d, derr := time.ParseDuration(v); derr == nil && d >= 0 {
				*field(e) = d.Seconds()
				return nil
			}
			return fmt.Errorf("want a number of seconds >= %g (or a duration: 90s, 5m)", lo)
		}
		*field(e) = f
		return nil
	}
}

func boolSetting(field func(*Episode) *bool) func(*Episode, string) error {
	return func(e *Episode, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("want true or false")
		}
		*field(e) = b
		return nil
	}
}

func orText(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

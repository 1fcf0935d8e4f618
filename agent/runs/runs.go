// Package runs reads run folders and reports on them, counting as the original (PyRUA-Lean's
// evaluation/metrics.py) counts: LoadRuns (result.json of each folder, or an RPent run; read only),
// Summarize (the original's summarize table and aggregates), Compare (two systems paired by robot,
// suite:task and seed) and the paper's table (table.go: success, and calls, tokens and cost on
// jointly solved instances, per benchmark, with confidence intervals; render.go prints it as text,
// Markdown, LaTeX or CSV). The counting rules are in count.go; prices come from package prices.
package runs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/pyrualean/pyrualean/agent"
)

// Row is one episode as summarize and compare see it.
type Row struct {
	Path   string `json:"path"`
	System string `json:"system"` // "pyrualean:cells", "rpent:tools": the original's system column
	Arm    string `json:"arm"`
	Robot  string `json:"robot"`
	Suite  string `json:"suite,omitempty"`
	Task   string `json:"task"` // suite:task
	Seed   int    `json:"seed"`
	Model  string `json:"model,omitempty"`
	// OK is the benchmark's own predicate. As the original, an episode of ours without a recorded
	// outcome (a crash, a timeout before any cell ended) reads as false, NullOutcome saying so; nil
	// is left only for an RPent run without states.json (unknown) and an episode still running.
	OK          *bool   `json:"ok"`
	NullOutcome bool    `json:"null_outcome,omitempty"`
	Status      string  `json:"status"`
	Turns       int     `json:"turns"`
	Calls       int     `json:"calls"`
	Steps       int     `json:"steps"`
	WallS       float64 `json:"wall_s"`
	InTok       int     `json:"in_tok"`
	Cached      int     `json:"cached"`
	OutTok      int     `json:"out_tok"`
	LLMCalls    int     `json:"llm_calls"`
	// Cost is what the episode's LLM calls cost in US dollars (nil: unknown), CostSource where the
	// figure comes from (see PriceRows): "recorded" (result.json), "prices" (a price table), "no LLM
	// calls", or "unknown: <why>".
	Cost       *float64 `json:"cost"`
	CostSource string   `json:"cost_source,omitempty"`
	Stateful   int      `json:"stateful_calls"`
	Reasoning  int      `json:"reasoning_tok"`
	Sealed     bool     `json:"sealed"` // the agent's kernel ran in an OS sandbox, the judge in the robot server
	// SealPending: the episode is running and its kernel has not started yet, so it is neither sealed nor
	// unsealed (a suite prepares its next episode while one runs).
	SealPending bool `json:"seal_pending,omitempty"`
	// Perception is where segment()'s masks came from when the robot says ("sam3", or the privileged
	// "simulator-masks"); empty for robots without the distinction.
	Perception string `json:"perception,omitempty"`
	// Privileged counts the agent's calls of privileged primitives (they read the simulator's ground truth).
	Privileged int `json:"privileged_calls,omitempty"`
	// Primitives is the primitive set the episode ran with (full, no-vla, paper).
	Primitives string `json:"primitives,omitempty"`
	// What people did in the live episode (JupyterLab through the gateway): never in the agent's columns.
	HumanCells    int `json:"human_cells"`
	HumanCalls    int `json:"human_calls"`
	HumanStateful int `json:"human_stateful_calls"`
	HumanSteps    int `json:"human_env_steps"`
	// Sample and Samples place a group rollout (eval --samples K): its index and K; Samples 0 for a lone
	// episode. Group names its instance apart from the other instances of the same system (passk.go).
	Sample  int    `json:"sample,omitempty"`
	Samples int    `json:"samples,omitempty"`
	Group   string `json:"group,omitempty"`
}

// LoadError names a run folder that could not be read.
type LoadError struct {
	Path string `json:"path"`
	Err  string `json:"error"`
}

// LoadRuns reads every run folder under the given paths. A path may be a run folder (it holds
// result.json, or is an RPent run folder: transcript_*.json, see rpent.go) or any directory above run
// folders, an eval eval folder among them (its attempts/ hold earlier, unfinished attempts of
// episodes that ran again: they are not episodes and are skipped). Missing or corrupt folders are
// reported, not fatal.
func LoadRuns(paths []string) ([]Row, []LoadError) {
	var rows []Row
	var errs []LoadError
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			errs = append(errs, LoadError{p, errString(err)})
			continue
		}
		if !st.IsDir() {
			if filepath.Base(p) == "result.json" {
				p = filepath.Dir(p)
			} else {
				errs = append(errs, LoadError{p, "not a run folder (expected a directory holding result.json)"})
				continue
			}
		}
		dirs, werrs := runDirs(p)
		errs = append(errs, werrs...)
		if len(dirs) == 0 {
			errs = append(errs, LoadError{p, "no result.json found (not a run folder)"})
		}
		for _, d := range dirs {
			r, err := LoadRun(d)
			if err != nil {
				errs = append(errs, LoadError{d, errString(err)})
				continue
			}
			rows = append(rows, r)
		}
	}
	return rows, errs
}

// runDirs lists the run folders under p, sorted.
func runDirs(p string) ([]string, []LoadError) {
	var dirs []string
	var errs []LoadError
	walkErr := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, LoadError{path, errString(err)})
			return nil
		}
		if d.IsDir() && (d.Name() == "workspace" || d.Name() == "card") {
			return fs.SkipDir
		}
		if d.IsDir() && d.Name() == "attempts" && IsSuiteDir(filepath.Dir(path)) {
			return fs.SkipDir
		}
		if !d.IsDir() && d.Name() == "result.json" {
			dirs = append(dirs, filepath.Dir(path))
		}
		if d.IsDir() && isRPentRun(path) {
			dirs = append(dirs, path)
		}
		return nil
	})
	if walkErr != nil {
		errs = append(errs, LoadError{p, errString(walkErr)})
	}
	sort.Strings(dirs)
	return dirs, errs
}

// IsSuiteDir says whether dir is an eval eval folder (it holds manifest.json and episodes/).
func IsSuiteDir(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, "episodes"))
	return err == nil && st.IsDir()
}

func errString(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// LoadRun reads one run folder's result.json (or, lacking one, an RPent run's transcript). A result
// still marked running whose play process is gone is reported as interrupted; the file is left as it
// is. An outcome that was never recorded reads as a failure, as the original reads it.
func LoadRun(dir string) (Row, error) {
	if _, err := os.Stat(filepath.Join(dir, "result.json")); err != nil && isRPentRun(dir) {
		return loadRPentRun(dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		return Row{}, err
	}
	var res agent.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return Row{}, fmt.Errorf("result.json is corrupt: %w", err)
	}
	if res.Schema != "" && res.Schema != agent.ResultSchema {
		return Row{}, fmt.Errorf("result.json has schema %q, want %q", res.Schema, agent.ResultSchema)
	}
	status := res.Status
	host, _ := os.Hostname()
	if status == agent.StatusRunning && (res.Host.Name == "" || res.Host.Name == host) && !processAlive(res.PID) {
		status = agent.StatusInterrupted // reported, not written: reading never changes a run folder
	}
	system := res.System
	if system == "" {
		system = "pyrualean"
	}
	if res.Arm != "" {
		system += ":" + res.Arm
	}
	suite, task := splitTask(res.Suite, res.Task)
	ok, null := res.EnvironmentSuccess, false
	if ok == nil && status != agent.StatusRunning {
		no := false
		ok, null = &no, true
	}
	row := Row{
		Path: dir, System: system, Arm: res.Arm, Robot: res.Robot, Suite: suite, Task: TaskKey(suite, task), Seed: res.Seed,
		Model: res.Model, OK: ok, NullOutcome: null, Status: status, Turns: res.ToolTurns, Calls: res.Calls,
		Steps: res.EnvSteps, WallS: res.PolicyWallS, InTok: res.Generation.InputTokens,
		Cached: res.Generation.CachedInputTokens, OutTok: res.Generation.OutputTokens,
		LLMCalls: res.Generation.Turns, Cost: res.CostUSD, Stateful: res.StatefulCalls,
		Reasoning: res.Generation.ReasoningOutputTokens, Sealed: res.Sealed, Perception: res.Perception,
		SealPending: status == agent.StatusRunning && res.Seal == nil,
		Privileged:  res.PrivilegedCalls, Primitives: res.Primitives,
		HumanCells: res.HumanCells, HumanCalls: res.HumanCalls, HumanStateful: res.HumanStatefulCalls, HumanSteps: res.HumanEnvSteps,
	}
	if row.Cost != nil {
		row.CostSource = CostRecorded
	}
	if sm := res.Sample; sm != nil && sm.Of > 1 {
		row.Sample, row.Samples = sm.Index, sm.Of
		// In an eval suite a group's samples are .../SETTINGS/sample-N: the settings tell instances apart.
		row.Group = fmt.Sprintf("%s/%s/%d", row.Robot, row.Task, row.Seed)
		if strings.HasPrefix(filepath.Base(dir), "sample-") {
			row.Group += "/" + filepath.Base(filepath.Dir(dir))
		}
	}
	return row, nil
}

// processAlive says whether pid runs on this machine (signal 0 probes without signalling).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(syscall.Signal(0)) == nil
}

// splitTask resolves `--task S/7` to suite S and task 7 (when the suite is not given otherwise).
func splitTask(suite, task string) (string, string) {
	if s, t, ok := strings.Cut(task, "/"); ok && (suite == "" || suite == s) {
		return s, t
	}
	return suite, task
}

// TaskKey is a task as summarize shows it and compare pairs it: "suite:task", or the task alone for a
// robot without suites. `--suite S --task 0` and `--task S/0` name the same episode and give the same
// key "S:0".
func TaskKey(suite, task string) string {
	suite, task = splitTask(suite, task)
	if suite == "" {
		return task
	}
	return suite + ":" + task
}

// InstanceKey is what pairs two systems' episodes: the same robot, suite:task and seed, and the same
// sample of a group (eval --samples: sample k of one arm pairs with sample k of the other).
func InstanceKey(r Row) string {
	if r.Samples > 1 {
		return fmt.Sprintf("%s/%s/%d#%d", r.Robot, r.Task, r.Seed, r.Sample)
	}
	return fmt.Sprintf("%s/%s/%d", r.Robot, r.Task, r.Seed)
}

// Benchmark is the row's benchmark in the paper's table: its robot, and its suite when it has one.
func Benchmark(r Row) string {
	if r.Suite == "" {
		return r.Robot
	}
	return r.Robot + "/" + r.Suite
}

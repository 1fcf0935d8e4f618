// Package runs reads run folders and reports on them: LoadRuns (result.json of each folder, read
// only), Summarize (the seed's summarize table and aggregates) and Compare (two sets of runs paired by
// robot, suite:task and seed, compared on jointly solved episodes).
package runs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	Path      string   `json:"path"`
	System    string   `json:"system"`
	Robot     string   `json:"robot"`
	Task      string   `json:"task"` // suite:task
	Seed      int      `json:"seed"`
	OK        *bool    `json:"ok"`
	Status    string   `json:"status"`
	Turns     int      `json:"turns"`
	Calls     int      `json:"calls"`
	Steps     int      `json:"steps"`
	WallS     float64  `json:"wall_s"`
	InTok     int      `json:"in_tok"`
	Cached    int      `json:"cached"`
	OutTok    int      `json:"out_tok"`
	LLMCalls  int      `json:"llm_calls"`
	Cost      *float64 `json:"cost"`
	Stateful  int      `json:"stateful_calls"`
	Reasoning int      `json:"reasoning_tok"`
	Sealed    bool     `json:"sealed"` // the agent's kernel ran in an OS sandbox, the judge in the robot server
	// Perception is where segment()'s masks came from when the robot says ("sam3", or the privileged
	// "simulator-masks"); empty for robots without the distinction.
	Perception string `json:"perception,omitempty"`
	// What people did in the live episode (JupyterLab through the gateway): never in the agent's columns.
	HumanCells    int `json:"human_cells"`
	HumanCalls    int `json:"human_calls"`
	HumanStateful int `json:"human_stateful_calls"`
	HumanSteps    int `json:"human_env_steps"`
}

// LoadError names a run folder that could not be read.
type LoadError struct {
	Path string `json:"path"`
	Err  string `json:"error"`
}

// LoadRuns reads every run folder under the given paths. A path may be a run folder (it holds
// result.json, or is an RPent run folder: transcript_*.json, see rpent.go) or any directory above run
// folders. Missing or corrupt folders are reported, not fatal.
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
		var dirs []string
		walkErr := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				errs = append(errs, LoadError{path, errString(err)})
				return nil
			}
			if d.IsDir() && (d.Name() == "workspace" || d.Name() == "card") {
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
		if len(dirs) == 0 {
			errs = append(errs, LoadError{p, "no result.json found (not a run folder)"})
		}
		sort.Strings(dirs)
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

func errString(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// LoadRun reads one run folder's result.json (or, lacking one, an RPent run's transcript). A result
// still marked running whose play process is gone is reported as interrupted; the file is left as it is.
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
	if status == agent.StatusRunning && (res.Host == "" || res.Host == host) && !processAlive(res.PID) {
		status = agent.StatusInterrupted // reported, not written: reading never changes a run folder
	}
	system := res.System
	if system == "" {
		system = "pyrualean"
	}
	if res.Arm != "" {
		system += ":" + res.Arm
	}
	task := TaskKey(res.Suite, res.Task)
	return Row{
		Path: dir, System: system, Robot: res.Robot, Task: task, Seed: res.Seed,
		OK: res.EnvironmentSuccess, Status: status, Turns: res.ToolTurns, Calls: res.Calls,
		Steps: res.EnvSteps, WallS: res.PolicyWallS, InTok: res.Generation.InputTokens,
		Cached: res.Generation.CachedInputTokens, OutTok: res.Generation.OutputTokens,
		LLMCalls: res.Generation.Turns, Cost: res.CostUSD, Stateful: res.StatefulCalls,
		Reasoning: res.Generation.ReasoningOutputTokens, Sealed: res.Sealed, Perception: res.Perception,
		HumanCells: res.HumanCells, HumanCalls: res.HumanCalls, HumanStateful: res.HumanStatefulCalls, HumanSteps: res.HumanEnvSteps,
	}, nil
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

// Summary aggregates rows (seed §12, plus success rate, cost and per-solved means).
type Summary struct {
	Episodes               int            `json:"episodes"`
	NativeSR               *float64       `json:"native_sr"`
	NativeSRDenominator    int            `json:"native_sr_denominator"`
	UnknownOutcomeEpisodes int            `json:"unknown_outcome_episodes"`
	Solved                 int            `json:"solved"`
	Statuses               map[string]int `json:"statuses"`
	MeanCalls              float64        `json:"mean_calls"`
	MeanStatefulCalls      float64        `json:"mean_stateful_calls"`
	MeanEnvSteps           float64        `json:"mean_env_steps"`
	MeanTurns              float64        `json:"mean_turns"`
	MeanLLMCalls           float64        `json:"mean_llm_calls"`
	MeanWallTimeS          float64        `json:"mean_wall_time_s"`
	MeanInputTokens        float64        `json:"mean_input_tokens"`
	MeanCachedInputTokens  float64        `json:"mean_cached_input_tokens"`
	MeanOutputTokens       float64        `json:"mean_output_tokens"`
	MeanCostUSD            *float64       `json:"mean_cost_usd"`
	PerSolved              *Means         `json:"per_solved"`
	// Unsealed counts episodes whose kernel was not sealed: their numbers are only as good as the agent's honesty.
	Unsealed int `json:"unsealed"`
	// Perception counts episodes by where their segmentation came from (only robots that say).
	Perception map[string]int `json:"perception,omitempty"`
	// With people: episodes where a person ran cells, and the people's totals (apart from the agent's).
	WithPeople         int `json:"episodes_with_people"`
	HumanCells         int `json:"human_cells"`
	HumanCalls         int `json:"human_calls"`
	HumanStatefulCalls int `json:"human_stateful_calls"`
	HumanEnvSteps      int `json:"human_env_steps"`
}

// Means are averages over a subset of episodes (the solved ones).
type Means struct {
	Episodes    int      `json:"episodes"`
	LLMCalls    float64  `json:"mean_llm_calls"`
	InputTokens float64  `json:"mean_input_tokens"`
	OutputToks  float64  `json:"mean_output_tokens"`
	Turns       float64  `json:"mean_turns"`
	WallS       float64  `json:"mean_wall_time_s"`
	CostUSD     *float64 `json:"mean_cost_usd"`
}

// Summarize aggregates rows. planner_error episodes are reruns, not outcomes: they are left out of
// the success-rate denominator, as are episodes with no known outcome.
func Summarize(rows []Row) Summary {
	s := Summary{Episodes: len(rows), Statuses: map[string]int{}}
	if len(rows) == 0 {
		return s
	}
	var solved []Row
	for _, r := range rows {
		s.Statuses[r.Status]++
		if !r.Sealed && !strings.HasPrefix(r.System, RPentSystem) {
			s.Unsealed++
		}
		if r.Perception != "" {
			if s.Perception == nil {
				s.Perception = map[string]int{}
			}
			s.Perception[r.Perception]++
		}
		if r.HumanCells > 0 {
			s.WithPeople++
		}
		s.HumanCells += r.HumanCells
		s.HumanCalls += r.HumanCalls
		s.HumanStatefulCalls += r.HumanStateful
		s.HumanEnvSteps += r.HumanSteps
		switch {
		case r.Status == agent.StatusPlannerError || r.Status == agent.StatusInterrupted || r.Status == agent.StatusRunning:
		case r.OK == nil:
			s.UnknownOutcomeEpisodes++
		default:
			s.NativeSRDenominator++
			if *r.OK {
				s.Solved++
				solved = append(solved, r)
			}
		}
	}
	if s.NativeSRDenominator > 0 {
		sr := float64(s.Solved) / float64(s.NativeSRDenominator)
		s.NativeSR = &sr
	}
	n := float64(len(rows))
	for _, r := range rows {
		s.MeanCalls += float64(r.Calls) / n
		s.MeanStatefulCalls += float64(r.Stateful) / n
		s.MeanEnvSteps += float64(r.Steps) / n
		s.MeanTurns += float64(r.Turns) / n
		s.MeanLLMCalls += float64(r.LLMCalls) / n
		s.MeanWallTimeS += r.WallS / n
		s.MeanInputTokens += float64(r.InTok) / n
		s.MeanCachedInputTokens += float64(r.Cached) / n
		s.MeanOutputTokens += float64(r.OutTok) / n
	}
	s.MeanCostUSD = meanCost(rows)
	if len(solved) > 0 {
		s.PerSolved = means(solved)
	}
	return s
}

func means(rows []Row) *Means {
	m := &Means{Episodes: len(rows)}
	n := float64(len(rows))
	for _, r := range rows {
		m.LLMCalls += float64(r.LLMCalls) / n
		m.InputTokens += float64(r.InTok) / n
		m.OutputToks += float64(r.OutTok) / n
		m.Turns += float64(r.Turns) / n
		m.WallS += r.WallS / n
	}
	m.CostUSD = meanCost(rows)
	return m
}

// meanCost is nil unless every row has a cost (an unknown price must not read as free).
func meanCost(rows []Row) *float64 {
	var sum float64
	for _, r := range rows {
		if r.Cost == nil {
			return nil
		}
		sum += *r.Cost
	}
	v := sum / float64(len(rows))
	return &v
}

// WriteSummaryTable prints the seed's columns plus llm calls and cost, then the aggregates.
func WriteSummaryTable(w io.Writer, rows []Row, s Summary) {
	fmt.Fprintf(w, "%-17s %-22s %4s %3s %-10s %5s %5s %6s %7s %9s %9s %7s %5s %8s\n",
		"system", "task", "seed", "ok", "status", "turns", "calls", "steps", "wall_s", "in_tok", "cached", "out_tok", "llm", "cost")
	for _, r := range rows {
		ok := "-"
		if r.OK != nil {
			ok = map[bool]string{true: "Y", false: "N"}[*r.OK]
		}
		cost := "-"
		if r.Cost != nil {
			cost = fmt.Sprintf("%.4f", *r.Cost)
		}
		fmt.Fprintf(w, "%-17s %-22s %4d %3s %-10s %5d %5d %6d %7.1f %9d %9d %7d %5d %8s\n",
			r.System, r.Task, r.Seed, ok, r.Status, r.Turns, r.Calls, r.Steps, r.WallS, r.InTok, r.Cached, r.OutTok, r.LLMCalls, cost)
	}
	sr := "-"
	if s.NativeSR != nil {
		sr = fmt.Sprintf("%.1f%% (%d/%d)", 100**s.NativeSR, s.Solved, s.NativeSRDenominator)
	}
	var st []string
	for k, v := range s.Statuses {
		st = append(st, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(st)
	fmt.Fprintf(w, "\nepisodes %d  success %s  statuses %s\n", s.Episodes, sr, strings.Join(st, " "))
	ours := 0
	for _, r := range rows {
		if !strings.HasPrefix(r.System, RPentSystem) {
			ours++
		}
	}
	fmt.Fprintf(w, "sealed %d/%d", ours-s.Unsealed, ours)
	if s.Unsealed > 0 {
		fmt.Fprintf(w, "  (NOT SEALED: %d; their kernels could reach the robot and the machine)", s.Unsealed)
	}
	fmt.Fprintln(w)
	if len(s.Perception) > 0 {
		var ps []string
		for k, v := range s.Perception {
			ps = append(ps, fmt.Sprintf("%s=%d", k, v))
		}
		sort.Strings(ps)
		fmt.Fprintf(w, "perception %s", strings.Join(ps, " "))
		if s.Perception[PerceptionSimulatorMasks] > 0 {
			fmt.Fprint(w, "  (simulator-masks: segment() read the simulator's own masks, privileged next to the seed's SAM 3)")
		}
		fmt.Fprintln(w)
	}
	if s.WithPeople > 0 {
		fmt.Fprintf(w, "people: %d episode(s) with people's cells: %d cells, %d calls (%d stateful), %d env steps; not in the agent's calls, steps or stateful calls\n",
			s.WithPeople, s.HumanCells, s.HumanCalls, s.HumanStatefulCalls, s.HumanEnvSteps)
	}
	fmt.Fprintf(w, "mean: turns %.1f  calls %.1f  steps %.0f  wall_s %.1f  llm_calls %.1f  in_tok %.0f  cached %.0f  out_tok %.0f  cost %s\n",
		s.MeanTurns, s.MeanCalls, s.MeanEnvSteps, s.MeanWallTimeS, s.MeanLLMCalls, s.MeanInputTokens, s.MeanCachedInputTokens, s.MeanOutputTokens, fmtCost(s.MeanCostUSD))
	if p := s.PerSolved; p != nil {
		fmt.Fprintf(w, "per solved episode (%d): llm_calls %.1f  in_tok %.0f  out_tok %.0f  turns %.1f  wall_s %.1f  cost %s\n",
			p.Episodes, p.LLMCalls, p.InputTokens, p.OutputToks, p.Turns, p.WallS, fmtCost(p.CostUSD))
	}
}

func fmtCost(c *float64) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("$%.4f", *c)
}

// Comparison pairs two sets of runs by (robot, task, seed) and compares them on jointly solved episodes.
type Comparison struct {
	Protocol           string    `json:"protocol"`
	Pairs              int       `json:"pairs"`
	JointlySolved      int       `json:"jointly_solved"`
	LeftSR             *float64  `json:"left_success_rate"`
	RightSR            *float64  `json:"right_success_rate"`
	NativeSuccessDelta *float64  `json:"native_success_delta"`
	Left               *Means    `json:"left"`
	Right              *Means    `json:"right"`
	Ratios             Ratios    `json:"ratios"` // left / right
	Delta              Delta     `json:"delta"`  // right - left
	UnmatchedLeft      []string  `json:"unmatched_left"`
	UnmatchedRight     []string  `json:"unmatched_right"`
	Duplicates         []string  `json:"duplicates"`
	Episodes           []PairRow `json:"episodes"`
}

// Ratios are left/right on jointly solved episodes (how many times more the left side spent).
type Ratios struct {
	LLMCalls    *float64 `json:"llm_calls"`
	InputTokens *float64 `json:"input_tokens"`
	CostUSD     *float64 `json:"cost_usd"`
}

// Delta is right - left on jointly solved episodes.
type Delta struct {
	LLMCalls    float64  `json:"llm_calls"`
	InputTokens float64  `json:"input_tokens"`
	CostUSD     *float64 `json:"cost_usd"`
}

// PairRow is one paired episode.
type PairRow struct {
	Key       string `json:"key"`
	LeftOK    *bool  `json:"left_ok"`
	RightOK   *bool  `json:"right_ok"`
	LeftPath  string `json:"left_path"`
	RightPath string `json:"right_path"`
}

func pairKey(r Row) string { return fmt.Sprintf("%s/%s/%d", r.Robot, r.Task, r.Seed) }

// TaskKey is a task as summarize shows it and compare pairs it: "suite:task", or the task alone for a
// robot without suites. `--suite S --task 0` and `--task S/0` name the same episode and give the same
// key "S:0".
func TaskKey(suite, task string) string {
	if s, t, ok := strings.Cut(task, "/"); ok && (suite == "" || suite == s) {
		suite, task = s, t
	}
	if suite == "" {
		return task
	}
	return suite + ":" + task
}

// Compare pairs left and right rows. Duplicated keys make the pairing ambiguous and are reported.
func Compare(left, right []Row) Comparison {
	c := Comparison{Protocol: "pyrualean-paired-v2", UnmatchedLeft: []string{}, UnmatchedRight: []string{}, Duplicates: []string{}, Episodes: []PairRow{}}
	index := func(rows []Row, side string) map[string]Row {
		m := map[string]Row{}
		for _, r := range rows {
			k := pairKey(r)
			if _, dup := m[k]; dup {
				c.Duplicates = append(c.Duplicates, side+" "+k)
				continue
			}
			m[k] = r
		}
		return m
	}
	lm, rm := index(left, "left"), index(right, "right")
	var keys []string
	for k := range lm {
		if _, ok := rm[k]; ok {
			keys = append(keys, k)
		} else {
			c.UnmatchedLeft = append(c.UnmatchedLeft, k)
		}
	}
	for k := range rm {
		if _, ok := lm[k]; !ok {
			c.UnmatchedRight = append(c.UnmatchedRight, k)
		}
	}
	sort.Strings(keys)
	sort.Strings(c.UnmatchedLeft)
	sort.Strings(c.UnmatchedRight)
	var pl, pr, jl, jr []Row
	for _, k := range keys {
		l, r := lm[k], rm[k]
		c.Episodes = append(c.Episodes, PairRow{Key: k, LeftOK: l.OK, RightOK: r.OK, LeftPath: l.Path, RightPath: r.Path})
		pl, pr = append(pl, l), append(pr, r)
		if l.OK != nil && *l.OK && r.OK != nil && *r.OK {
			jl, jr = append(jl, l), append(jr, r)
		}
	}
	c.Pairs = len(keys)
	c.JointlySolved = len(jl)
	c.LeftSR, c.RightSR = Summarize(pl).NativeSR, Summarize(pr).NativeSR
	if c.LeftSR != nil && c.RightSR != nil {
		d := *c.RightSR - *c.LeftSR
		c.NativeSuccessDelta = &d
	}
	if len(jl) > 0 {
		c.Left, c.Right = means(jl), means(jr)
		c.Ratios.LLMCalls = ratio(c.Left.LLMCalls, c.Right.LLMCalls)
		c.Ratios.InputTokens = ratio(c.Left.InputTokens, c.Right.InputTokens)
		c.Delta.LLMCalls = c.Right.LLMCalls - c.Left.LLMCalls
		c.Delta.InputTokens = c.Right.InputTokens - c.Left.InputTokens
		if c.Left.CostUSD != nil && c.Right.CostUSD != nil {
			c.Ratios.CostUSD = ratio(*c.Left.CostUSD, *c.Right.CostUSD)
			d := *c.Right.CostUSD - *c.Left.CostUSD
			c.Delta.CostUSD = &d
		}
	}
	return c
}

func ratio(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	v := a / b
	return &v
}

// WriteComparisonTable prints the seed's headline table: left -> right on jointly solved episodes.
func WriteComparisonTable(w io.Writer, c Comparison) {
	pct := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100**p)
	}
	fmt.Fprintf(w, "pairs %d  jointly solved %d  success %s -> %s\n", c.Pairs, c.JointlySolved, pct(c.LeftSR), pct(c.RightSR))
	if c.Left == nil {
		fmt.Fprintln(w, "no jointly solved episodes: nothing to compare on cost")
	} else {
		rt := func(p *float64) string {
			if p == nil {
				return "-"
			}
			return fmt.Sprintf("%.2fx", *p)
		}
		fmt.Fprintf(w, "%-26s %14s %14s %10s\n", "per jointly solved episode", "left", "right", "left/right")
		fmt.Fprintf(w, "%-26s %14.1f %14.1f %10s\n", "LLM calls", c.Left.LLMCalls, c.Right.LLMCalls, rt(c.Ratios.LLMCalls))
		fmt.Fprintf(w, "%-26s %14.0f %14.0f %10s\n", "input tokens", c.Left.InputTokens, c.Right.InputTokens, rt(c.Ratios.InputTokens))
		fmt.Fprintf(w, "%-26s %14s %14s %10s\n", "cost", fmtCost(c.Left.CostUSD), fmtCost(c.Right.CostUSD), rt(c.Ratios.CostUSD))
	}
	for _, k := range c.UnmatchedLeft {
		fmt.Fprintf(w, "unmatched left: %s\n", k)
	}
	for _, k := range c.UnmatchedRight {
		fmt.Fprintf(w, "unmatched right: %s\n", k)
	}
	for _, k := range c.Duplicates {
		fmt.Fprintf(w, "duplicate: %s\n", k)
	}
}

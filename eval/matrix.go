package eval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"gopkg.in/yaml.v3"

	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// Matrix is what a suite runs: rows, each expanding to tasks × seeds × arms × models.
type Matrix struct {
	Name string `toml:"name" yaml:"name" json:"name,omitempty"`
	Rows []Row  `toml:"row" yaml:"rows" json:"rows"`
}

// Row is one line of the matrix. Settings are episode settings by name (spec.Settings: play's flags
// without dashes), the same for every episode of the row; the settings that name an episode (task,
// seed, arm, out, ...) are the row's own keys, and are refused there. RobotOptions are the robot's own
// make() options (a table: robot_options = {libero_type = "pro"}).
type Row struct {
	Name         string            `toml:"name" yaml:"name" json:"name,omitempty"`
	Robot        string            `toml:"robot" yaml:"robot" json:"robot"`
	Suite        string            `toml:"suite" yaml:"suite" json:"suite,omitempty"`
	Tasks        string            `toml:"tasks" yaml:"tasks" json:"tasks"` // all | family:NAME | t1,t2
	Seeds        string            `toml:"seeds" yaml:"seeds" json:"seeds"` // 0-9 | 0,3,5-7
	Arms         []string          `toml:"arms" yaml:"arms" json:"arms"`
	Runtime      string            `toml:"runtime" yaml:"runtime" json:"runtime"`
	Models       []string          `toml:"models" yaml:"models" json:"models,omitempty"`
	Settings     map[string]string `toml:"settings" yaml:"settings" json:"settings,omitempty"`
	RobotOptions map[string]string `toml:"robot_options" yaml:"robot_options" json:"robot_options,omitempty"`
	// Samples is K, the rollouts of each (task, seed) instance (eval --samples): a group that pass@K and
	// a group-normalised advantage are computed over; 0 or 1: one episode per instance, as before.
	Samples int `toml:"samples" yaml:"samples" json:"samples,omitempty"`
}

// Label names the row in errors: its name, else its position.
func (r Row) Label(i int) string {
	if r.Name != "" {
		return fmt.Sprintf("row %d (%s)", i+1, r.Name)
	}
	return fmt.Sprintf("row %d", i+1)
}

// ReadMatrix reads a matrix file: TOML (.toml) or YAML (.yaml, .yml). Unknown keys are refused so a
// typo does not silently fall back to a default.
func ReadMatrix(path string) (Matrix, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Matrix{}, err
	}
	var m Matrix
	switch strings.ToLower(filepath.Ext(path)) {
	case ".toml":
		md, err := toml.Decode(string(b), &m)
		if err != nil {
			return Matrix{}, fmt.Errorf("%s: %w", path, err)
		}
		if und := md.Undecoded(); len(und) > 0 {
			return Matrix{}, fmt.Errorf("%s: unknown key %q", path, und[0].String())
		}
	case ".yaml", ".yml":
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&m); err != nil {
			return Matrix{}, fmt.Errorf("%s: %w", path, err)
		}
	default:
		return Matrix{}, fmt.Errorf("%s: want a .toml, .yaml or .yml matrix file", path)
	}
	if len(m.Rows) == 0 {
		return Matrix{}, fmt.Errorf("%s: no rows (TOML [[row]], YAML rows:)", path)
	}
	return m, nil
}

// ParseSeeds reads a seed selection: "0-9", "3", "0,2,5-7". Seeds come out sorted, without repeats.
func ParseSeeds(s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("seeds %q: %q is not a seed >= 0 or a range A-B", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("seeds %q: range %q: want A-B with A <= B", s, part)
			}
		}
		for v := a; v <= b; v++ {
			out = append(out, v)
		}
	}
	sort.Ints(out)
	return slices.Compact(out), nil
}

// SelectTasks picks tasks from a robot's list: "all", "family:NAME" (several joined by commas) or
// task names. An unknown task or family is an error naming it.
func SelectTasks(sel string, tasks []robotapi.Task) ([]robotapi.Task, error) {
	sel = strings.TrimSpace(sel)
	if sel == "" || sel == "all" {
		return tasks, nil
	}
	byName := map[string]robotapi.Task{}
	for _, t := range tasks {
		byName[t.Name] = t
	}
	var out []robotapi.Task
	seen := map[string]bool{}
	add := func(t robotapi.Task) {
		if !seen[t.Name] {
			seen[t.Name] = true
			out = append(out, t)
		}
	}
	for part := range strings.SplitSeq(sel, ",") {
		part = strings.TrimSpace(part)
		if fam, ok := strings.CutPrefix(part, "family:"); ok {
			n := 0
			for _, t := range tasks {
				if t.Family == fam {
					add(t)
					n++
				}
			}
			if n == 0 {
				return nil, fmt.Errorf("tasks: no family %q (families: %s)", fam, strings.Join(families(tasks), ", "))
			}
			continue
		}
		t, ok := byName[part]
		if !ok {
			return nil, fmt.Errorf("tasks: unknown task %q", part)
		}
		add(t)
	}
	return out, nil
}

func families(tasks []robotapi.Task) []string {
	var f []string
	for _, t := range tasks {
		if !slices.Contains(f, t.Family) {
			f = append(f, t.Family)
		}
	}
	return f
}

// TaskLister lists a robot's tasks (robotapi.Tasks in production).
type TaskLister func(ctx context.Context, robot string) ([]robotapi.Task, error)

// Expand turns the matrix (over the named robots) into episodes in a stable order (row, task, seed, model, arm: the cells arm
// of a pair comes first) with ids and run folders under dir. Robots, tasks, seeds and arms are
// checked here, before anything runs; the errors name the row. settingsID makes the settings part of
// an id (the caller knows which settings are defaults).
func Expand(ctx context.Context, m Matrix, robots []robotapi.RobotInfo, list TaskLister) ([]Episode, error) {
	var eps []Episode
	seen := map[string]string{}
	taskCache := map[string][]robotapi.Task{}
	for i, r := range m.Rows {
		label := r.Label(i)
		at := slices.IndexFunc(robots, func(ri robotapi.RobotInfo) bool { return ri.Name == r.Robot })
		if at < 0 {
			return nil, fmt.Errorf("%s: unknown robot %q (robots: %s)", label, r.Robot, strings.Join(robotapi.RobotNames(robots), ", "))
		}
		all, ok := taskCache[r.Robot]
		if !ok {
			var err error
			if all, err = list(ctx, r.Robot); err != nil {
				return nil, fmt.Errorf("%s: tasks of %s: %w", label, r.Robot, err)
			}
			taskCache[r.Robot] = all
		}
		tasks, err := SelectTasks(r.Tasks, all)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		seedSel := r.Seeds
		if seedSel == "" {
			seedSel = strconv.Itoa(robots[at].DefaultSeed)
		}
		seeds, err := ParseSeeds(seedSel)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		arms := r.Arms
		if len(arms) == 0 {
			arms = []string{"cells", "tools"}
		}
		for _, a := range arms {
			if a != spec.ArmCells && a != spec.ArmTools && a != spec.ArmProgram {
				return nil, fmt.Errorf("%s: arm %q: want cells, tools or program", label, a)
			}
		}
		// cells first, whatever the row's order: a replayed tools episode follows its cells twin.
		arms = slices.Clone(arms)
		slices.Sort(arms)
		arms = slices.Compact(arms)
		models := r.Models
		if len(models) == 0 {
			models = []string{""}
		}
		if r.Samples < 0 {
			return nil, fmt.Errorf("%s: samples %d: want K >= 1", label, r.Samples)
		}
		samples := max(r.Samples, 1)
		for _, t := range tasks {
			for _, seed := range seeds {
				for _, model := range models {
					for k := range samples {
						for _, arm := range arms {
							e := Episode{Row: i, Robot: r.Robot, Suite: r.Suite, Task: t.Name, Family: t.Family, Seed: seed,
								Arm: arm, Runtime: r.Runtime, Model: model, Settings: r.Settings, RobotOptions: r.RobotOptions, Solution: t.Solution}
							if samples > 1 {
								e.Sample, e.Samples = k, samples
							}
							e.ID = e.makeID()
							if e.Spec, err = e.spec(); err != nil {
								return nil, fmt.Errorf("%s: %w", label, err)
							}
							if prev, dup := seen[e.ID]; dup {
								return nil, fmt.Errorf("%s: episode %s is also in %s", label, e.ID, prev)
							}
							seen[e.ID] = label
							eps = append(eps, e)
						}
					}
				}
			}
		}
	}
	return eps, nil
}

// spec builds the episode's spec from its row: the row's settings through spec.Settings' setters (the
// one home of their names and defaults), then what names the episode. A replayed episode's script is
// its task's reference solution (From, under this machine's repository; an executor elsewhere sets its
// own); the tools arm replays the primitive calls its cells twin made, which the executor supplies.
func (e Episode) spec() (spec.Episode, error) {
	s := spec.New()
	for _, k := range slices.Sorted(maps.Keys(e.Settings)) {
		st, ok := spec.Lookup(k)
		switch {
		case !ok:
			return s, fmt.Errorf("setting %q: %w (see pyrualean play -h)", k, spec.ErrUnknownSetting)
		case st.PerEpisode:
			return s, fmt.Errorf("setting %q: the suite sets it per episode (use the row's own key)", k)
		}
		if err := s.Set(k, e.Settings[k]); err != nil {
			return s, err
		}
	}
	for k, v := range e.RobotOptions {
		if err := s.Set("robot-opt", k+"="+v); err != nil {
			return s, err
		}
	}
	s.Robot, s.Suite, s.Task, s.Seed, s.Arm = e.Robot, e.Suite, e.Task, e.Seed, e.Arm
	s.Policy.Runtime, s.Policy.Model = e.Runtime, e.Model
	if e.Samples > 1 {
		if _, set := s.Policy.OpenAI.ExtraBody["seed"]; set {
			return s, errors.New(`samples > 1 and openai-extra-body sets "seed": the samples' own sampling seeds would be overridden`)
		}
		s.Sample = &spec.Sample{Index: e.Sample, Of: e.Samples, Seed: e.SamplingSeed()}
		// The endpoint gets it as the request's seed: OpenAI-compatible servers (vLLM, SGLang,
		// llama.cpp, OpenAI) take `seed` in the body; runtimes without a body (CLIs) ignore it.
		s.Policy.OpenAI.ExtraBody = maps.Clone(s.Policy.OpenAI.ExtraBody)
		if s.Policy.OpenAI.ExtraBody == nil {
			s.Policy.OpenAI.ExtraBody = map[string]any{}
		}
		s.Policy.OpenAI.ExtraBody["seed"] = s.Sample.Seed
	}
	if e.Runtime == "replay" {
		root, err := robotapi.Root()
		if err != nil {
			return s, err
		}
		s.Policy.From = filepath.Join(root, e.Solution)
	}
	return s, nil
}

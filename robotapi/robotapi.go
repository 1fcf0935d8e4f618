// Package robotapi describes the robot the agent drives: the API reference it reads, the tasks it can be
// given, the one-line setup cell that creates `robo` in a kernel, and the reference solutions. The robot
// itself is the Python package pyrualean_robot (robotapi/python); this package asks it through the venv's
// Python, so the docstrings stay the one source of truth.
package robotapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/pylit"
)

// RobotInfo is one registered robot, as the Python registry (pyrualean_robot.robots) describes it: the one
// home of robot names, default seeds, suites and which robots drive a remote env server.
type RobotInfo struct {
	Name        string   `json:"name"`
	Default     bool     `json:"default"`      // the embedded robot used when none is named
	DefaultSeed int      `json:"default_seed"` // make()'s seed when none is given
	Remote      bool     `json:"remote"`       // it drives an RPent env server (--env-endpoint applies)
	Suites      []string `json:"suites"`       // benchmark suites; a suite implies its robot
	Options     []Option `json:"options"`      // the robot's own make() options (--robot-opt)
	// RPentGuides are the paper's guides for this robot in an RPent checkout (--guides copies them from
	// $RPENT_ROOT); nil: the robot has none.
	RPentGuides *struct {
		Dir   string   `json:"dir"`
		Files []string `json:"files"`
	} `json:"rpent_guides"`
	Needs     string `json:"needs"`     // what installs it
	Available bool   `json:"available"` // its module imports here
	Error     string `json:"error"`     // why not, when !Available
}

// Option is one of a robot's own make() options: its name, kind (int, float, bool or str) and default.
type Option struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Default any    `json:"default"`
}

// Robots lists the registered robots (no simulator boot), in registry order.
func Robots(ctx context.Context) ([]RobotInfo, error) {
	out, err := runPython(ctx, "pyrualean_robot.robots", "--json")
	if err != nil {
		return nil, err
	}
	var robots []RobotInfo
	if err := json.Unmarshal(out, &robots); err != nil {
		return nil, fmt.Errorf("robotapi: robot registry: %w", err)
	}
	return robots, nil
}

// RobotNames are the registered robot names, in registry order.
func RobotNames(robots []RobotInfo) []string {
	names := make([]string, len(robots))
	for i, r := range robots {
		names[i] = r.Name
	}
	return names
}

// LookupRobot is one robot's registry entry; an unknown name is an ErrBadArgument that names the known ones.
func LookupRobot(ctx context.Context, name string) (RobotInfo, error) {
	robots, err := Robots(ctx)
	if err != nil {
		return RobotInfo{}, err
	}
	return FindRobot(robots, name)
}

// FindRobot is LookupRobot over a list Robots already returned.
func FindRobot(robots []RobotInfo, name string) (RobotInfo, error) {
	for _, r := range robots {
		if r.Name == name {
			return r, nil
		}
	}
	return RobotInfo{}, fmt.Errorf("%w: unknown robot %q (robots: %s)", ErrBadArgument, name, strings.Join(RobotNames(robots), ", "))
}

// RobotsTaking are the robots whose make() takes option (a keyword argument such as "libero_type").
func RobotsTaking(robots []RobotInfo, option string) []string {
	var names []string
	for _, r := range robots {
		if slices.ContainsFunc(r.Options, func(o Option) bool { return o.Name == option }) {
			names = append(names, r.Name)
		}
	}
	return names
}

// RobotForSuite is the robot a benchmark suite belongs to (libero_spatial_swap -> libero); an unknown suite
// is an ErrBadArgument that names the known ones.
func RobotForSuite(ctx context.Context, suite string) (string, error) {
	robots, err := Robots(ctx)
	if err != nil {
		return "", err
	}
	var known []string
	for _, r := range robots {
		for _, s := range r.Suites {
			if s == suite {
				return r.Name, nil
			}
		}
		known = append(known, r.Suites...)
	}
	return "", fmt.Errorf("%w: unknown suite %q (suites: %s)", ErrBadArgument, suite, strings.Join(known, ", "))
}

// DefaultRobot is the embedded MuJoCo tabletop.
const DefaultRobot = "tabletop"

// Reference formats accepted by Reference. (Primitive sets are spec's: spec.PrimitivesFull, ...; the robot
// package refuses one it does not know.)
const (
	FormatText  = "text"
	FormatTools = "tools"
)

// ErrNoRoot means the repository root (the folder with go.mod and .venv) could not be found.
var ErrNoRoot = errors.New("robotapi: repository root not found (set PYRUALEAN_ROOT)")

// ErrBadArgument is wrapped by errors about robot, task, primitives or format names.
var ErrBadArgument = errors.New("robotapi: bad argument")

// PythonError is a failed call into pyrualean_robot; Stderr holds its message.
type PythonError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *PythonError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("robotapi: python %s: %s", strings.Join(e.Args, " "), msg)
}

func (e *PythonError) Unwrap() error { return e.Err }

// Is reports ErrBadArgument when the Python side rejected the arguments (exit status 2).
func (e *PythonError) Is(target error) bool {
	var ee *exec.ExitError
	return target == ErrBadArgument && errors.As(e.Err, &ee) && ee.ExitCode() == 2
}

// Task is one task of a robot.
type Task struct {
	Name        string `json:"name"`
	Family      string `json:"family"`
	Instruction string `json:"instruction"`
	Solution    string `json:"solution"`
}

// Python returns the venv interpreter under root.
func Python(root string) string { return filepath.Join(root, ".venv", "bin", "python") }

// Root finds the repository root: $PYRUALEAN_ROOT, else the nearest folder above the working directory
// (then above the executable) holding go.mod.
func Root() (string, error) {
	if r := os.Getenv("PYRUALEAN_ROOT"); r != "" {
		if _, err := os.Stat(filepath.Join(r, "go.mod")); err == nil {
			return r, nil
		}
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, d := range starts {
		for {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				if _, err := os.Stat(filepath.Join(d, "robotapi", "python")); err == nil {
					return d, nil
				}
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return "", ErrNoRoot
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$`)

func checkName(kind, v string) error {
	if !nameRE.MatchString(v) || strings.Contains(v, "..") {
		return fmt.Errorf("%w: %s %q", ErrBadArgument, kind, v)
	}
	return nil
}

// runPython runs `python -m module args...` in the repo root and returns stdout.
func runPython(ctx context.Context, module string, args ...string) ([]byte, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	full := append([]string{"-m", module}, args...)
	cmd := exec.CommandContext(ctx, Python(root), full...)
	cmd.WaitDelay = time.Second // once ctx ends, do not wait on a child still holding the pipes
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PYRUALEAN_ROOT="+root, "PYTHONDONTWRITEBYTECODE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, &PythonError{Args: full, Stderr: lastLines(stderr.String(), 5), Err: err}
	}
	return stdout.Bytes(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Reference returns the API reference the agent sees, generated from the live class without booting a
// simulator: format "text" (cells arm) or "tools" (JSON function schemas for the tool-calling arm).
func Reference(ctx context.Context, robot, primitives, format string) (string, error) {
	if robot == "" {
		robot = DefaultRobot
	}
	if primitives == "" {
		primitives = "full"
	}
	if format == "" {
		format = FormatText
	}
	if err := checkName("robot", robot); err != nil {
		return "", err
	}
	if err := checkName("primitives", primitives); err != nil {
		return "", err
	}
	if format != FormatText && format != FormatTools {
		return "", fmt.Errorf("%w: format %q (text or tools)", ErrBadArgument, format)
	}
	out, err := runPython(ctx, "pyrualean_robot.api", "--robot", robot, "--primitives", primitives, "--format", format)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// Tasks lists a robot's tasks (no simulator boot).
func Tasks(ctx context.Context, robot string) ([]Task, error) {
	if robot == "" {
		robot = DefaultRobot
	}
	if err := checkName("robot", robot); err != nil {
		return nil, err
	}
	out, err := runPython(ctx, "pyrualean_robot.tasks", "--robot", robot, "--json")
	if err != nil {
		return nil, err
	}
	var tasks []Task
	if err := json.Unmarshal(out, &tasks); err != nil {
		return nil, fmt.Errorf("robotapi: tasks for %s: %w", robot, err)
	}
	return tasks, nil
}

// SetupOptions are make()'s arguments; zero values are left to the Python defaults.
type SetupOptions struct {
	Robot       string // default tabletop
	Task        string
	Seed        int
	Workspace   string
	Images      string // on-motion | on-demand | none
	Primitives  string // full | no-vla
	Suite       string
	MaxEnvSteps int // 0: the robot's own
	// Options are the robot's own make() options (--robot-opt), passed as given: make() turns each into
	// its kind (pyrualean_robot.robots.coerce_options).
	Options map[string]string
}

// SetupCode is the one-line first cell that creates `robo`; a notebook starting with it re-creates the
// episode in plain JupyterLab with the pyrualean kernel.
func SetupCode(opts SetupOptions) string {
	robot := opts.Robot
	if robot == "" {
		robot = DefaultRobot
	}
	args := []string{pylit.Str(robot)}
	str := func(name, v string) {
		if v != "" {
			args = append(args, name+"="+pylit.Str(v))
		}
	}
	str("task", opts.Task)
	args = append(args, "seed="+strconv.Itoa(opts.Seed))
	str("workspace", opts.Workspace)
	str("images", opts.Images)
	str("primitives", opts.Primitives)
	str("suite", opts.Suite)
	for _, k := range slices.Sorted(maps.Keys(opts.Options)) {
		str(k, opts.Options[k])
	}
	if opts.MaxEnvSteps > 0 {
		args = append(args, "max_env_steps="+strconv.Itoa(opts.MaxEnvSteps))
	}
	return "from pyrualean_robot import make; robo = make(" + strings.Join(args, ", ") + ")"
}

// SolutionPath is the reference solution file of a task (repo-relative).
func SolutionPath(robot, task string) string {
	return filepath.Join("robotapi", "solutions", robot, task+".py")
}

// SolutionCells returns the code cells of a task's reference solution (percent format, `# %%` cells;
// markdown cells are dropped). The setup cell is not included: whoever runs it adds SetupCode first.
func SolutionCells(robot, task string) ([]string, error) {
	src, err := readSolution(robot, task, SolutionPath, "solution")
	if err != nil {
		return nil, err
	}
	return SplitPercentCells(string(src)), nil
}

// readSolution reads a task's reference-solution file (path gives its repo-relative name), the robot
// and task checked as names first.
func readSolution(robot, task string, path func(robot, task string) string, what string) ([]byte, error) {
	if err := checkName("robot", robot); err != nil {
		return nil, err
	}
	if err := checkName("task", task); err != nil {
		return nil, err
	}
	root, err := Root()
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(root, path(robot, task)))
	if err != nil {
		return nil, fmt.Errorf("robotapi: %s for %s/%s: %w", what, robot, task, err)
	}
	return src, nil
}

// SplitPercentCells splits percent-format source into its code cells (same rules as the Python runner).
func SplitPercentCells(src string) []string {
	var cells []string
	kind := "code"
	var cur []string
	flush := func() {
		body := strings.TrimSpace(strings.Join(cur, "\n"))
		if kind == "code" && body != "" {
			cells = append(cells, body+"\n")
		}
	}
	for _, line := range strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n") {
		if strings.HasPrefix(line, "# %%") {
			flush()
			kind = "code"
			if strings.Contains(line, "[markdown]") {
				kind = "markdown"
			}
			cur = cur[:0]
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return cells
}

// InProcessTimings are the robot's own medians, measured inside one Python process.
type InProcessTimings struct {
	StepMS          float64 `json:"step_ms"`
	ControlStepMS   float64 `json:"control_step_ms"`
	Render256MS     float64 `json:"render256_ms"`
	Render128MS     float64 `json:"render128_ms"`
	MoveTo20cmMS    float64 `json:"move_to_20cm_ms"`
	MoveTo20cmSteps float64 `json:"move_to_20cm_steps"`
	MakeMS          float64 `json:"make_ms"`
}

// MeasureInProcess runs pyrualean_robot.bench: physics step, control step, renders, a 20 cm move_to.
func MeasureInProcess(ctx context.Context) (InProcessTimings, error) {
	var t InProcessTimings
	out, err := runPython(ctx, "pyrualean_robot.bench", "--json")
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(out, &t); err != nil {
		return t, fmt.Errorf("robotapi: bench output: %w", err)
	}
	return t, nil
}

// WarmCode is what a kernel pool runs ahead of time so a later SetupCode cell is quick: imports, the
// compiled model and the offscreen GL stack.
const WarmCode = "import pyrualean_robot, pyrualean_robot.robots.tabletop as _t; _t.warm(); del _t"

package spec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pyrualean/pyrualean/robotapi"
)

// Robots is what Validate asks about robots: the robot package's registry (robotapi.Registry), the one
// home of robot names, suites, default seeds and each robot's make() options.
type Robots interface {
	Lookup(ctx context.Context, name string) (robotapi.RobotInfo, error)
	RobotForSuite(ctx context.Context, suite string) (string, error)
	// CheckOptions refuses an option the robot's make() does not take, or a value not of its kind.
	CheckOptions(ctx context.Context, robot string, opts map[string]string) error
}

// ErrInvalid is wrapped by every error Validate returns: the spec, not the machine, is at fault.
var ErrInvalid = errors.New("invalid episode")

// Validate resolves what depends on other settings or on the robot registry (the robot owning the
// suite, "SUITE/INDEX" tasks, the robot's default seed, the prompt profile), makes the run folder
// absolute (when one is named: an episode needs one to start), and checks every value and combination. The policy's runtime must be resolved first
// (runtimes.Resolve): the prompt profile's default depends on it. Errors are one line naming the fix.
func (e *Episode) Validate(ctx context.Context, robots Robots) error {
	if err := e.validate(ctx, robots); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func (e *Episode) validate(ctx context.Context, robots Robots) error {
	if len(e.envErrs) > 0 {
		return e.envErrs[0]
	}
	if err := e.ApplyFlags(); err != nil {
		return err
	}
	if err := e.checkValues(); err != nil {
		return err
	}
	if err := e.resolveRobot(ctx, robots); err != nil {
		return err
	}
	if e.PromptProfile == "" {
		e.PromptProfile = ProfileDefault
		if e.Policy.Runtime == "local" && (e.Arm == ArmCells || e.Arm == ArmTools) {
			e.PromptProfile = ProfileCompact
		}
	}
	switch {
	case e.PromptProfile == ProfileCompact && e.Arm != ArmCells && e.Arm != ArmTools:
		return fmt.Errorf("--prompt-profile compact is for --arm cells or tools (the arm is %s)", e.Arm)
	case (e.MaxPrograms > 0 || e.ProgramTimeoutS > 0) && e.Arm != ArmProgram:
		return fmt.Errorf("--max-programs and --program-timeout-s need --arm program (the arm is %s)", e.Arm)
	case e.RobotOptions["vla_endpoint"] != "" && e.Primitives == PrimitivesNoVLA:
		return errors.New("--vla-endpoint with --primitives no-vla: the VLA primitives are hidden")
	case e.Policy.Runtime == "":
		return errors.New("no runtime (runtimes.Resolve chooses one)")
	case (e.Policy.Runtime == "replay") != (e.Policy.From != ""):
		if e.Policy.From == "" {
			return errors.New("--runtime replay needs --from TRACE.ipynb|CELLS.py")
		}
		return fmt.Errorf("--from is only for --runtime replay (the runtime is %s)", e.Policy.Runtime)
	}
	if e.Out != "" { // "" : the caller names it (play: runs/<time>-<robot>-<task>-<arm>)
		abs, err := filepath.Abs(e.Out)
		if err != nil {
			return fmt.Errorf("--out %q: %w", e.Out, err)
		}
		e.Out = abs
	}
	return nil
}

// checkValues checks each value on its own: what a Go caller may have set without the table's setters.
func (e *Episode) checkValues() error {
	for _, c := range []struct {
		name, v string
		allowed []string
	}{
		{"arm", e.Arm, []string{ArmCells, ArmTools, ArmProgram}},
		{"images", e.Images, []string{ImagesOnMotion, ImagesOnDemand, ImagesNone}},
		{"feedback", e.Feedback, []string{FeedbackPure, FeedbackRich}},
		{"primitives", e.Primitives, []string{PrimitivesFull, PrimitivesNoVLA, PrimitivesPaper}},
		{"prompt-profile", e.PromptProfile, []string{"", ProfileDefault, ProfileCompact}},
		{"sealed", e.Sealed, []string{SealOff, SealAuto, SealOn}},
	} {
		if !slices.Contains(c.allowed, c.v) {
			return fmt.Errorf("--%s %q: want one of %s", c.name, c.v, strings.Join(slices.DeleteFunc(c.allowed, func(a string) bool { return a == "" }), ", "))
		}
	}
	for _, c := range []struct {
		name string
		bad  bool
	}{
		{"seed", e.Seed < SeedDefault},
		{"max-turns", e.MaxCalls < 0},
		{"max-programs", e.MaxPrograms < 0},
		{"budget-s", e.BudgetS < 0},
		{"cell-timeout-s", e.CellTimeoutS < 0},
		{"program-timeout-s", e.ProgramTimeoutS < 0},
		{"max-episode-steps", e.MaxEnvSteps < 0},
		{"openai-max-tokens", e.Policy.OpenAI.MaxTokens < 0},
		{"openai-max-images", e.Policy.OpenAI.MaxImages < 0},
	} {
		if c.bad {
			return fmt.Errorf("--%s: must be >= 0", c.name)
		}
	}
	if sm := e.Sample; sm != nil && (sm.Of < 2 || sm.Index < 0 || sm.Index >= sm.Of) {
		return fmt.Errorf("sample %d of %d: want 0 <= index < of, of >= 2", sm.Index, sm.Of)
	}
	return nil
}

// resolveRobot fills in the robot (the one owning the suite, which may come as --task SUITE/INDEX;
// else the default robot), the robot's own default seed, and checks the robot's options.
func (e *Episode) resolveRobot(ctx context.Context, robots Robots) error {
	if s, t, ok := strings.Cut(e.Task, "/"); ok && s != "" && t != "" {
		if e.Suite != "" && e.Suite != s {
			return fmt.Errorf("--task %q names suite %s but --suite is %s: drop one", e.Task, s, e.Suite)
		}
		e.Suite, e.Task = s, t
	}
	if e.Robot == "" && e.Suite != "" {
		robot, err := robots.RobotForSuite(ctx, e.Suite)
		if err != nil {
			return fmt.Errorf("--suite %s: %w; see pyrualean suites, or name the robot with --robot", e.Suite, err)
		}
		e.Robot = robot
	}
	if e.Robot == "" {
		e.Robot = robotapi.DefaultRobot
	}
	if e.Seed == SeedDefault || e.Robot != robotapi.DefaultRobot {
		info, err := robots.Lookup(ctx, e.Robot)
		if err != nil {
			return fmt.Errorf("--robot: %w; see pyrualean suites", err)
		}
		if e.Seed == SeedDefault {
			e.Seed = info.DefaultSeed
		}
	}
	if len(e.RobotOptions) > 0 {
		if err := robots.CheckOptions(ctx, e.Robot, e.RobotOptions); err != nil {
			return fmt.Errorf("--robot-opt: %w", err)
		}
	}
	return nil
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/robotapi"
)

// episodeFlags are the flags that describe one episode, shared by play and mcp. cmd ("play" or
// "mcp") picks the few help texts and the default run folder name that differ between the two.
type episodeFlags struct {
	cmd                                                                                  string
	robot, arm, suite, task, out, images, feedback, primitives, vlaEndpoint, envEndpoint string
	sealed                                                                               string
	liberoType, sam3Endpoint                                                             string
	seed, maxTurns, maxEnvSteps, maxPrograms                                             int
	budgetS, cellTimeoutS, programTimeoutS                                               float64
	guides, seedSet                                                                      bool
	defaultSeed                                                                          int // the robot's own (fromRegistry)
}

func (f *episodeFlags) register(fs *flag.FlagSet) {
	budgetHelp := "wall-clock budget of the policy in seconds (0: none)"
	guidesHelp := "add the robot's guides to the prompt and the workspace"
	outHelp := "run folder (default runs/<time>-<robot>-<task>-<arm>)"
	if f.cmd == "mcp" {
		budgetHelp = "wall-clock budget in seconds (0: none)"
		guidesHelp = "add the robot's guides to the workspace"
		outHelp = "run folder (default runs/<time>-mcp-<robot>-<task>-<arm>)"
	}
	fs.StringVar(&f.robot, "robot", "", "robot (pyrualean suites lists them; default: the robot owning --suite, else tabletop)")
	fs.StringVar(&f.arm, "arm", agent.ArmCells, "cells (python + finish), tools (one tool per primitive + finish) or program (run_program + finish)")
	fs.IntVar(&f.maxPrograms, "max-programs", 0, "program arm: run_program calls allowed (0: no limit; 1: the single-program setup)")
	fs.Float64Var(&f.programTimeoutS, "program-timeout-s", 0, "program arm: watchdog of one program in seconds (default --cell-timeout-s)")
	fs.StringVar(&f.suite, "suite", "", "benchmark suite (see pyrualean suites); it implies its robot")
	fs.StringVar(&f.task, "task", "", "task name or index, or SUITE/INDEX (default: the robot's first task)")
	fs.Func("seed", "episode seed (default: the robot's own, as make() picks it)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		f.seed, f.seedSet = n, true
		return nil
	})
	fs.IntVar(&f.maxTurns, "max-turns", 0, "maximum python/primitive calls (0: no limit; finish never counts)")
	fs.Float64Var(&f.budgetS, "budget-s", 1200, budgetHelp)
	fs.Float64Var(&f.cellTimeoutS, "cell-timeout-s", 300, "per-cell timeout in seconds: the kernel is interrupted")
	fs.IntVar(&f.maxEnvSteps, "max-episode-steps", 10000, "simulator step budget")
	fs.StringVar(&f.out, "out", "", outHelp)
	fs.StringVar(&f.images, "images", agent.ImagesOnMotion, "on-motion, on-demand or none")
	fs.StringVar(&f.feedback, "feedback", agent.FeedbackRich, "pure or rich")
	fs.BoolVar(&f.guides, "guides", false, guidesHelp)
	fs.StringVar(&f.primitives, "primitives", envOr("PYRUALEAN_PRIMITIVES", agent.PrimitivesFull), "full or no-vla (default $PYRUALEAN_PRIMITIVES, else full)")
	fs.StringVar(&f.vlaEndpoint, "vla-endpoint", "", "VLA server for the learned primitives ([ws|http|socket]://host:port; default $PYRUALEAN_VLA_ENDPOINT)")
	fs.StringVar(&f.sealed, "sealed", agent.SealAuto, "auto (robot server + OS sandbox where available, else said loudly and recorded sealed: false), on (refuse to start unsealed) or off (the robot in the kernel, as before)")
	fs.StringVar(&f.liberoType, "libero-type", "", "LIBERO variant, as the seed: standard or pro (LIBERO-PRO's perturbed suites); default: what --suite needs")
	fs.StringVar(&f.sam3Endpoint, "sam3-endpoint", "", "SAM 3 server for LIBERO's segment (http://host:port; make(sam3_endpoint=...))")
	fs.StringVar(&f.envEndpoint, "env-endpoint", "", "running RPent env server for robotwin/robocasa (http://host:port or socket://host:port; default $PYRUALEAN_ENV_SERVER)")
}

// validate resolves the robot (a suite implies its robot), then checks the choices and the ranges;
// the error is one line for the user, naming the fix.
func (f *episodeFlags) validate() error {
	if err := f.resolveRobot(); err != nil {
		return err
	}
	if f.primitives != agent.PrimitivesFull && f.primitives != agent.PrimitivesNoVLA && os.Getenv("PYRUALEAN_PRIMITIVES") == f.primitives {
		return fmt.Errorf("$PYRUALEAN_PRIMITIVES %q: want full or no-vla (or unset it)", f.primitives)
	}
	for _, err := range []error{
		oneOf("arm", f.arm, agent.ArmCells, agent.ArmTools, agent.ArmProgram),
		oneOf("images", f.images, agent.ImagesOnMotion, agent.ImagesOnDemand, agent.ImagesNone),
		oneOf("feedback", f.feedback, agent.FeedbackPure, agent.FeedbackRich),
		oneOf("primitives", f.primitives, agent.PrimitivesFull, agent.PrimitivesNoVLA),
		oneOf("sealed", f.sealed, agent.SealOff, agent.SealAuto, agent.SealOn),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case f.sam3Endpoint != "" && !strings.HasPrefix(f.sam3Endpoint, "http://") && !strings.HasPrefix(f.sam3Endpoint, "https://"):
		return fmt.Errorf("--sam3-endpoint %q: want http://host:port", f.sam3Endpoint)
	case f.seed < 0:
		return fmt.Errorf("--seed %d: must be >= 0", f.seed)
	case f.maxTurns < 0:
		return fmt.Errorf("--max-turns %d: must be >= 0", f.maxTurns)
	case f.budgetS < 0:
		return fmt.Errorf("--budget-s %g: must be >= 0", f.budgetS)
	case f.cellTimeoutS <= 0:
		return fmt.Errorf("--cell-timeout-s %g: must be > 0", f.cellTimeoutS)
	case f.maxPrograms < 0:
		return fmt.Errorf("--max-programs %d: must be >= 0", f.maxPrograms)
	case f.programTimeoutS < 0:
		return fmt.Errorf("--program-timeout-s %g: must be >= 0", f.programTimeoutS)
	case (f.maxPrograms > 0 || f.programTimeoutS > 0) && f.arm != agent.ArmProgram:
		return fmt.Errorf("--max-programs and --program-timeout-s need --arm program (the arm is %s)", f.arm)
	case f.maxEnvSteps <= 0:
		return fmt.Errorf("--max-episode-steps %d: must be > 0", f.maxEnvSteps)
	case f.envEndpoint != "" && !strings.Contains(f.envEndpoint, "://"):
		return fmt.Errorf("--env-endpoint %q: want http://host:port or socket://host:port", f.envEndpoint)
	case f.vlaEndpoint != "" && f.primitives == agent.PrimitivesNoVLA:
		return errors.New("--vla-endpoint with --primitives no-vla: the VLA primitives are hidden")
	}
	return f.fromRegistry()
}

// fromRegistry asks the robot registry what only it knows (a robot's default seed, whether it drives an
// env server, which make() options it takes) when the flags need it; the embedded default robot with a
// seed given and none of one robot's own options needs nothing.
func (f *episodeFlags) fromRegistry() error {
	f.defaultSeed = 0
	// flags that set an option only some robots' make() takes; which robots take it is the registry's to say
	type robotOption struct{ flag, option, value string }
	var own []robotOption
	for _, o := range []robotOption{{"--libero-type", "libero_type", f.liberoType}, {"--sam3-endpoint", "sam3_endpoint", f.sam3Endpoint}} {
		if o.value != "" {
			own = append(own, o)
		}
	}
	if f.envEndpoint == "" && len(own) == 0 && (f.seedSet || f.robot == robotapi.DefaultRobot) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	robots, err := robotapi.Robots(ctx)
	if err != nil {
		return fmt.Errorf("--robot: %w", err)
	}
	info, err := robotapi.FindRobot(robots, f.robot)
	if err != nil {
		return fmt.Errorf("--robot: %w; see pyrualean suites", err)
	}
	if f.envEndpoint != "" && !info.Remote {
		return fmt.Errorf("--env-endpoint: robot %q runs in the kernel, not behind an env server", f.robot)
	}
	for _, o := range own {
		// an unavailable robot lists no options: its boot says why it is unavailable
		if !info.Available || slices.Contains(info.Options, o.option) {
			continue
		}
		owners := robotapi.RobotsTaking(robots, o.option)
		if len(owners) == 0 {
			return fmt.Errorf("%s: no registered robot's make() takes %s", o.flag, o.option)
		}
		return fmt.Errorf("%s: robot %s's make() takes no %s: add --robot %s, or a --suite of it", o.flag, f.robot,
			o.option, strings.Join(owners, " or --robot "))
	}
	f.defaultSeed = info.DefaultSeed
	return nil
}

// config is the episode the flags describe; with no --out, the run folder is named after now.
func (f *episodeFlags) config(now time.Time) agent.EpisodeConfig {
	out := f.out
	if out == "" {
		task := f.task
		if task == "" {
			task = "default"
		}
		if f.cmd == "mcp" {
			out = filepath.Join("runs", fmt.Sprintf("%s-mcp-%s-%s-%s", now.Format("20060102-150405"), f.robot, task, f.arm))
		} else {
			out = filepath.Join("runs", fmt.Sprintf("%s-%s-%s-%s", now.UTC().Format("20060102T150405"), f.robot, task, f.arm))
		}
	}
	seed := f.seed
	if !f.seedSet {
		seed = f.defaultSeed // validate asked the registry
	}
	return agent.EpisodeConfig{
		Robot: f.robot, Suite: f.suite, Task: f.task, SAM3Endpoint: f.sam3Endpoint, LiberoType: f.liberoType, Seed: seed, Arm: f.arm, Images: f.images,
		Feedback: f.feedback, Primitives: f.primitives, Guides: f.guides, MaxTurns: f.maxTurns,
		Budget: time.Duration(f.budgetS * float64(time.Second)), CellTimeout: time.Duration(f.cellTimeoutS * float64(time.Second)),
		MaxEnvSteps: f.maxEnvSteps, Out: out, VLAEndpoint: f.vlaEndpoint, EnvEndpoint: f.envEndpoint,
		Sealed:      f.sealed,
		MaxPrograms: f.maxPrograms, ProgramTimeout: time.Duration(f.programTimeoutS * float64(time.Second)),
	}
}

// resolveRobot fills in the robot: the one owning --suite (the suite may also come as --task
// SUITE/INDEX), else tabletop. --task SUITE/INDEX becomes --suite SUITE --task INDEX, so result.json
// names an episode one way however it was asked for.
func (f *episodeFlags) resolveRobot() error {
	if s, t, ok := strings.Cut(f.task, "/"); ok && s != "" && t != "" {
		if f.suite != "" && f.suite != s {
			return fmt.Errorf("--task %q names suite %s but --suite is %s: drop one", f.task, s, f.suite)
		}
		f.suite, f.task = s, t
	}
	if f.robot != "" {
		return nil
	}
	if f.suite == "" {
		f.robot = robotapi.DefaultRobot
		return nil
	}
	robot, err := suiteRobot(f.suite)
	if err != nil {
		return fmt.Errorf("--suite %s: %w", f.suite, err)
	}
	f.robot = robot
	return nil
}

// suiteRobot asks the robot package's registry which robot owns a suite.
func suiteRobot(suite string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	robot, err := robotapi.RobotForSuite(ctx, suite)
	if err != nil {
		return "", fmt.Errorf("%w; see pyrualean suites, or name the robot with --robot", err)
	}
	return robot, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// oneOf checks that flag --name's value v is one of allowed.
func oneOf(name, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("--%s %q: want one of %s", name, v, strings.Join(allowed, ", "))
}

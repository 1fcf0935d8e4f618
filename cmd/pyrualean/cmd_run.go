package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/spec"
)

// newProgramFlagSet is the flag set of the commands that run one program against a fresh episode (run,
// generate): the episode's settings, with the program arm implied; skip names settings the command
// sets itself.
func newProgramFlagSet(name string, stderr io.Writer, skip ...string) (*flag.FlagSet, *episodeFlags, *bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := newEpisodeFlags(name, fs, skip...)
	verbose := fs.Bool("v", false, "log progress to stderr")
	return fs, f, verbose
}

// programSpec validates the flags of run/generate: one program, in the program arm.
func programSpec(ctx context.Context, fs *flag.FlagSet, f *episodeFlags, now time.Time) (spec.Episode, error) {
	if fs.NArg() > 0 {
		return spec.Episode{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	s := &f.spec
	if err := s.ApplyFlags(); err != nil {
		return spec.Episode{}, err
	}
	if s.Arm != spec.ArmCells && s.Arm != spec.ArmProgram { // cells is the flag's default
		return spec.Episode{}, fmt.Errorf("--arm %s: %s runs one program (the program arm)", s.Arm, f.cmd)
	}
	s.Arm = spec.ArmProgram
	if s.MaxPrograms == 0 {
		s.MaxPrograms = 1
	}
	if s.MaxPrograms != 1 {
		return spec.Episode{}, fmt.Errorf("--max-programs %d: %s runs exactly one program", s.MaxPrograms, f.cmd)
	}
	return f.finish(ctx, now)
}

// runLine is `run`'s stdout line, the original's keys: the episode's status, the program's own ending as
// the reason, and the episode's counters.
type runLine struct {
	Status             string  `json:"status"`
	Reason             string  `json:"reason"`
	EnvironmentSuccess *bool   `json:"environment_success"`
	Calls              int     `json:"calls"`
	EnvSteps           int     `json:"env_steps"`
	PolicyWallS        float64 `json:"policy_wall_s"`
	RunDir             string  `json:"run_dir"`
	Policy             string  `json:"policy,omitempty"`
}

// cmdRun runs one program (a .py file defining run(robo)) against a fresh episode.
func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, f, verbose := newProgramFlagSet("run", stderr, "runtime", "model", "from")
	policy := fs.String("policy", "", "the program: a .py file defining run(robo) (required)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	f.policy, f.spec.Policy.Model = "program", "none"
	cfg, err := programSpec(ctx, fs, f, time.Now())
	if err == nil && *policy == "" {
		err = errors.New("--policy P.py is required")
	}
	var code []byte
	if err == nil {
		if code, err = os.ReadFile(*policy); err != nil {
			err = fmt.Errorf("--policy: %w", err)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean run: %v\n", err)
		return exitUsage
	}
	return runOneProgram(ctx, cfg, agent.Host{Logger: cmdLogger(stderr, *verbose)}, "run", stdout, stderr, func(ctx context.Context, ep *agent.Episode) (string, string, error) {
		st, err := agent.RunProgramOnce(ctx, ep, string(code))
		return st, *policy, err
	})
}

// runOneProgram boots the episode, gets and runs its one program with produce, finishes the episode
// and prints the run line. The exit status is play's: 0 when the program ran (whatever its own
// ending), 2 for boot_error and error (the original's), 1 for the other failures.
func runOneProgram(ctx context.Context, cfg spec.Episode, host agent.Host, name string, stdout, stderr io.Writer,
	produce func(context.Context, *agent.Episode) (status, policy string, err error)) int {
	ep, err := agent.StartEpisode(ctx, cfg, host)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean %s: %v\n", name, err)
		if res, rerr := readResult(cfg.Out); rerr == nil {
			return statusExit(res.Status)
		}
		return exitEpisodeError
	}
	pctx, cancel := ep.Context(ctx)
	status, policy, runErr := produce(pctx, ep)
	if runErr != nil && pctx.Err() != nil {
		if cause := context.Cause(pctx); cause != nil && !errors.Is(runErr, cause) {
			runErr = fmt.Errorf("%w: %w", cause, runErr)
		}
	}
	cancel()
	res, ferr := ep.Finish(context.WithoutCancel(ctx), "", runErr)
	if ferr != nil {
		fmt.Fprintf(stderr, "pyrualean %s: %v\n", name, ferr)
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "pyrualean %s: %v\n", name, runErr)
	}
	reason := status
	if reason == "" {
		reason = res.Reason
	}
	b, _ := json.Marshal(runLine{Status: res.Status, Reason: reason, EnvironmentSuccess: res.EnvironmentSuccess,
		Calls: res.Calls, EnvSteps: res.EnvSteps, PolicyWallS: res.PolicyWallS, RunDir: cfg.Out, Policy: policy})
	fmt.Fprintln(stdout, string(b))
	if code := statusExit(res.Status); code != 0 || runErr == nil {
		return code
	}
	return exitFailed
}

func cmdLogger(stderr io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/robotserver"
	"github.com/pyrualean/pyrualean/spec"
)

// Host is how this process runs episodes, as opposed to what an episode is (spec.Episode): where to log,
// the repository, shared parts a suite hands every episode, and its hooks. The zero value runs a lone
// episode with fresh parts.
type Host struct {
	Logger *slog.Logger
	Root   string // repository root (Python venv, robot package); found from cwd when empty
	// Kernels hands out warmed kernels (a suite's kernel.Pool; only for unsealed episodes); nil: launch.
	Kernels KernelSource
	// KernelEnv is added to a launched kernel's environment and, sealed, to its sandbox process's own
	// (not the sandbox's): a suite marks its kernels so that a resumed run finds their orphans.
	KernelEnv map[string]string
	// Release, when set, is given the episode's last step (shut the kernel down, stop the robot server)
	// once every run-folder file is written, to run when it likes; nil: Finish waits for it.
	Release func(release func())
	// Admit, when set, is called once the robot is booted and before the policy's clock starts; it
	// returns when the episode may act. Its wait is result.json's queued_s, outside startup and budget.
	Admit func(ctx context.Context) error
	// References returns the robot's API reference (robotapi.Reference when nil; a suite caches it).
	References func(ctx context.Context, robot, primitives, format string) (string, error)
	// Node names the cluster node running the episode (a Ray node id): result.json's host.node.
	Node string
	// Forker, when set, forks sealed episodes' robot servers from one process with their modules imported
	// (a suite's or an environment server's; cheaper than exec'ing each); nil: exec.
	Forker *robotserver.Forker
}

// KernelSource hands out a launched kernel that is the caller's from then on (kernel.Pool).
type KernelSource interface {
	Take(ctx context.Context) (*kernel.Kernel, error)
}

// FindRoot finds the repository root (robotapi.Root).
func FindRoot() (string, error) { return robotapi.Root() }

// Errors that end an episode.
var (
	ErrBudgetExceeded = errors.New("wall-clock budget exceeded")
	ErrBoot           = errors.New("episode boot failed")
	ErrEpisodeOver    = errors.New("episode is over")
	// ErrKernelRestarted ends an episode whose kernel had to be restarted after a cell timeout.
	ErrKernelRestarted = errors.New("the kernel was restarted after a cell timeout: the robot state is lost")
)

// Episode is one live episode, a pipeline of parts with their own locks and files:
//
//	boot.go     kernel (and sealed.go: robot server + sandbox), setup cell, card, prompt (briefing.go)
//	toolkits.go the arms' tools → calls.go: one agent call = gate, budget, the cell step, feedback
//	cellstep.go the cell step: one execute at a time (dispatch.go), judged once (judge.go)
//	people.go   cells people run through the gateway, what the model is told about them
//	ledger.go   accounting (result.json) and attribution.go: each robot call to the cell that made it
//	finish.go   the end and the live status; gate.go pause/step; controller.go the gateway's view
type Episode struct {
	spec    spec.Episode
	host    Host
	log     *slog.Logger
	created time.Time

	kern   *kernel.Kernel
	trace  *notebooks.Trace
	files  *runFolder
	brief  briefing
	served *served // robot server and sandbox of a sealed episode; nil: the robot is in the kernel
	judge  Judge
	book   *ledger
	exec   *dispatcher
	people *people
	gate   *gate
	clock  policyClock
	names  cellNames // cells by execution count, for tracebacks

	calls caller  // calls.go: one agent call, gate to feedback
	steps stepper // cellstep.go: one execute, start to verdict
	boots booter  // boot.go: kernel, robot, trace, setup cell, prompt

	closeOnce sync.Once // the kernel (and robot server) is shut down once
	filesOnce sync.Once // the trace and run folder are closed once
}

type (
	caller  struct{ e *Episode }
	stepper struct{ e *Episode }
	booter  struct{ e *Episode }
)

// StartEpisode boots the robot in a fresh kernel, writes the run folder's first files (result.json
// "running", prompt.txt, card, trace.ipynb with the setup cell) and returns the live episode. s must be
// validated (spec.Episode.Validate). On a boot failure result.json says boot_error (interrupted when ctx
// ended) and the error wraps ErrBoot.
func StartEpisode(ctx context.Context, s spec.Episode, h Host) (*Episode, error) {
	if s.Out == "" || !filepath.IsAbs(s.Out) || s.Robot == "" || s.Seed < 0 {
		return nil, fmt.Errorf("episode: the spec is not validated (run folder %q, robot %q, seed %d)", s.Out, s.Robot, s.Seed)
	}
	if h.Logger == nil {
		h.Logger = slog.Default()
	}
	if h.Root == "" {
		root, err := FindRoot()
		if err != nil {
			return nil, err
		}
		h.Root = root
	}
	e := &Episode{spec: s, host: h, log: h.Logger, created: time.Now(), exec: newDispatcher()}
	e.gate = newGate(&e.clock)
	e.people = newPeople(e)
	e.calls, e.steps, e.boots = caller{e}, stepper{e}, booter{e}
	var err error
	if e.files, err = openRunFolder(s.Out); err != nil {
		return nil, fmt.Errorf("%w: run folder: %w", ErrBoot, err)
	}
	e.book = newLedger(baseResult(s, h.Node, e.created), e.files)
	if err := e.book.save(); err != nil {
		return nil, e.boots.bootFail(fmt.Errorf("result.json: %w", err))
	}
	if err := e.boots.boot(ctx); err != nil {
		if ctx.Err() != nil { // SIGINT/SIGTERM while booting: the episode was interrupted, boot did not fail
			err = fmt.Errorf("%w: %w (%v)", errBootInterrupted, context.Cause(ctx), err)
		}
		return nil, e.boots.bootFail(err)
	}
	startup := time.Since(e.created)
	e.book.update(func(r *Result) { r.KernelPID = e.kern.Pid() })
	var queued time.Duration
	if h.Admit != nil {
		t := time.Now()
		if err := h.Admit(ctx); err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%w: waiting for a slot to act: %w", errBootInterrupted, context.Cause(ctx))
			}
			return nil, e.boots.bootFail(err)
		}
		queued = time.Since(t)
	}
	e.clock.start(s.Budget())
	e.book.update(func(r *Result) { r.StartupS, r.QueuedS = Round(startup.Seconds(), 3), Round(queued.Seconds(), 3) })
	if err := e.book.save(); err != nil {
		return nil, e.boots.bootFail(err)
	}
	return e, nil
}

// Spec returns the episode's spec (validated).
func (e *Episode) Spec() spec.Episode { return e.spec }

// Kernel returns the episode's kernel.
func (e *Episode) Kernel() *kernel.Kernel { return e.kern }

// Trace returns the episode's notebook.
func (e *Episode) Trace() *notebooks.Trace { return e.trace }

// ID names the episode: its run folder's base name.
func (e *Episode) ID() string { return filepath.Base(e.spec.Out) }

// Context derives the policy's context: it ends at the wall-clock budget (cause ErrBudgetExceeded;
// time the agent is held by a person's pause is not counted) or when the kernel dies (cause: the kernel's error).
func (e *Episode) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	stopTimer := e.clock.onBudget(func() { cancel(ErrBudgetExceeded) })
	go func() {
		select {
		case <-e.kern.Done():
			err := e.kern.Err()
			if err == nil {
				err = kernel.ErrKernelDied
			}
			cancel(err)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		stopTimer()
		cancel(context.Canceled)
	}
}

// baseResult is result.json as the episode starts.
func baseResult(s spec.Episode, node string, created time.Time) Result {
	host, _ := os.Hostname()
	r := Result{
		Schema: ResultSchema, System: "pyrualean", Arm: s.Arm, Backend: s.Robot, Robot: s.Robot,
		Suite: s.Suite, Task: s.Task, Seed: s.Seed, Sample: s.Sample, Model: s.Policy.Model, Runtime: s.Policy.Runtime,
		ReasoningEffort: s.Policy.Reasoning, Images: s.Images, Feedback: s.Feedback, Primitives: s.Primitives,
		Status: StatusRunning, TimeoutS: s.BudgetS, CellTimeoutS: s.CellTimeoutS, MaxEpisodeSteps: s.MaxEnvSteps,
		Host:  HostInfo{Name: host, CUDADevice: s.CUDADevice, PrimitiveSet: s.Primitives, RPentRoot: os.Getenv("RPENT_ROOT"), Node: node},
		Notes: []string{}, PID: os.Getpid(), CreatedAt: created.UTC().Format(time.RFC3339),
		RobotOptions: s.RobotOptions, Generation: Generation{SandboxFlags: []string{}},
		Files: RunFiles{Trace: "trace.ipynb", Prompt: "prompt.txt", Turns: "turns.jsonl", Calls: "calls.jsonl", Card: "card.json"},
	}
	if s.MaxPrograms > 0 {
		n := s.MaxPrograms
		r.MaxPrograms = &n
	}
	r.BudgetMode = "wall"
	if s.MaxCalls > 0 {
		mt := s.MaxCalls
		r.MaxTurns = &mt
		r.BudgetMode = "calls"
	}
	if _, ok := s.Policy.PriceTable().Lookup(s.Policy.Model); ok {
		zero := 0.0
		r.CostUSD = &zero
	}
	return r
}

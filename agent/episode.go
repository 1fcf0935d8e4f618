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
)

// EpisodeConfig says which episode to run and how.
type EpisodeConfig struct {
	Robot, Suite, Task string
	Seed               int
	Arm                string        // cells | tools | program
	MaxPrograms        int           // program arm: run_program calls allowed; 0: unlimited
	ProgramTimeout     time.Duration // program arm: the watchdog of one program (default CellTimeout)
	Images             string        // on-motion | on-demand | none
	Feedback           string        // pure | rich
	PromptProfile      string        // default | compact (agent.ProfileCompact: small local models; cells arm)
	Primitives         string        // full | no-vla
	Guides             bool
	MaxTurns           int           // python/primitive calls; 0: unlimited
	Budget             time.Duration // wall clock for the policy; 0: none
	CellTimeout        time.Duration // per cell; the kernel is interrupted (default 300 s)
	MaxEnvSteps        int           // simulator step budget (default 10000)
	VLAEndpoint        string        // VLA server for the learned primitives (make(vla_endpoint=...))
	EnvEndpoint        string        // running env server of a remote robot (make(env_url=...))
	SAM3Endpoint       string        // SAM 3 server for LIBERO's segment (make(sam3_endpoint=...))
	LiberoType         string        // LIBERO's standard | pro (make(libero_type=...)); "" : what the suite needs
	Out                string        // run folder
	Model, Runtime     string        // recorded in result.json
	ReasoningEffort    string
	KernelSpec         string // default "pyrualean"
	Root               string // repository root (Python venv, robot package); found from cwd when empty
	CUDADevice         string // CUDA_VISIBLE_DEVICES for the kernel
	// KernelEnv is added to a launched kernel's environment and, sealed, to its sandbox process's
	// own (not the sandbox's): a suite marks its kernels so that a resumed run finds their orphans.
	KernelEnv map[string]string
	Sealed    string // off (default: the robot in the kernel) | auto | on: robot server + OS sandbox (sealed.go)
	Prices    PriceTable
	Logger    *slog.Logger
	// Kernels hands out warmed kernels (a suite's kernel.Pool); nil launches a fresh one.
	Kernels KernelSource
	// Release, when set, is given the episode's last step (shut the kernel down, stop the robot
	// server) once every run-folder file is written, to run when it likes: a suite runs it in the
	// background and waits for all before it exits. Nil: the episode's end waits for it.
	Release func(release func())
	// Admit, when set, is called once the robot is booted and before the policy's clock starts; it
	// returns when the episode may act (a suite's slot is free, so the next episode boots while others
	// act) or with ctx's error. Its wait is result.json's queued_s, in neither startup_s nor the budget.
	Admit func(ctx context.Context) error
	// References returns the robot's API reference (robotapi.Reference when nil; a suite caches it).
	References func(ctx context.Context, robot, primitives, format string) (string, error)
}

// KernelSource hands out a launched kernel that is the caller's from then on (kernel.Pool).
type KernelSource interface {
	Take(ctx context.Context) (*kernel.Kernel, error)
}

func (c *EpisodeConfig) defaults() error {
	if c.Robot == "" {
		c.Robot = "tabletop"
	}
	if c.Arm == "" {
		c.Arm = ArmCells
	}
	if c.Images == "" {
		c.Images = ImagesOnMotion
	}
	if c.Feedback == "" {
		c.Feedback = FeedbackRich
	}
	if c.Primitives == "" {
		c.Primitives = PrimitivesFull
	}
	if c.PromptProfile == "" {
		c.PromptProfile = ProfileDefault
	}
	if c.CellTimeout <= 0 {
		c.CellTimeout = 300 * time.Second
	}
	if c.MaxEnvSteps <= 0 {
		c.MaxEnvSteps = 10000
	}
	if c.KernelSpec == "" {
		c.KernelSpec = "pyrualean"
	}
	if c.Runtime == "" {
		c.Runtime = "openai"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	mode, err := sealMode(c.Sealed)
	if err != nil {
		return err
	}
	c.Sealed = mode
	if c.Root == "" {
		root, err := FindRoot()
		if err != nil {
			return err
		}
		c.Root = root
	}
	switch {
	case c.Out == "":
		return errors.New("episode: no run folder (Out)")
	case !filepath.IsAbs(c.Out):
		// The kernel runs inside <out>/workspace: a relative path handed to it would nest again.
		abs, err := filepath.Abs(c.Out)
		if err != nil {
			return fmt.Errorf("episode: run folder: %w", err)
		}
		c.Out = abs
		return c.defaults()
	case c.Arm != ArmCells && c.Arm != ArmTools && c.Arm != ArmProgram:
		return fmt.Errorf("episode: arm %q (want cells, tools or program)", c.Arm)
	case c.MaxPrograms < 0:
		return fmt.Errorf("episode: max programs %d (want >= 0)", c.MaxPrograms)
	case c.Images != ImagesOnMotion && c.Images != ImagesOnDemand && c.Images != ImagesNone:
		return fmt.Errorf("episode: images %q (want on-motion, on-demand or none)", c.Images)
	case c.Feedback != FeedbackPure && c.Feedback != FeedbackRich:
		return fmt.Errorf("episode: feedback %q (want pure or rich)", c.Feedback)
	case c.PromptProfile != ProfileDefault && c.PromptProfile != ProfileCompact:
		return fmt.Errorf("episode: prompt profile %q (want default or compact)", c.PromptProfile)
	case c.PromptProfile == ProfileCompact && c.Arm != ArmCells:
		return fmt.Errorf("episode: the compact prompt profile is for the cells arm (arm %s)", c.Arm)
	case c.Primitives != PrimitivesFull && c.Primitives != PrimitivesNoVLA:
		return fmt.Errorf("episode: primitives %q (want full or no-vla)", c.Primitives)
	}
	return nil
}

// FindRoot finds the repository root (robotapi.Root: $PYRUALEAN_ROOT, the working directory or the
// executable, walking up to go.mod).
func FindRoot() (string, error) { return robotapi.Root() }

// Errors that end an episode.
var (
	ErrBudgetExceeded = errors.New("wall-clock budget exceeded")
	ErrBoot           = errors.New("episode boot failed")
	ErrEpisodeOver    = errors.New("episode is over")
	// ErrKernelRestarted ends an episode whose kernel had to be restarted after a cell timeout.
	ErrKernelRestarted = errors.New("the kernel was restarted after a cell timeout: the robot state is lost")
)

// Episode is one live episode. It composes one part per concern, each in its own file:
// boot.go (kernel, setup cell, card), briefing.go (prompt, card files, guides, toolkit), cells.go
// (tool calls run as cells), ledger.go (accounting and the run folder's files), finish.go (status and
// the end), gate.go (pause/step), controller.go (the gateway's view), humans.go (cells a person runs).
type Episode struct {
	cfg   EpisodeConfig
	log   *slog.Logger
	kern  *kernel.Kernel
	trace *notebooks.Trace

	briefing   // what the model is given (briefing.go)
	runFolder  // the run folder's files (ledger.go)
	humanWatch // the watcher of other clients' cells (humans.go)
	gate       *gate
	callMu     sync.Mutex // serialises tool calls and the robot reports taken for people's cells
	closeOnce  sync.Once  // the kernel (and robot server) is shut down once: by Finish, or by Close after a linger
	served     *served    // robot server and sandbox of a sealed episode (sealed.go); nil: the robot is in the kernel

	createdAt, policyStart time.Time
	startup                time.Duration

	ledger // guarded accounting state: result, turns, usage, finish (ledger.go)
}

// StartEpisode boots the robot in a fresh kernel, writes the run folder's first files (result.json
// "running", prompt.txt, card, trace.ipynb with the setup cell) and returns the live episode. On a
// boot failure result.json says boot_error and the error wraps ErrBoot.
func StartEpisode(ctx context.Context, cfg EpisodeConfig) (*Episode, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	e := &Episode{cfg: cfg, log: cfg.Logger, createdAt: time.Now(), gate: newGate()}
	e.workspace = filepath.Join(cfg.Out, "workspace")
	if err := os.MkdirAll(e.workspace, 0o755); err != nil {
		return nil, fmt.Errorf("%w: run folder: %w", ErrBoot, err)
	}
	e.res = e.baseResult()
	if err := e.saveResult(); err != nil {
		return nil, fmt.Errorf("%w: result.json: %w", ErrBoot, err)
	}
	var err error
	if e.turnsW, err = openJSONL(filepath.Join(cfg.Out, "turns.jsonl")); err != nil {
		return nil, e.bootFail(fmt.Errorf("turns.jsonl: %w", err))
	}
	if e.callsW, err = openJSONL(filepath.Join(cfg.Out, "calls.jsonl")); err != nil {
		return nil, e.bootFail(fmt.Errorf("calls.jsonl: %w", err))
	}
	if err := e.boot(ctx); err != nil {
		if ctx.Err() != nil { // SIGINT/SIGTERM while booting: the episode was interrupted, boot did not fail
			err = fmt.Errorf("%w: %w (%v)", errBootInterrupted, context.Cause(ctx), err)
		}
		return nil, e.bootFail(err)
	}
	e.startup = time.Since(e.createdAt)
	e.mu.Lock()
	e.res.KernelPID = e.kern.Pid()
	e.mu.Unlock()
	var queued time.Duration
	if cfg.Admit != nil {
		t := time.Now()
		if err := cfg.Admit(ctx); err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%w: waiting for a slot to act: %w", errBootInterrupted, context.Cause(ctx))
			}
			return nil, e.bootFail(err)
		}
		queued = time.Since(t)
	}
	e.policyStart = time.Now()
	e.mu.Lock()
	e.res.StartupS = round3(e.startup.Seconds())
	e.res.QueuedS = round3(queued.Seconds())
	e.mu.Unlock()
	if err := e.saveResult(); err != nil {
		return nil, e.bootFail(err)
	}
	e.watchHumans()
	return e, nil
}

// Toolkit returns the episode's tools.
func (e *Episode) Toolkit() Toolkit { return e.tk }

// Kernel returns the episode's kernel.
func (e *Episode) Kernel() *kernel.Kernel { return e.kern }

// Trace returns the episode's notebook.
func (e *Episode) Trace() *notebooks.Trace { return e.trace }

// Prompt returns the prompt (prompt.txt and the card images).
func (e *Episode) Prompt() Prompt { return e.prompt }

// Dir returns the run folder.
func (e *Episode) Dir() string { return e.cfg.Out }

// Config returns the episode's configuration (defaults applied).
func (e *Episode) Config() EpisodeConfig { return e.cfg }

// Context derives the policy's context: it ends at the wall-clock budget (cause ErrBudgetExceeded)
// or when the kernel dies (cause: the kernel's error).
func (e *Episode) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	var stopTimer func() bool
	if e.cfg.Budget > 0 {
		t := time.AfterFunc(time.Until(e.policyStart.Add(e.cfg.Budget)), func() { cancel(ErrBudgetExceeded) })
		stopTimer = t.Stop
	}
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
		if stopTimer != nil {
			stopTimer()
		}
		cancel(context.Canceled)
	}
}

// ID names the episode: its run folder's base name.
func (e *Episode) ID() string { return filepath.Base(e.cfg.Out) }

package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runs"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/robotserver"
	"github.com/pyrualean/pyrualean/spec"
)

// evalExec runs one episode in this process: play's setup, with the suite's shared parts: one
// started runtime per row and model (so local episodes share one llama.cpp server and its prompt
// cache), warm kernels, the robot's API reference fetched once, and one HTTP transport with
// per-endpoint limits.
type evalExec struct {
	logger    *slog.Logger
	endpoints *eval.Endpoints
	kernels   *warmKernels   // nil: every episode boots a cold kernel
	releases  sync.WaitGroup // episodes' kernel shutdowns, off the episodes' critical path
	suiteDir  string         // absolute; marks every kernel (eval.EvalEnv) so a resumed run finds orphans
	// acting holds a token per episode past boot (--jobs of them); nil: no limit. The engine runs more
	// workers than that (--boot-ahead), so the next episodes boot while these act.
	acting chan struct{}
	forker *lazyForker // sealed episodes' robot servers are forked from it; nil: exec'd

	mu       sync.Mutex
	runtimes map[runtimeKey]*sharedRuntime
	refs     map[[3]string]*reference
}

type runtimeKey struct {
	row   int
	model string
}

// sharedRuntime is a runtime started once for the episodes of a row and model.
type sharedRuntime struct {
	once sync.Once
	rt   runtimes.Runtime
	err  error
}

// scriptRuntime replays fixed actions (a tools episode replaying its cells twin's primitive calls).
type scriptRuntime struct{ actions []runtimes.Action }

func (scriptRuntime) Model() string               { return "replay" }
func (scriptRuntime) Start(context.Context) error { return nil }
func (scriptRuntime) Close() error                { return nil }
func (r scriptRuntime) Run(ctx context.Context, ep agent.Driver) error {
	return runtimes.RunScript(ctx, ep, r.actions)
}

func (x *evalExec) Execute(ctx context.Context, j eval.Job) eval.Outcome {
	s := j.Spec
	s.Out = j.Dir
	if s.Policy.Runtime == "replay" { // the reference solution in this machine's repository
		root, err := robotapi.Root()
		if err != nil {
			return eval.Outcome{Status: agent.StatusBootError, Err: err}
		}
		s.Policy.From = filepath.Join(root, j.Solution)
	}
	host := agent.Host{Logger: x.logger, References: x.reference, KernelEnv: map[string]string{eval.EvalEnv: x.suiteDir},
		Release: func(release func()) { x.releases.Go(release) }}
	if x.kernels != nil && takesWarmKernel(s) {
		host.Kernels = x.kernels
	}
	if x.forker != nil && s.Sealed != spec.SealOff {
		host.Forker = x.forker.get(ctx)
	}
	rt, out := x.runtimeFor(ctx, j, s)
	if rt == nil {
		return out
	}
	s.Policy.Model = rt.Model()
	if x.acting != nil {
		admitted := false
		host.Admit = func(ctx context.Context) error {
			select {
			case x.acting <- struct{}{}:
				admitted = true
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		defer func() {
			if admitted {
				<-x.acting
			}
		}()
	}
	ep, err := agent.StartEpisode(ctx, s, host)
	if err != nil {
		if res, rerr := readResult(j.Dir); rerr == nil {
			return outcome(res, err)
		}
		return eval.Outcome{Status: agent.StatusBootError, Err: err}
	}
	res, err := runtimes.Play(ctx, rt, ep)
	if res == nil {
		return eval.Outcome{Status: agent.StatusError, Err: err}
	}
	return outcome(res, err)
}

// runtimeFor is what drives the job's episode: a replayed tools episode replays the primitive calls of
// its cells twin, a replayed cells episode its task's solution, anything else the row's runtime shared
// by the suite's episodes. A nil runtime comes with the outcome to record instead.
func (x *evalExec) runtimeFor(ctx context.Context, j eval.Job, s spec.Episode) (runtimes.Runtime, eval.Outcome) {
	switch {
	case s.Policy.Runtime == "replay" && s.Arm == spec.ArmTools:
		twin := j.TwinDir()
		if row, err := runs.LoadRun(twin); err != nil || eval.Retryable(row.Status) {
			return nil, eval.Outcome{Status: agent.StatusInterrupted, Err: fmt.Errorf("its cells twin %s has not finished", twin)}
		}
		acts, err := toolActions(twin)
		if err != nil {
			return nil, eval.Outcome{Status: agent.StatusError, Err: err}
		}
		return scriptRuntime{acts}, eval.Outcome{}
	case s.Policy.Runtime == "replay":
		rt, err := runtimes.For(s, runtimes.Wiring{Logger: x.logger})
		if err != nil {
			return nil, eval.Outcome{Status: agent.StatusBootError, Err: err}
		}
		return rt, eval.Outcome{}
	}
	rt, err := x.shared(ctx, j, s)
	if err != nil {
		return nil, eval.Outcome{Status: agent.StatusBootError, Err: err}
	}
	return rt, eval.Outcome{}
}

func outcome(res *agent.Result, err error) eval.Outcome {
	out := eval.Outcome{Status: res.Status, Success: res.EnvironmentSuccess, Err: err, WallS: res.PolicyWallS,
		InTok: res.Generation.InputTokens, LLMCalls: res.Generation.Turns}
	if res.CostUSD != nil {
		out.CostUSD = *res.CostUSD
	}
	return out
}

// shared returns the row's runtime for the episode's model, configured from the episode's settings
// and started at the first episode that needs it (a local model loads once for the suite).
func (x *evalExec) shared(ctx context.Context, j eval.Job, s spec.Episode) (runtimes.Runtime, error) {
	key := runtimeKey{j.Row, j.Model}
	x.mu.Lock()
	if x.runtimes == nil {
		x.runtimes = map[runtimeKey]*sharedRuntime{}
	}
	sr, ok := x.runtimes[key]
	if !ok {
		sr = &sharedRuntime{}
		x.runtimes[key] = sr
	}
	x.mu.Unlock()
	sr.once.Do(func() {
		// no progress lines: the suite's own display says how episodes go
		w := runtimes.Wiring{Logger: x.logger, HTTPClient: x.endpoints.Client()}
		if sr.rt, sr.err = runtimes.For(s, w); sr.err == nil {
			sr.err = sr.rt.Start(context.WithoutCancel(ctx))
		}
	})
	if sr.err != nil {
		return nil, fmt.Errorf("runtime %s: %w", s.Policy.Runtime, sr.err)
	}
	return sr.rt, nil
}

// reference is one cached API reference, fetched by the first episode that asks.
type reference struct {
	done chan struct{}
	text string
	err  error
}

// reference returns the robot's API reference, asking the robot package once per (robot,
// primitives, format) instead of once per episode; a failed fetch is not kept.
func (x *evalExec) reference(ctx context.Context, robot, primitives, format string) (string, error) {
	key := [3]string{robot, primitives, format}
	x.mu.Lock()
	if x.refs == nil {
		x.refs = map[[3]string]*reference{}
	}
	r, ok := x.refs[key]
	if !ok {
		r = &reference{done: make(chan struct{})}
		x.refs[key] = r
	}
	x.mu.Unlock()
	if !ok {
		r.text, r.err = robotapi.Reference(ctx, robot, primitives, format)
		if r.err != nil {
			x.mu.Lock()
			delete(x.refs, key)
			x.mu.Unlock()
		}
		close(r.done)
	}
	select {
	case <-r.done:
		return r.text, r.err
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

func (x *evalExec) close() {
	x.mu.Lock()
	for _, sr := range x.runtimes {
		if sr.rt != nil && sr.err == nil {
			sr.rt.Close()
		}
	}
	x.mu.Unlock()
	if x.kernels != nil {
		x.kernels.close()
	}
	x.releases.Wait() // no kernel or robot server outlives the suite
	if x.forker != nil {
		x.forker.close()
	}
}

// lazyForker starts a robot-server forker at the first sealed episode (a suite of unsealed ones needs
// none). One that fails to start is logged once; its episodes' servers are exec'd.
type lazyForker struct {
	log  *slog.Logger
	once sync.Once
	f    *robotserver.Forker
}

func (l *lazyForker) get(ctx context.Context) *robotserver.Forker {
	l.once.Do(func() {
		root, err := robotapi.Root()
		if err == nil {
			l.f, err = robotserver.StartForker(ctx, robotserver.ForkerOptions{Root: root, Logger: l.log})
		}
		if err != nil {
			l.log.Warn("robot servers will be exec'd, not forked", "err", err)
		}
	})
	return l.f
}

func (l *lazyForker) close() {
	l.once.Do(func() {}) // a get racing close starts nothing
	if l.f != nil {
		l.f.Close()
	}
}

// warmKernels hands out tabletop kernels from a kernel.Pool (robot package imported, model
// compiled), started at the first episode. The pool warms a replacement at each take; once every
// expected take is done it is closed, so no kernel warms for nobody (a warm-up costs a core for
// seconds, taken from the episodes still running). A take past that (a retry) launches a kernel.
type warmKernels struct {
	spec kernel.Spec
	opts kernel.LaunchOptions
	jobs int

	mu     sync.Mutex
	left   int // takes still expected
	pool   *kernel.Pool
	closed bool
}

// expect sets how many takes are coming (the episodes the runner will run).
func (w *warmKernels) expect(n int) {
	w.mu.Lock()
	w.left = n
	w.mu.Unlock()
}

func (w *warmKernels) Take(ctx context.Context) (*kernel.Kernel, error) {
	w.mu.Lock()
	if w.closed || w.left <= 0 {
		w.mu.Unlock()
		return kernel.Launch(ctx, w.spec, w.opts)
	}
	if w.pool == nil {
		p, err := kernel.NewPool(ctx, w.spec, max(1, min(w.jobs, w.left)), robotapi.WarmCode, w.opts)
		if err != nil {
			w.closed = true
			w.mu.Unlock()
			return kernel.Launch(ctx, w.spec, w.opts)
		}
		w.pool = p
	}
	p := w.pool
	w.left--
	last := w.left <= 0
	if last {
		w.closed = true
	}
	w.mu.Unlock()
	k, err := p.Take(ctx)
	if last {
		go p.Close()
	}
	return k, err
}

func (w *warmKernels) close() {
	w.mu.Lock()
	p := w.pool
	w.closed = true
	w.mu.Unlock()
	if p != nil {
		p.Close()
	}
}

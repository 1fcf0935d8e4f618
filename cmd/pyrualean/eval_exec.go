package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/llm"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/suite"
)

// evalExec runs one episode in this process: play's setup and run, with the suite's shared parts:
// warm kernels, the robot's API reference fetched once, endpoint limits, one embedded model server
// per model.
type evalExec struct {
	logger    *slog.Logger
	endpoints *suite.Endpoints
	kernels   *warmKernels // nil: every episode boots a cold kernel

	mu      sync.Mutex
	servers map[string]*llm.Server
	refs    map[[3]string]*reference
}

func (x *evalExec) Execute(ctx context.Context, j suite.Job) suite.Outcome {
	s, err := parsePlay(playArgs(j.Episode, j.Dir), io.Discard, time.Now())
	if err != nil {
		return suite.Outcome{Status: agent.StatusBootError, Err: err}
	}
	if j.Runtime == "replay" && j.Arm == agent.ArmTools {
		twin := j.TwinDir()
		if row, err := agent.LoadRun(twin); err != nil || suite.Retryable(row.Status) {
			return suite.Outcome{Status: agent.StatusInterrupted, Err: fmt.Errorf("its cells twin %s has not finished", twin)}
		}
		if s.actions, err = toolActions(twin); err != nil {
			return suite.Outcome{Status: agent.StatusError, Err: err}
		}
		s.episode.Arm = agent.ArmTools
	}
	s.episode.Logger, s.openai.Logger, s.cli.Logger, s.local.Logger = x.logger, x.logger, x.logger, x.logger
	s.episode.References = x.reference
	s.openai.HTTPClient = x.endpoints.Client()
	if x.kernels != nil && j.Robot == robotapi.DefaultRobot && s.episode.CUDADevice == "" {
		s.episode.Kernels = x.kernels
	}
	if s.runtime == "local" {
		srv, err := x.server(ctx, s.local)
		if err != nil {
			return suite.Outcome{Status: agent.StatusBootError, Err: fmt.Errorf("local model: %w", err)}
		}
		// The shared server stands in for play's own: the episode talks to it as an openai one.
		s.runtime = "openai"
		s.openai.BaseURL, s.openai.Model, s.openai.APIKey, s.openai.TextOnly = srv.BaseURL, srv.Model, "local", true
		s.episode.Model = srv.Model
	}
	res, err := playEpisode(ctx, s)
	if res == nil {
		return suite.Outcome{Status: agent.StatusBootError, Err: err}
	}
	out := suite.Outcome{Status: res.Status, Success: res.EnvironmentSuccess, Err: err, WallS: res.PolicyWallS,
		InTok: res.Generation.InputTokens, LLMCalls: res.Generation.Turns}
	if res.CostUSD != nil {
		out.CostUSD = *res.CostUSD
	}
	return out
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

// server starts (once per model) the embedded llama.cpp server every local episode shares, so its
// prompt cache serves the common prefix of all of them.
func (x *evalExec) server(ctx context.Context, o llm.Options) (*llm.Server, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if srv, ok := x.servers[o.Model]; ok {
		return srv, nil
	}
	srv, err := llm.Start(context.WithoutCancel(ctx), o)
	if err != nil {
		return nil, err
	}
	if x.servers == nil {
		x.servers = map[string]*llm.Server{}
	}
	x.servers[o.Model] = srv
	return srv, nil
}

func (x *evalExec) close() {
	x.mu.Lock()
	for _, srv := range x.servers {
		srv.Stop()
	}
	x.mu.Unlock()
	if x.kernels != nil {
		x.kernels.close()
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

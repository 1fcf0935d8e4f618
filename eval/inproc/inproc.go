// Package inproc runs an evaluation's episodes in this process: the Executor eval's engines call (the
// local pool, and `pyrualean episode` on a Ray node), Plan (a matrix checked and expanded as eval's CLI
// does) and Run, which runs a suite from Go code without the CLI:
//
//	m := eval.Matrix{Rows: []eval.Row{{Tasks: "stack_blocks", Seeds: "0-4", Arms: []string{"cells", "tools"},
//		Runtime: "openai", Models: []string{"gpt-x"}, Settings: map[string]string{"base-url": url}}}}
//	man, res, err := inproc.Run(ctx, "runs/my-suite", m, inproc.Options{Jobs: 2})
//
// Running the same call again resumes, as `pyrualean eval` does.
package inproc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runs"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// Options say how an Executor runs episodes. The zero value runs them one at a time, with warm kernels
// (unsealed tabletop episodes) and forked robot servers (sealed ones).
type Options struct {
	Logger *slog.Logger
	// Jobs is how many episodes act at once (0: no limit of the Executor's own; Run: 1). BootAhead more
	// may boot meanwhile (kernel, robot, setup cell) and wait for a slot.
	Jobs, BootAhead int
	// MaxConnections bounds requests in flight per LLM endpoint over all episodes (0: no limit).
	MaxConnections int
	// NoWarmKernels boots every kernel cold; NoFork execs every robot server.
	NoWarmKernels, NoFork bool
	// ForkerSocket is a running forker's socket to fork robot servers from (robotserver.DialForker:
	// a Ray node's, kept by the node's host) instead of starting one.
	ForkerSocket string
	// Node names the cluster node the episodes run on (a Ray node's `pyrualean episode`): result.json's
	// host.node.
	Node string
	// ReferenceDir keeps the robot's API reference on disk across processes (robotapi.CachedReference):
	// a node's `pyrualean episode` runs one episode per process.
	ReferenceDir string
	// Retries (Run) are further attempts of an interrupted, boot_error or planner_error episode (0: 2;
	// <0: none).
	Retries int
	// Events (Run) receives the suite's events (eval.NewLines, NewJSON, NewProgress are views).
	Events func(eval.Event)
}

// New returns an Executor for the suite in suiteDir.
func New(suiteDir string, o Options) *Executor {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	abs, err := filepath.Abs(suiteDir)
	if err != nil {
		abs = suiteDir
	}
	x := &Executor{logger: o.Logger, endpoints: &eval.Endpoints{Max: o.MaxConnections}, suiteDir: abs, node: o.Node, refDir: o.ReferenceDir}
	if o.Jobs > 0 && o.BootAhead > 0 {
		x.acting = make(chan struct{}, o.Jobs)
	}
	if !o.NoWarmKernels {
		if spec, err := kernel.FindSpec("pyrualean"); err == nil {
			x.kernels = &warmKernels{spec: spec, jobs: max(o.Jobs, 1),
				opts: kernel.LaunchOptions{Dir: abs, Env: map[string]string{eval.EvalEnv: abs}, Logger: o.Logger}}
		}
	}
	if !o.NoFork {
		x.forker = &lazyForker{log: o.Logger, sock: o.ForkerSocket}
	}
	return x
}

// Expect tells the Executor which episodes this run will run (eval.Runner's OnPlan): the warm-kernel
// pool warms no more kernels than they take.
func (x *Executor) Expect(jobs []eval.Job) {
	if x.kernels != nil {
		x.kernels.expect(poolTakes(jobs))
	}
}

// Executor runs one episode in this process (eval.Executor): play's setup, with the suite's shared parts:
// one started runtime per row and model (so local episodes share one llama.cpp server and its prompt
// cache), warm kernels, sealed episodes' robot servers forked from one forker, the robot's API reference
// fetched once, and one HTTP transport with per-endpoint limits. Close it when the suite is done.
type Executor struct {
	logger    *slog.Logger
	endpoints *eval.Endpoints
	kernels   *warmKernels   // nil: every episode boots a cold kernel
	releases  sync.WaitGroup // episodes' kernel shutdowns, off the episodes' critical path
	suiteDir  string         // absolute; marks every kernel (eval.EvalEnv) so a resumed run finds orphans
	// acting holds a token per episode past boot (Jobs of them); nil: no limit. The engine runs more
	// workers than that (BootAhead), so the next episodes boot while these act.
	acting chan struct{}
	forker *lazyForker // sealed episodes' robot servers are forked from it; nil: exec'd
	node   string      // the cluster node, for result.json
	refDir string      // the API reference's on-disk cache, if any

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

func (x *Executor) Execute(ctx context.Context, j eval.Job) eval.Outcome {
	s := j.Spec
	s.Out = j.Dir
	if s.Policy.Runtime == "replay" { // the reference solution in this machine's repository
		root, err := robotapi.Root()
		if err != nil {
			return eval.Outcome{Status: agent.StatusBootError, Err: err}
		}
		s.Policy.From = filepath.Join(root, j.Solution)
	}
	host := agent.Host{Logger: x.logger, References: x.reference, Node: x.node, KernelEnv: map[string]string{eval.EvalEnv: x.suiteDir},
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
		if res, rerr := agent.ReadResult(j.Dir); rerr == nil {
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
func (x *Executor) runtimeFor(ctx context.Context, j eval.Job, s spec.Episode) (runtimes.Runtime, eval.Outcome) {
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
func (x *Executor) shared(ctx context.Context, j eval.Job, s spec.Episode) (runtimes.Runtime, error) {
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
func (x *Executor) reference(ctx context.Context, robot, primitives, format string) (string, error) {
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
		if x.refDir != "" {
			r.text, r.err = robotapi.CachedReference(ctx, x.refDir, robot, primitives, format)
		} else {
			r.text, r.err = robotapi.Reference(ctx, robot, primitives, format)
		}
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

// Close stops the shared runtimes, the warm kernels and the forker, once every episode's kernel and robot
// server are shut down.
func (x *Executor) Close() {
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

// toolActions turns a cells episode's primitive calls (calls.jsonl) into tools-arm actions: the
// reference solution lowered to the tool calls it made, for the same task and seed.
func toolActions(cellsDir string) ([]runtimes.Action, error) {
	f, err := os.Open(filepath.Join(cellsDir, "calls.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var acts []runtimes.Action
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var c struct {
			Tool   string          `json:"tool"`
			Kwargs json.RawMessage `json:"kwargs"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil || c.Tool == "" {
			continue
		}
		if len(c.Kwargs) == 0 || string(c.Kwargs) == "null" {
			c.Kwargs = json.RawMessage("{}")
		}
		acts = append(acts, runtimes.Action{Tool: c.Tool, Args: c.Kwargs})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(acts) == 0 {
		return nil, fmt.Errorf("%s: no primitive calls", filepath.Join(cellsDir, "calls.jsonl"))
	}
	return acts, nil
}

// poolTakes counts the jobs that will take a warm kernel.
func poolTakes(jobs []eval.Job) int {
	n := 0
	for _, j := range jobs {
		if takesWarmKernel(j.Spec) {
			n++
		}
	}
	return n
}

// takesWarmKernel: the pool's kernels carry the embedded robot in-process on the default device, so
// only unsealed tabletop episodes can use one (a sealed kernel starts in its sandbox).
func takesWarmKernel(s spec.Episode) bool {
	return s.Robot == robotapi.DefaultRobot && s.CUDADevice == "" && s.Sealed == spec.SealOff
}

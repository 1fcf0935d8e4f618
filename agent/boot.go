package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/pylit"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// errBootInterrupted marks a boot cut short by the caller's context: status interrupted.
var errBootInterrupted = errors.New("interrupted while booting")

// bootFail records a boot_error (or interrupted) and releases what was started.
func (b booter) bootFail(err error) error {
	e := b.e
	status, typ := StatusBootError, "BootError"
	if errors.Is(err, errBootInterrupted) {
		status, typ = StatusInterrupted, "Interrupted"
	}
	e.log.Error("episode boot failed", "err", err)
	e.book.update(func(r *Result) {
		r.Status = status
		r.Error = &ErrorField{Type: typ, Message: err.Error()}
		f := false // as the original: an episode that never ran failed
		r.EnvironmentSuccess = &f
		r.FinishedAt = time.Now().UTC().Format(time.RFC3339)
		r.TotalWallS = Round(time.Since(e.created).Seconds(), 3)
		r.PID = 0
	})
	_ = e.book.save()
	if e.trace != nil {
		_ = e.book.setMeta(func(m *notebooks.EpisodeMeta) { m.Status, m.Error = status, err.Error() })
		_ = e.trace.Close()
	}
	if e.kern != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = e.kern.Shutdown(sctx)
		cancel()
	}
	e.served.close(e.log)
	e.files.close()
	return fmt.Errorf("%w: %w", ErrBoot, err)
}

// minSetupTimeout bounds the setup cell from below: loading a simulator on a busy machine can take
// longer than a short per-cell timeout meant for the agent's cells.
const minSetupTimeout = 120 * time.Second

// kernelSpecName is the kernelspec episodes run in (scripts/setup.sh installs it).
const kernelSpecName = "pyrualean"

// boot launches the kernel (and, sealed, the robot server), opens the trace, runs the setup cell,
// reads the episode card and assembles the prompt.
func (b booter) boot(ctx context.Context) error {
	e := b.e
	s := e.spec
	refs := fetchReferences(ctx, e.host.References, s.Robot, s.Primitives) // runs while the kernel boots
	ks, err := e.boots.launch(ctx)
	if err != nil {
		return err
	}
	if err := e.boots.awaitRobot(ctx); err != nil {
		return err
	}
	if err := e.boots.openTrace(ctx, ks); err != nil {
		return err
	}
	cardJSON, err := e.boots.setup(ctx)
	if err != nil {
		return err
	}
	if e.served != nil {
		e.judge = serverJudge{srv: e.served.srv, refused: func(r []string) { noteRefused(e.book, r) }}
		e.exec.tellSpans(e.served.tellSpan(e.log))
	} else {
		e.judge = kernelJudge{kern: e.kern}
	}
	return e.brief.build(ctx, e, cardJSON, refs.wait())
}

// launch starts the episode's kernel (in its sandbox when sealed; a warm one from the host's pool when
// it has one and the robot lives in the kernel) and returns its kernelspec.
func (b booter) launch(ctx context.Context) (kernel.Spec, error) {
	e := b.e
	s := e.spec
	ks, err := kernel.FindSpec(kernelSpecName)
	if err != nil {
		return ks, fmt.Errorf("kernelspec %s: %w", kernelSpecName, err)
	}
	env := map[string]string{"PYRUALEAN_WORKSPACE": e.files.workspace}
	if s.CUDADevice != "" {
		env["CUDA_VISIBLE_DEVICES"] = s.CUDADevice
	}
	maps.Copy(env, e.host.KernelEnv)
	e.book.update(func(r *Result) { r.Host.Python = robotapi.Python(e.host.Root) })
	launch := kernel.LaunchOptions{Dir: e.files.workspace, Env: env, Logger: e.log}
	if ks, launch, err = e.boots.serve(ctx, ks, launch); err != nil { // sealed.go; unchanged when sealed off
		return ks, err
	}
	if e.host.Kernels != nil && e.served == nil {
		// A warmed kernel started elsewhere: give it this episode's folder and environment.
		if e.kern, err = e.host.Kernels.Take(ctx); err == nil {
			err = execOK(ctx, e.kern, "import os; os.chdir("+pylit.Str(e.files.workspace)+"); os.environ['PYRUALEAN_WORKSPACE'] = "+
				pylit.Str(e.files.workspace), kernel.ExecuteOptions{Silent: true})
		}
	} else {
		e.kern, err = kernel.Launch(ctx, ks, launch)
	}
	if err != nil {
		return ks, fmt.Errorf("launch kernel: %w", err)
	}
	e.served.watchQuota(e)
	return ks, nil
}

// openTrace starts trace.ipynb with the kernel's language info and the episode's metadata.
func (b booter) openTrace(ctx context.Context, ks kernel.Spec) error {
	e := b.e
	var ki kernelInfo
	if raw, err := e.kern.Client().KernelInfo(ctx); err == nil {
		ki = parseKernelInfo(raw)
	} else {
		e.log.Warn("kernel_info", "err", err)
	}
	meta := e.boots.traceMeta(ki)
	if meta.Extra == nil {
		meta.Extra = map[string]any{}
	}
	meta.Extra["sealed"] = e.book.result().Sealed
	tr, err := notebooks.NewTrace(e.files.path("trace.ipynb"), notebooks.TraceMeta{
		KernelName: ks.Name, KernelDisplayName: ks.DisplayName, LanguageInfo: ki.LanguageInfo, Episode: meta.Map(),
	})
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	e.trace = tr
	e.book.mu.Lock()
	e.book.trace, e.book.meta = tr, notebooks.ParseEpisodeMeta(tr.Snapshot().Metadata) // with the build's versions
	e.book.mu.Unlock()
	return nil
}

// setup runs the setup cell (make() creates robo), records the package versions it reports, and
// returns the episode card: the robot server's when sealed, not the kernel's word.
func (b booter) setup(ctx context.Context) ([]byte, error) {
	e := b.e
	code := setupCode(e.spec, e.files.workspace)
	res, err := e.kern.Client().Execute(ctx, code, kernel.ExecuteOptions{
		Metadata:        map[string]any{notebooks.MetaKey: notebooks.CellMeta{Author: notebooks.AuthorSetup}.Map()},
		UserExpressions: map[string]string{"card": "__import__('pyrualean_robot').episode_card()", "versions": versionsExpr},
		Timeout:         max(e.spec.CellTimeout(), minSetupTimeout),
	})
	if err != nil {
		return nil, fmt.Errorf("setup cell: %w", err)
	}
	_ = e.trace.AddCode(code, notebooks.CodeRun{Outputs: res.Outputs, ExecutionCount: res.ExecutionCount, Timing: res.Timing},
		notebooks.CellMeta{Author: notebooks.AuthorSetup}.Map())
	if res.Status != "ok" {
		msg := res.Status
		if res.Error != nil {
			msg = res.Error.Ename + ": " + res.Error.Evalue // the full traceback is in the trace
		}
		return nil, fmt.Errorf("setup cell failed: %s", msg)
	}
	if vj, err := robotapi.UserExpressionJSON(res.UserExpressions, "versions"); err == nil {
		var v map[string]any
		if json.Unmarshal(vj, &v) == nil && len(v) > 0 {
			_ = e.book.setMeta(func(m *notebooks.EpisodeMeta) {
				if m.Versions == nil {
					m.Versions = map[string]any{}
				}
				maps.Copy(m.Versions, v)
			})
		}
	} else {
		e.log.Warn("package versions", "err", err)
	}
	if e.served != nil {
		return e.served.srv.Card(ctx)
	}
	return robotapi.UserExpressionJSON(res.UserExpressions, "card")
}

// references holds the robot's API reference in both formats, fetched in the background.
type references struct {
	done chan struct{}
	text map[string]string
	err  map[string]error
}

// fetchReferences fetches both formats with fetch (robotapi.Reference when nil; a suite caches it).
func fetchReferences(ctx context.Context, fetch func(ctx context.Context, robot, primitives, format string) (string, error), robot, primitives string) *references {
	if fetch == nil {
		fetch = robotapi.Reference
	}
	r := &references{done: make(chan struct{}), text: map[string]string{}, err: map[string]error{}}
	go func() {
		defer close(r.done)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, f := range []string{robotapi.FormatText, robotapi.FormatTools} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t, err := fetch(ctx, robot, primitives, f)
				mu.Lock()
				r.text[f], r.err[f] = t, err
				mu.Unlock()
			}()
		}
		wg.Wait()
	}()
	return r
}

func (r *references) wait() *references {
	<-r.done
	return r
}

// setupCode is robotapi's one-line first cell that makes the robot, plus the names the contract
// promises the agent (np, math, time).
func setupCode(s spec.Episode, workspace string) string {
	return robotapi.SetupCode(robotapi.SetupOptions{
		Robot: s.Robot, Task: s.Task, Seed: s.Seed, Workspace: workspace, Images: s.Images,
		Primitives: s.Primitives, Suite: s.Suite, MaxEnvSteps: s.MaxEnvSteps, Options: s.RobotOptions,
	}) + "\nimport math, time\nimport numpy as np\nlog = print"
}

// versionsExpr reports, as application/json, the versions of the kernel-side packages an episode's
// outcome depends on (evaluated with the setup cell, for metadata.pyrualean.versions).
const versionsExpr = "__import__('IPython.display', fromlist=['JSON']).JSON({(d.metadata['Name'] or '').lower(): d.version" +
	" for d in __import__('importlib.metadata', fromlist=['distributions']).distributions()" +
	" if (d.metadata['Name'] or '').lower() in ('ipykernel', 'jupyter-client', 'pyzmq', 'mujoco', 'numpy', 'pyrualean-robot')})"

// kernelInfo is what the trace keeps of kernel_info_reply.
type kernelInfo struct {
	LanguageInfo          map[string]any `json:"language_info"`
	Implementation        string         `json:"implementation"`
	ImplementationVersion string         `json:"implementation_version"`
	ProtocolVersion       string         `json:"protocol_version"`
}

// parseKernelInfo decodes kernel_info_reply content keeping numbers as json.Number, so that
// language_info (e.g. codemirror_mode.version) is written back exactly as the kernel sent it.
func parseKernelInfo(raw []byte) kernelInfo {
	var ki kernelInfo
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&ki); err != nil {
		return kernelInfo{}
	}
	return ki
}

// traceMeta is the trace's metadata.pyrualean at boot: what runs, under which budgets, with which
// versions. success stays null until the environment says otherwise.
func (b booter) traceMeta(ki kernelInfo) notebooks.EpisodeMeta {
	e := b.e
	s := e.spec
	versions := map[string]any{}
	if v, ok := ki.LanguageInfo["version"].(string); ok && v != "" {
		versions["python"] = v
	}
	if ki.Implementation != "" && ki.ImplementationVersion != "" {
		versions[ki.Implementation] = ki.ImplementationVersion
	}
	if ki.ProtocolVersion != "" {
		versions["jupyter_protocol"] = ki.ProtocolVersion
	}
	return notebooks.EpisodeMeta{
		Robot: s.Robot, Suite: s.Suite, Task: s.Task, Seed: s.Seed, Arm: s.Arm, Model: s.Policy.Model,
		Runtime: s.Policy.Runtime, Images: s.Images, Feedback: s.Feedback, Primitives: s.Primitives,
		MaxTurns: s.MaxCalls, BudgetS: s.BudgetS, Status: StatusRunning,
		Budgets: budgetsMeta(s, s.MaxEnvSteps), Versions: versions,
	}
}

// budgetsMeta is metadata.pyrualean.budgets; nil stands for unlimited.
func budgetsMeta(s spec.Episode, maxEnvSteps int) *notebooks.EpisodeBudgets {
	b := &notebooks.EpisodeBudgets{MaxEnvSteps: maxEnvSteps, CellTimeoutS: s.CellTimeoutS}
	if s.MaxCalls > 0 {
		mt := s.MaxCalls
		b.MaxTurns = &mt
	}
	if s.BudgetS > 0 {
		bs := s.BudgetS
		b.BudgetS = &bs
	}
	return b
}

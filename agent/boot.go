package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/pylit"
	"github.com/pyrualean/pyrualean/robotapi"
)

// errBootInterrupted marks a boot cut short by the caller's context: status interrupted.
var errBootInterrupted = errors.New("interrupted while booting")

// bootFail records a boot_error (or interrupted) and releases what was started.
func (e *Episode) bootFail(err error) error {
	status, typ := StatusBootError, "BootError"
	if errors.Is(err, errBootInterrupted) {
		status, typ = StatusInterrupted, "Interrupted"
	}
	e.log.Error("episode boot failed", "err", err)
	e.mu.Lock()
	e.res.Status = status
	e.res.Error = &ErrorField{Type: typ, Message: err.Error()}
	e.res.FinishedAt = time.Now().UTC().Format(time.RFC3339)
	e.res.TotalWallS = round3(time.Since(e.createdAt).Seconds())
	e.res.PID = 0
	e.mu.Unlock()
	_ = e.saveResult()
	if e.trace != nil {
		_ = e.updateTraceMeta(func(m *notebooks.EpisodeMeta) { m.Status, m.Error = status, err.Error() })
		_ = e.trace.Close()
	}
	if e.kern != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = e.kern.Shutdown(sctx)
		cancel()
	}
	e.closeServed()
	if e.turnsW != nil {
		e.turnsW.Close()
	}
	if e.callsW != nil {
		e.callsW.Close()
	}
	return fmt.Errorf("%w: %w", ErrBoot, err)
}

// minSetupTimeout bounds the setup cell from below: loading a simulator on a busy machine can take
// longer than a short per-cell timeout meant for the agent's cells.
const minSetupTimeout = 120 * time.Second

// boot launches the kernel, runs the setup cell, reads the episode card and assembles the prompt.
func (e *Episode) boot(ctx context.Context) error {
	c := e.cfg
	e.refs = fetchReferences(ctx, c.References, c.Robot, c.Primitives) // runs while the kernel boots
	spec, err := kernel.FindSpec(c.KernelSpec)
	if err != nil {
		return fmt.Errorf("kernelspec %s: %w", c.KernelSpec, err)
	}
	env := map[string]string{"PYRUALEAN_WORKSPACE": e.workspace}
	if c.CUDADevice != "" {
		env["CUDA_VISIBLE_DEVICES"] = c.CUDADevice
	}
	maps.Copy(env, c.KernelEnv)
	launch := kernel.LaunchOptions{Dir: e.workspace, Env: env, Logger: e.log}
	if spec, launch, err = e.serve(ctx, spec, launch); err != nil { // sealed.go; unchanged when sealed off
		return err
	}
	if c.Kernels != nil && e.served == nil {
		// A warmed kernel started elsewhere (a suite's pool; only for the in-kernel robot, a sealed
		// kernel is launched in its sandbox): give it this episode's folder and environment.
		if e.kern, err = c.Kernels.Take(ctx); err == nil {
			err = execOK(ctx, e.kern, "import os; os.chdir("+pylit.Str(e.workspace)+"); os.environ['PYRUALEAN_WORKSPACE'] = "+pylit.Str(e.workspace))
		}
	} else {
		e.kern, err = kernel.Launch(ctx, spec, launch)
	}
	if err != nil {
		return fmt.Errorf("launch kernel: %w", err)
	}
	if err := e.awaitRobot(ctx); err != nil {
		return err
	}
	var ki kernelInfo
	if raw, err := e.kern.Client().KernelInfo(ctx); err == nil {
		ki = parseKernelInfo(raw)
	} else {
		e.log.Warn("kernel_info", "err", err)
	}
	e.trace, err = notebooks.NewTrace(filepath.Join(c.Out, "trace.ipynb"), notebooks.TraceMeta{
		KernelName: spec.Name, KernelDisplayName: spec.DisplayName, LanguageInfo: ki.LanguageInfo,
		Episode: e.traceMeta(ki).Map(),
	})
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	e.mu.Lock()
	e.meta = notebooks.ParseEpisodeMeta(e.trace.Snapshot().Metadata) // with the build's versions
	sealed := e.res.Sealed
	e.mu.Unlock()
	_ = e.updateTraceMeta(func(m *notebooks.EpisodeMeta) {
		if m.Extra == nil {
			m.Extra = map[string]any{}
		}
		m.Extra["sealed"] = sealed
	})
	setup := setupCode(c, e.workspace)
	res, err := e.kern.Client().Execute(ctx, setup, kernel.ExecuteOptions{
		Metadata:        map[string]any{notebooks.MetaKey: notebooks.CellMeta{Author: notebooks.AuthorSetup}.Map()},
		UserExpressions: map[string]string{"card": "__import__('pyrualean_robot').episode_card()", "versions": versionsExpr},
		Timeout:         max(c.CellTimeout, minSetupTimeout),
	})
	if err != nil {
		return fmt.Errorf("setup cell: %w", err)
	}
	_ = e.trace.AddCode(setup, notebooks.CodeRun{Outputs: res.Outputs, ExecutionCount: res.ExecutionCount, Timing: res.Timing},
		notebooks.CellMeta{Author: notebooks.AuthorSetup}.Map())
	if res.Status != "ok" {
		msg := res.Status
		if res.Error != nil {
			msg = res.Error.Ename + ": " + res.Error.Evalue // the full traceback is in the trace
		}
		return fmt.Errorf("setup cell failed: %s", msg)
	}
	if vj, err := robotapi.UserExpressionJSON(res.UserExpressions, "versions"); err == nil {
		var v map[string]any
		if json.Unmarshal(vj, &v) == nil && len(v) > 0 {
			e.updateTraceMeta(func(m *notebooks.EpisodeMeta) {
				if m.Versions == nil {
					m.Versions = map[string]any{}
				}
				maps.Copy(m.Versions, v)
			})
		}
	} else {
		e.log.Warn("package versions", "err", err)
	}
	cardJSON, err := robotapi.UserExpressionJSON(res.UserExpressions, "card")
	if e.served != nil { // the robot server's card, not the kernel's word
		cardJSON, err = e.served.srv.Card(ctx)
	}
	if err != nil {
		return err
	}
	e.card, err = parseCard(cardJSON)
	if err != nil {
		return err
	}
	if e.card.MaxEnvSteps == 0 {
		e.card.MaxEnvSteps = c.MaxEnvSteps
	}
	e.mu.Lock()
	e.res.Perception = e.card.Perception
	e.mu.Unlock()
	if err := e.writeCard(cardJSON); err != nil {
		return err
	}
	return e.buildPrompt(ctx)
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
func setupCode(c EpisodeConfig, workspace string) string {
	return robotapi.SetupCode(robotapi.SetupOptions{
		Robot: c.Robot, Task: c.Task, Seed: c.Seed, Workspace: workspace, Images: c.Images,
		Primitives: c.Primitives, Suite: c.Suite, MaxEnvSteps: c.MaxEnvSteps,
		VLAEndpoint: c.VLAEndpoint, EnvEndpoint: c.EnvEndpoint, Sam3Endpoint: c.SAM3Endpoint, LiberoType: c.LiberoType,
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
func (e *Episode) traceMeta(ki kernelInfo) notebooks.EpisodeMeta {
	c := e.cfg
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
		Robot: c.Robot, Suite: c.Suite, Task: c.Task, Seed: c.Seed, Arm: c.Arm, Model: c.Model,
		Runtime: c.Runtime, Images: c.Images, Feedback: c.Feedback, Primitives: c.Primitives,
		MaxTurns: c.MaxTurns, BudgetS: c.Budget.Seconds(), Status: StatusRunning,
		Budgets: e.budgetsMeta(c.MaxEnvSteps), Versions: versions,
	}
}

// budgetsMeta is metadata.pyrualean.budgets; nil stands for unlimited.
func (e *Episode) budgetsMeta(maxEnvSteps int) *notebooks.EpisodeBudgets {
	c := e.cfg
	b := &notebooks.EpisodeBudgets{MaxEnvSteps: maxEnvSteps, CellTimeoutS: c.CellTimeout.Seconds()}
	if c.MaxTurns > 0 {
		mt := c.MaxTurns
		b.MaxTurns = &mt
	}
	if c.Budget > 0 {
		bs := c.Budget.Seconds()
		b.BudgetS = &bs
	}
	return b
}

// execOK runs code outside the history and fails unless it ran cleanly.
func execOK(ctx context.Context, k *kernel.Kernel, code string) error {
	res, err := k.Client().Execute(ctx, code, kernel.ExecuteOptions{NoHistory: true})
	switch {
	case err != nil:
		return err
	case res.Error != nil:
		return fmt.Errorf("%s: %s", res.Error.Ename, res.Error.Evalue)
	case res.Status != "ok":
		return fmt.Errorf("status %s", res.Status)
	}
	return nil
}

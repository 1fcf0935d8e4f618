package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
)

// EpisodeStatus is a live episode's state, for the gateway's /api/episodes (and JupyterLab's
// episode bar, through it).
type EpisodeStatus struct {
	// State is running, paused or over; Phase what the agent does now: thinking (a model call or,
	// for a CLI runtime, anything between cells), cell (the kernel runs its cell), waiting (paused
	// before its next decision), held (a decided cell waits at the pause) or done.
	State        string    `json:"state"`
	Phase        string    `json:"phase"`
	Running      *CellInfo `json:"running_cell,omitempty"`
	Held         *CellInfo `json:"held_cell,omitempty"`
	HumanRunning int       `json:"human_cells_running"`
	HumanCalls   int       `json:"human_calls"`
	HumanSteps   int       `json:"human_env_steps"`
	LingerUntil  string    `json:"linger_until,omitempty"` // the kernel is kept after the end until then
	// Turn is the agent's call under way: the one it decides, holds at the pause or runs (Turns are
	// the calls made).
	Turn int `json:"turn"`
	// The wall-clock budget (0: none), what is left of it and the time the agent was held by a
	// pause (not spent of the budget); PolicyS is the agent's own time so far.
	BudgetS     float64  `json:"budget_s"`
	BudgetLeftS *float64 `json:"budget_left_s,omitempty"`
	PausedS     float64  `json:"paused_s"`
	PolicyS     float64  `json:"policy_s"`

	ID          string   `json:"id"`
	RunDir      string   `json:"run_dir"`
	Robot       string   `json:"robot"`
	Task        string   `json:"task"`
	Seed        int      `json:"seed"`
	Arm         string   `json:"arm"`
	Model       string   `json:"model"`
	Runtime     string   `json:"runtime"`
	Status      string   `json:"status"`
	Paused      bool     `json:"paused"`
	Turns       int      `json:"turns"`
	MaxTurns    int      `json:"max_turns"`
	LLMCalls    int      `json:"llm_calls"`
	InputTokens int      `json:"input_tokens"`
	HumanCells  int      `json:"human_cells"`
	Success     *bool    `json:"environment_success"`
	ElapsedS    float64  `json:"elapsed_s"`
	LastTool    string   `json:"last_tool,omitempty"`
	Trace       string   `json:"trace"`
	KernelPID   int      `json:"kernel_pid"`
	Flags       []string `json:"sandbox_flags"`
}

// CellInfo names an agent cell for the live view: its turn, tool, code and execute_request msg_id.
type CellInfo struct {
	Turn  int    `json:"turn"`
	Tool  string `json:"tool"`
	Code  string `json:"code"`
	MsgID string `json:"msg_id,omitempty"`
}

// Finished says whether finish was called or the episode ended.
func (e *Episode) Finished() bool { return e.book.isFinished() }

// Success is the environment's verdict so far (nil: not known yet).
func (e *Episode) Success() *bool { return e.book.success() }

// Status reports the live episode.
func (e *Episode) Status() EpisodeStatus {
	paused, waiting, held := e.gate.view()
	running := e.exec.runningCell()
	l := e.book
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &l.res
	st := EpisodeStatus{
		ID: e.ID(), RunDir: e.spec.Out, Robot: e.spec.Robot, Task: r.Task, Seed: e.spec.Seed,
		Arm: e.spec.Arm, Model: r.Model, Runtime: r.Runtime, Status: r.Status, Paused: paused,
		Turns: l.calls, MaxTurns: e.spec.MaxCalls, LLMCalls: r.Generation.Turns, InputTokens: l.usage.InputTokens,
		HumanCells: r.HumanCells, Success: r.EnvironmentSuccess, ElapsedS: Round(time.Since(e.created).Seconds(), 3),
		LastTool: l.lastTool, Trace: e.files.path("trace.ipynb"), Flags: append([]string{}, r.Generation.SandboxFlags...),
		HumanRunning: e.people.runningCount(), HumanCalls: r.HumanCalls, HumanSteps: r.HumanEnvSteps,
	}
	if e.kern != nil {
		st.KernelPID = e.kern.Pid()
	}
	switch {
	case l.ended:
		st.State, st.Phase = "over", "done"
		if !l.linger.IsZero() {
			st.LingerUntil = l.linger.UTC().Format(time.RFC3339)
		}
		return st
	case paused:
		st.State = "paused"
	default:
		st.State = "running"
	}
	st.BudgetS = e.spec.BudgetS
	e.clock.fill(&st)
	st.Turn = l.calls + 1
	if e.spec.MaxCalls > 0 {
		st.Turn = min(st.Turn, e.spec.MaxCalls)
	}
	switch {
	case running != nil:
		st.Running, st.Phase = running, "cell"
		st.Turn = running.Turn
	case held != nil:
		if held.Turn == 0 {
			held.Turn = st.Turn
		}
		st.Held, st.Phase = held, "held"
	case waiting:
		st.Phase = "waiting"
	default:
		st.Phase = "thinking"
	}
	return st
}

// KeepKernel makes Finish leave the kernel (and a sealed episode's robot server) running, for people
// to work in after the end (play --serve-linger) until Close.
func (e *Episode) KeepKernel(until time.Time) {
	e.book.mu.Lock()
	e.book.linger = until
	e.book.mu.Unlock()
}

// Close shuts down what Finish kept (KeepKernel), and closes the trace and run folder kept open for
// people's cells after the end; without KeepKernel Finish already did.
func (e *Episode) Close(ctx context.Context) {
	e.people.close()
	e.shutdownKernel(ctx)
	e.people.after.Wait() // a cell after the end ends with the kernel; its record is the last
	_ = e.book.save()
	e.closeFiles()
}

// kept says the kernel outlives the episode for people (KeepKernel).
func (e *Episode) kept() bool {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	return !e.book.linger.IsZero()
}

// closeFiles saves the trace a last time and closes the run folder, once.
func (e *Episode) closeFiles() {
	e.filesOnce.Do(func() {
		_ = e.trace.Close()
		e.files.close()
	})
}

func (e *Episode) shutdownKernel(ctx context.Context) {
	e.closeOnce.Do(func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if err := e.kern.Shutdown(sctx); err != nil && !errors.Is(err, kernel.ErrShutdown) && !errors.Is(err, kernel.ErrKernelDied) {
			e.log.Warn("kernel shutdown", "err", err)
		}
		e.served.close(e.log)
	})
}

// Finish ends the episode: people's cells still running get a moment to end and be recorded, a last
// verdict settles what ran since the previous one (calls the agent's code made after its last cell),
// the status is derived (when status is ""), result.json and the trace's metadata are written, and the
// kernel is shut down. runErr is what ended the runtime, if anything.
func (e *Episode) Finish(ctx context.Context, status string, runErr error) (*Result, error) {
	if !e.book.beginEnd() {
		r := e.book.result()
		return &r, nil
	}
	e.gate.close()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	e.people.end(wctx)
	cancel()
	e.steps.settle(context.WithoutCancel(ctx))
	kernelDead := e.kern != nil && isDone(e.kern.Done())
	e.book.update(func(r *Result) {
		r.PausedS, r.ModelQueuedS = Round(e.clock.pausedFor().Seconds(), 3), Round(e.clock.heldFor(holdModelQueue).Seconds(), 3)
	})
	r := e.book.close(status, runErr, kernelDead, e.clock.elapsed(), time.Since(e.created))
	var errs []error
	if err := e.book.setMeta(func(m *notebooks.EpisodeMeta) {
		m.Status, m.Success = r.Status, r.EnvironmentSuccess
		g := r.Generation
		m.Totals = &notebooks.EpisodeTotals{ToolTurns: r.ToolTurns, LLMCalls: g.Turns, EnvSteps: r.EnvSteps,
			InputTokens: g.InputTokens, CachedInputTokens: g.CachedInputTokens, OutputTokens: g.OutputTokens,
			ReasoningOutputTokens: g.ReasoningOutputTokens, TotalTokens: g.TotalTokens, PolicyWallS: r.PolicyWallS}
		if r.Error != nil {
			m.Error = r.Error.Message
		}
	}); err != nil {
		errs = append(errs, fmt.Errorf("trace: %w", err))
	}
	if err := e.book.save(); err != nil {
		errs = append(errs, fmt.Errorf("result.json: %w", err))
	}
	keep := e.kept()
	if !keep { // else people's cells after the end still go to the trace, until Close
		e.closeFiles()
	}
	switch {
	case keep: // --serve-linger: the kernel outlives the episode for a while (the linger ends it)
	case e.host.Release != nil:
		e.host.Release(func() { e.shutdownKernel(ctx) })
	default:
		e.shutdownKernel(ctx)
	}
	return &r, errors.Join(errs...)
}

// settle takes the episode's last verdict: what the robot did since the previous one is the agent's
// (code it left running, a cell cut short), and the task predicate's final word.
func (st stepper) settle(ctx context.Context) {
	e := st.e
	if e.judge == nil || (e.served == nil && isDone(e.kern.Done())) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := e.exec.acquire(ctx); err != nil {
		e.log.Warn("no final verdict: the kernel is still busy", "err", err)
		return
	}
	defer e.exec.release()
	share := e.steps.verdict(ctx, "", nil, owner{})
	e.book.absorb(share.report, e.brief.stateful)
}

func errorType(err error) string {
	switch {
	case errors.Is(err, kernel.ErrKernelDied):
		return "KernelDied"
	case errors.Is(err, ErrBudgetExceeded):
		return "Timeout"
	case errors.Is(err, ErrPlanner):
		return "PlannerError"
	case errors.Is(err, ErrNoToolCall):
		return "NoToolCall"
	case errors.Is(err, ErrKernelRestarted):
		return "KernelRestarted"
	}
	return "Error"
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

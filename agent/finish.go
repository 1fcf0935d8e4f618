package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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
func (e *Episode) Finished() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.finished
}

// Success is the environment's verdict so far (nil: not known yet).
func (e *Episode) Success() *bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.res.EnvironmentSuccess == nil {
		return nil
	}
	s := *e.res.EnvironmentSuccess
	return &s
}

// Status reports the live episode.
func (e *Episode) Status() EpisodeStatus {
	paused, waiting, held := e.gate.view()
	e.mu.Lock()
	defer e.mu.Unlock()
	st := EpisodeStatus{
		ID: filepath.Base(e.cfg.Out), RunDir: e.cfg.Out, Robot: e.cfg.Robot, Task: e.res.Task, Seed: e.cfg.Seed,
		Arm: e.cfg.Arm, Model: e.cfg.Model, Runtime: e.cfg.Runtime, Status: e.res.Status, Paused: paused,
		Turns: e.turns, MaxTurns: e.cfg.MaxTurns, LLMCalls: e.res.Generation.Turns, InputTokens: e.usage.InputTokens,
		HumanCells: e.res.HumanCells, Success: e.res.EnvironmentSuccess, ElapsedS: round3(time.Since(e.createdAt).Seconds()),
		LastTool: e.lastTool, Trace: filepath.Join(e.cfg.Out, "trace.ipynb"),
		Flags: append([]string{}, e.res.Generation.SandboxFlags...),
	}
	if e.kern != nil {
		st.KernelPID = e.kern.Pid()
	}
	st.HumanRunning, st.HumanCalls, st.HumanSteps = e.humansRunning, e.res.HumanCalls, e.res.HumanEnvSteps
	switch {
	case e.ended:
		st.State, st.Phase = "over", "done"
		if !e.lingerUntil.IsZero() {
			st.LingerUntil = e.lingerUntil.UTC().Format(time.RFC3339)
		}
	case paused:
		st.State = "paused"
	default:
		st.State = "running"
	}
	if !e.ended {
		switch {
		case e.running != nil:
			r := *e.running
			st.Running, st.Phase = &r, "cell"
		case held != nil:
			st.Held, st.Phase = held, "held"
		case waiting:
			st.Phase = "waiting"
		default:
			st.Phase = "thinking"
		}
	}
	return st
}

// KeepKernel makes Finish leave the kernel (and a sealed episode's robot server) running, for people
// to work in after the end (play --serve-linger) until Close.
func (e *Episode) KeepKernel(until time.Time) {
	e.mu.Lock()
	e.lingerUntil = until
	e.mu.Unlock()
}

// Close shuts down what Finish kept (KeepKernel); without KeepKernel Finish already did.
func (e *Episode) Close(ctx context.Context) {
	e.shutdownKernel(ctx)
}

func (e *Episode) shutdownKernel(ctx context.Context) {
	e.closeOnce.Do(func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if err := e.kern.Shutdown(sctx); err != nil && !errors.Is(err, kernel.ErrShutdown) && !errors.Is(err, kernel.ErrKernelDied) {
			e.log.Warn("kernel shutdown", "err", err)
		}
		e.closeServed()
	})
}

// Finish ends the episode: it derives the status (when status is ""), writes result.json and the
// trace's episode metadata, and shuts the kernel down. runErr is what ended the runtime, if anything.
func (e *Episode) Finish(ctx context.Context, status string, runErr error) (*Result, error) {
	e.mu.Lock()
	if e.ended {
		r := e.res
		e.mu.Unlock()
		return &r, nil
	}
	e.ended = true
	e.finished = true
	if status == "" {
		status = e.deriveStatusLocked(runErr)
	}
	e.res.Status = status
	if runErr != nil && (status != StatusCompleted || errors.Is(runErr, ErrPlanner)) {
		e.res.Error = &ErrorField{Type: errorType(runErr), Message: runErr.Error()}
	}
	if e.res.Reason == "" {
		e.res.Reason = e.reasonLocked(status, runErr)
	}
	e.res.Finish = e.finish
	e.res.PolicyWallS = round3(time.Since(e.policyStart).Seconds())
	e.res.TotalWallS = round3(time.Since(e.createdAt).Seconds())
	e.res.FinishedAt = time.Now().UTC().Format(time.RFC3339)
	e.res.PID = 0
	e.mu.Unlock()

	e.gate.close()
	// Let the human-cell watcher record what already ran, then stop it; give people's cells a moment
	// to be accounted (their reports need the kernel), then put what is left under the last one.
	if e.stopHumans != nil {
		e.stopHumans()
		<-e.humansDone
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = e.waitHumans(wctx)
		cancel()
		e.mu.Lock()
		e.accountingOver = true
		e.mu.Unlock()
		e.stopSettling()
		e.flushPending()
	}
	e.mu.Lock()
	r := e.res
	e.mu.Unlock()
	var errs []error
	if err := e.updateTraceMeta(func(m *notebooks.EpisodeMeta) {
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
	if err := e.saveResult(); err != nil {
		errs = append(errs, fmt.Errorf("result.json: %w", err))
	}
	_ = e.trace.Close()
	e.turnsW.Close()
	e.callsW.Close()
	e.mu.Lock()
	keep := !e.lingerUntil.IsZero()
	e.mu.Unlock()
	switch {
	case keep: // --serve-linger: the kernel outlives the episode for a while (the linger ends it)
	case e.cfg.Release != nil:
		e.cfg.Release(func() { e.shutdownKernel(ctx) })
	default:
		e.shutdownKernel(ctx)
	}
	return &r, errors.Join(errs...)
}

func (e *Episode) deriveStatusLocked(runErr error) string {
	success := e.res.EnvironmentSuccess != nil && *e.res.EnvironmentSuccess
	switch {
	case errors.Is(runErr, kernel.ErrKernelDied) || (e.kern != nil && isDone(e.kern.Done()) && e.finish == nil && !success):
		return StatusError
	case e.finish != nil && !(e.budgetOut && !success):
		return StatusCompleted
	case errors.Is(runErr, ErrBudgetExceeded):
		return StatusTimeout
	case errors.Is(runErr, context.Canceled):
		return StatusInterrupted
	case errors.Is(runErr, ErrPlanner) && success:
		// A planner that fails after the task predicate fired does not undo the success; the error
		// field says what else happened.
		return StatusCompleted
	case errors.Is(runErr, ErrPlanner):
		return StatusPlannerError
	case e.budgetOut && !success:
		return StatusCallBudget
	case runErr != nil && !errors.Is(runErr, ErrNoToolCall):
		return StatusError
	default:
		return StatusCompleted
	}
}

func (e *Episode) reasonLocked(status string, runErr error) string {
	switch {
	case e.finish != nil:
		return "finish:" + e.finish.Status
	case status == StatusCallBudget:
		return "call_budget"
	case status == StatusTimeout:
		return "timeout"
	case e.res.EnvironmentSuccess != nil && *e.res.EnvironmentSuccess:
		return "terminated"
	case errors.Is(runErr, ErrNoToolCall):
		return "no_finish"
	case runErr != nil:
		return "error"
	}
	return "no_finish"
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

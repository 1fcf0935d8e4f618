package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/robotapi"
)

// cellInput is one agent execute: what runs in the kernel and what the agent wrote.
type cellInput struct {
	code    string // what runs (a program's source with its entry call)
	source  string // what the agent wrote: the static check's input
	turn    int
	tool    string
	author  string
	args    map[string]any
	timeout time.Duration
}

// cellOutput is one agent execute, start to verdict.
type cellOutput struct {
	res      *kernel.ExecuteResult // nil when err
	partial  []notebooks.Output    // what it printed before it was cut short (err)
	elapsed  time.Duration
	share    agentShare // the agent's part of the verdict
	byPerson bool       // a person interrupted it (JupyterLab's stop button)
	err      error      // the cell did not finish: the kernel died or ctx ended
}

// step runs one agent cell: it waits for the kernel to be free (people's cells queue the same way), runs
// the code under its timeout, restarts a kernel stuck past the interrupt (the episode then ends), and
// takes the verdict once, keeping the agent's share. It writes calls.jsonl (attribution) and nothing
// else: calls.go turns the output into the trace, the ledger and feedback.
func (st stepper) step(ctx context.Context, in cellInput) cellOutput {
	e := st.e
	if err := e.exec.acquire(ctx); err != nil {
		return cellOutput{err: err}
	}
	defer e.exec.release()
	e.exec.setRunning(&CellInfo{Turn: in.turn, Tool: in.tool, Code: in.source})
	defer e.exec.setRunning(nil)
	sandboxed := true
	var out cellOutput
	opts := kernel.ExecuteOptions{
		Metadata:        map[string]any{notebooks.MetaKey: notebooks.CellMeta{Author: in.author, Turn: in.turn, Tool: in.tool, Sandbox: &sandboxed}.Map()},
		UserExpressions: map[string]string{"pyrualean": robotapi.CellReportExpr},
		Timeout:         in.timeout,
		OnSent:          e.exec.setMsgID,
	}
	start := time.Now()
	e.exec.begin(owner{turn: in.turn})
	res, err := e.kern.Client().Execute(ctx, in.code, opts)
	if err == nil {
		err = e.kern.Recover(ctx, res) // a cell stuck past its interrupt: restart (the episode then ends)
	}
	e.exec.end()
	out.elapsed, out.byPerson = time.Since(start), e.exec.wasInterrupted()
	if err != nil {
		// What it did to the robot before it was cut short is still the agent's: the episode's final
		// verdict (Finish) covers it.
		out.err = e.steps.cellFailure(ctx, err)
		if res != nil {
			out.partial = res.Outputs
		}
		return out
	}
	out.res = res
	var kr *cellReport
	if r, rerr := robotapi.DecodeCellReport(res.UserExpressions, "pyrualean"); rerr == nil {
		kr = r
	}
	if !res.Restarted {
		out.share = e.steps.verdict(ctx, in.source, kr, owner{turn: in.turn})
	}
	return out
}

// verdict asks the judge once and attributes its calls; a judge that cannot answer is logged and the
// cell gets no share (the next verdict covers what this one missed).
func (st stepper) verdict(ctx context.Context, code string, kernelReport *cellReport, own owner) agentShare {
	e := st.e
	r, err := e.judge.Judge(ctx, code, kernelReport)
	if err != nil {
		e.log.Warn("no verdict for a cell", "cell", own.turn, "person_cell", own.person, "err", err)
		return agentShare{}
	}
	return e.steps.attribute(r, own)
}

// silent runs code of the episode's own (not the agent's) outside the history, and fails unless it ran
// cleanly: the program arm's fresh namespace, a warm kernel's move to this run folder.
func (st stepper) silent(ctx context.Context, code string, timeout time.Duration) error {
	e := st.e
	if err := e.exec.acquire(ctx); err != nil {
		return err
	}
	defer e.exec.release()
	e.exec.begin(owner{})
	defer e.exec.end()
	return execOK(ctx, e.kern, code, kernel.ExecuteOptions{Silent: true, Timeout: timeout})
}

// execOK runs code and fails unless it ran cleanly.
func execOK(ctx context.Context, k *kernel.Kernel, code string, opts kernel.ExecuteOptions) error {
	opts.NoHistory = true
	res, err := k.Client().Execute(ctx, code, opts)
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

// cellFailure is the cause to record for a cell that did not finish: the context's cause when it ended
// (the kernel is interrupted, so the cell does not run on), the kernel's own error when it died.
func (st stepper) cellFailure(ctx context.Context, err error) error {
	e := st.e
	cause := err
	if ctx.Err() != nil {
		cause = context.Cause(ctx)
		if !isDone(e.kern.Done()) {
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = e.kern.Interrupt(ictx)
			cancel()
		}
	}
	if isDone(e.kern.Done()) && e.kern.Err() != nil && !errors.Is(cause, kernel.ErrKernelDied) {
		cause = fmt.Errorf("%w (%v)", e.kern.Err(), err)
	}
	return cause
}

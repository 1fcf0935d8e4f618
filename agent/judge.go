package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/robotserver"
)

// cellReport is what the robot saw since it was last asked (robotapi's one decoder).
type cellReport = robotapi.CellReport

// Judge answers, once per cell, what the robot did since it was last asked: the benchmark's success
// predicate, the env steps, the primitive ledger and the robot's state. It is asked while the
// dispatcher's slot is held, so nothing runs in the kernel meanwhile. A sealed episode's judge is the
// robot server (serverJudge: outside the kernel, where the agent cannot reach); with --sealed off the
// robot lives in the kernel and so does its judge (kernelJudge).
type Judge interface {
	// Judge returns the verdict. code is the agent's source for the static check ("" for a person's cell
	// or the final settle); kernelReport is the cell's own cell_report() from its user_expressions, if
	// it gave one (nil after an exception, or for a person's cell).
	Judge(ctx context.Context, code string, kernelReport *cellReport) (*cellReport, error)
}

// kernelJudge reads the verdict from the in-kernel robot's cell_report(): the cell's user expression,
// or, when the cell did not give one (IPython evaluates user_expressions only after a cell that
// succeeded), a silent execute (no hooks, history or execution count) that asks for it.
type kernelJudge struct{ kern *kernel.Kernel }

func (j kernelJudge) Judge(ctx context.Context, _ string, kernelReport *cellReport) (*cellReport, error) {
	if kernelReport != nil {
		return kernelReport, nil
	}
	if isDone(j.kern.Done()) {
		return nil, fmt.Errorf("no verdict: %w", kernel.ErrKernelDied)
	}
	res, err := j.kern.Client().Execute(ctx, "", kernel.ExecuteOptions{Silent: true,
		UserExpressions: map[string]string{"pyrualean": robotapi.CellReportExpr}, Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	return robotapi.DecodeCellReport(res.UserExpressions, "pyrualean")
}

// serverJudge asks the robot server (host.judge: its host report and the static check of the agent's
// source, in one call). The kernel's own flags (its runtime audit) are kept beside the server's;
// nothing else the kernel says is believed. RPCs the server refused (private names asked for over the
// raw socket) become flags and are passed to refused.
type serverJudge struct {
	srv     *robotserver.Server
	refused func([]string)
}

func (j serverJudge) Judge(ctx context.Context, code string, kernelReport *cellReport) (*cellReport, error) {
	raw, err := j.srv.Call(context.WithoutCancel(ctx), "host.judge", code)
	if err != nil {
		return nil, err
	}
	var r cellReport
	var extra struct {
		Refused []string `json:"refused"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("robot server verdict: %w", err)
	}
	_ = json.Unmarshal(raw, &extra)
	if kernelReport != nil {
		seen := map[string]bool{}
		for _, f := range r.SandboxFlags {
			seen[f] = true
		}
		for _, f := range kernelReport.SandboxFlags {
			if !seen[f] {
				r.SandboxFlags = append(r.SandboxFlags, f)
			}
		}
	}
	for _, x := range extra.Refused {
		r.SandboxFlags = append(r.SandboxFlags, "refused-by-robot-server:"+x)
	}
	if len(extra.Refused) > 0 && j.refused != nil {
		j.refused(extra.Refused)
	}
	return &r, nil
}

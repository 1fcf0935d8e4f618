package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
)

// agentCall is one call of the agent's that runs code in the kernel: python (cells arm), a primitive
// (tools arm) or run_program (program arm).
type agentCall struct {
	code   string // what runs in the kernel
	source string // what the agent wrote (a program's source): shown held, statically checked, saved
	tool   string
	author string
	args   map[string]any // the tool's arguments, kept in the trace for replay
	file   string         // run_program {"path"}: the agent's file (else the saved program_NN.py)
}

// call runs one agent call through the pipeline: the pause gate, the call budget, the cell step, then
// the record (trace cell, tool_turns.json, result.json) and the feedback the model reads.
func (cl caller) call(ctx context.Context, c agentCall) (ToolResult, error) {
	e := cl.e
	if res, handled, err := e.calls.hold(ctx, c); handled {
		return res, err
	}
	if ctx.Err() != nil { // never start a cell once the episode's context has ended
		return ToolResult{}, context.Cause(ctx)
	}
	adm := e.book.admitCall(c.tool, e.spec.MaxCalls)
	switch {
	case adm.over:
		return ToolResult{}, ErrEpisodeOver
	case adm.refusal != "":
		return e.calls.refuse(adm.refusal), nil
	case adm.budgetOut:
		if adm.firstOut {
			e.log.Info("call budget exhausted", "max_turns", e.spec.MaxCalls)
			_ = e.book.save()
		}
		return ToolResult{Text: errorText("call budget exhausted: the episode is over, call finish", "cell", adm.index), IsError: true, Finished: true}, nil
	}
	people := e.people.take()
	e.calls.saveSource(adm.index, c)
	timeout := e.spec.CellTimeout()
	if c.tool == ToolRunProgram {
		timeout = e.spec.ProgramTimeout()
	}
	out := e.steps.step(ctx, cellInput{code: c.code, source: c.source, turn: adm.index, tool: c.tool, author: c.author, args: c.args, timeout: timeout})
	if out.err != nil {
		e.calls.recordAborted(c, adm.index, out)
		return ToolResult{}, fmt.Errorf("cell %d: %w", adm.index, out.err)
	}
	return e.calls.respond(c, adm.index, timeout, out, people)
}

// hold waits at the pause gate. A call decided before the pause and held there is not run when people
// ran cells meanwhile (it would act on a stale plan): the model is told what they did and decides again.
func (cl caller) hold(ctx context.Context, c agentCall) (ToolResult, bool, error) {
	e := cl.e
	held, err := e.gate.toolWait(ctx, CellInfo{Tool: c.tool, Code: c.source})
	if errors.Is(err, errHeldDiscarded) {
		return ToolResult{Text: encodeFeedback(struct {
			NotRun bool   `json:"not_run"`
			Reason string `json:"reason"`
		}{true, "A person discarded this call while it was held by a pause, so it was NOT run: decide again."}), IsError: true}, true, nil
	}
	if err != nil {
		return ToolResult{}, true, err
	}
	if !held {
		return ToolResult{}, false, nil
	}
	if err := e.people.wait(ctx); err != nil {
		return ToolResult{}, true, err
	}
	notes := e.people.take()
	if len(notes) == 0 {
		return ToolResult{}, false, nil
	}
	e.book.event(e.log, "replan", "", TrimMiddle(c.source, 2000))
	u := personUpdate(notes, "while this call was held by a pause")
	return ToolResult{Text: encodeFeedback(struct {
		NotRun bool   `json:"not_run"`
		Reason string `json:"reason"`
		People any    `json:"people"`
	}{true, "A person ran cells while this call was held by a pause, so it was NOT run: decide again with what they did.",
		json.RawMessage(u.Text)}), Images: u.Images}, true, nil
}

// saveSource keeps what the agent wrote in its workspace: cell_NNN.py, or program_NN.py.
func (cl caller) saveSource(i int, c agentCall) {
	e := cl.e
	file := fmt.Sprintf("cell_%03d.py", i)
	if c.tool == ToolRunProgram {
		file = fmt.Sprintf("program_%02d.py", i)
	}
	if err := e.files.writeWorkspace(file, []byte(c.source)); err != nil {
		e.log.Warn("cannot save cell source", "err", err)
	}
}

// respond records a finished cell and builds its feedback.
func (cl caller) respond(c agentCall, i int, timeout time.Duration, out cellOutput, people []personNote) (ToolResult, error) {
	e := cl.e
	res := out.res
	report := out.share.report
	run := cellRun{Index: i, Outputs: res.Outputs, Status: res.Status, Elapsed: out.elapsed, Report: report,
		TimedOut: res.TimedOut, Restarted: res.Restarted, TimeoutS: timeout.Seconds(), Between: out.share.between,
		Omitted: res.Omitted, Incomplete: res.OutputsIncomplete, File: c.file,
		Labels: e.names.add(res.ExecutionCount, fmt.Sprintf("<cell %d>", i))}
	if run.File == "" && c.tool == ToolRunProgram {
		run.File = fmt.Sprintf("program_%02d.py", i)
	}
	if out.byPerson {
		run.Notes = append(run.Notes, "A person interrupted this cell from JupyterLab (the KeyboardInterrupt above is theirs, "+
			"not a timeout): its output is partial; the robot is where the interrupt left it.")
	}
	result := e.calls.feedback(c, run, people)
	meta := cellMeta(c, i, out, res.MsgID)
	meta.Status = res.Status
	if res.Omitted.Any() || res.OutputsIncomplete {
		meta.Extra = map[string]any{"outputs_omitted": res.Omitted, "outputs_incomplete": res.OutputsIncomplete}
	}
	for _, im := range result.Images {
		meta.ImagesSent = append(meta.ImagesSent, im.Name)
	}
	if report != nil {
		meta.SandboxFlags = report.SandboxFlags
	}
	var tags []string
	if res.Status == "error" || raised(res.Outputs) {
		tags = []string{notebooks.TagRaisesException}
	}
	if err := e.trace.AddCode(c.code, notebooks.CodeRun{Outputs: res.Outputs, ExecutionCount: res.ExecutionCount, Timing: res.Timing, Tags: tags}, meta.Map()); err != nil {
		e.log.Warn("trace", "err", err)
	}
	applyDisplayUpdates(e.trace, e.log, res.DisplayUpdates)
	result.recorded = true
	if err := e.book.toolTurn(toolTurn(c.tool, res.Status, out.elapsed, report)); err != nil {
		e.log.Warn(ToolTurnsFile, "err", err)
	}
	if success, changed := e.book.absorb(report, e.brief.stateful); changed {
		// Keep the trace's verdict current, so a trace cut short by a kill still says it.
		_ = e.book.setMeta(func(m *notebooks.EpisodeMeta) { m.Success = &success })
	}
	if err := e.book.save(); err != nil {
		return result, fmt.Errorf("result.json: %w", err)
	}
	if res.Restarted {
		// The interrupt did not stop the cell and the kernel was restarted: the robot and its
		// simulation are gone, and re-creating them would be a reset the benchmark does not allow.
		return result, fmt.Errorf("cell %d: %w", i, ErrKernelRestarted)
	}
	return result, nil
}

// feedback builds what the model reads of a cell, per arm, with what people did since it last heard.
func (cl caller) feedback(c agentCall, run cellRun, people []personNote) ToolResult {
	e := cl.e
	var result ToolResult
	switch {
	case c.author == notebooks.AuthorTool:
		result = buildToolFeedback(run, c.tool, e.spec.Images, people, styleOf(e.spec.PromptProfile))
	case c.tool == ToolRunProgram:
		result = buildProgramFeedback(run, e.spec.Feedback, e.spec.Images, e.spec.MaxPrograms, people)
	default:
		result, _ = buildCellFeedback(run, e.spec.Feedback, e.spec.Images, people, styleOf(e.spec.PromptProfile))
	}
	if len(people) > 0 && len(result.Images) == 0 {
		// People's cells ran before this one (a runtime that has no AwaitTurn): their fresh images.
		result.Images = personUpdate(people, "").Images
	}
	return result
}

// cellMeta is a trace cell's metadata.pyrualean for an agent call.
func cellMeta(c agentCall, i int, out cellOutput, msgID string) notebooks.CellMeta {
	sandboxed := true // the cell ran under the sandbox, so replay runs it the same way
	elapsedS := Round(out.elapsed.Seconds(), 3)
	meta := notebooks.CellMeta{Author: c.author, Turn: i, Tool: c.tool, Sandbox: &sandboxed, ElapsedS: &elapsedS, Args: c.args, MsgID: msgID}
	if out.byPerson {
		meta.InterruptedBy = "person"
	}
	return meta
}

// recordAborted records a cell that did not finish (the kernel died, or the budget or ctx ended),
// keeping what it printed.
func (cl caller) recordAborted(c agentCall, i int, out cellOutput) {
	e := cl.e
	cause := out.err
	outs := append(out.partial, notebooks.Output{OutputType: notebooks.OutputError, Ename: errorType(cause), Evalue: cause.Error(),
		Traceback: []string{errorType(cause) + ": " + cause.Error()}})
	meta := cellMeta(c, i, out, "")
	meta.Status = "aborted"
	_ = e.book.toolTurn(toolTurn(c.tool, "aborted", out.elapsed, nil))
	_ = e.trace.AddCode(c.code, notebooks.CodeRun{Outputs: outs, Tags: []string{notebooks.TagRaisesException}}, meta.Map())
	e.book.absorb(nil, nil)
	_ = e.book.save()
}

// applyDisplayUpdates carries update_display_data for displays shown by earlier cells into the trace
// (nbformat semantics: every output with that display id gets the new data and metadata).
func applyDisplayUpdates(tr *notebooks.Trace, log *slog.Logger, updates []notebooks.Output) {
	for _, u := range updates {
		err := tr.UpdateDisplay(u.DisplayID, u.Data, u.Metadata)
		switch {
		case errors.Is(err, notebooks.ErrUnknownDisplay):
			// A display the trace never held (e.g. shown by a silent execute): nothing to update.
			log.Debug("display update for an unknown display", "display_id", u.DisplayID)
		case err != nil:
			log.Warn("trace: display update", "display_id", u.DisplayID, "err", err)
		}
	}
}

// refuse answers a call that did not run (malformed, unknown, budget); it is not counted.
func (cl caller) refuse(msg string) ToolResult {
	e := cl.e
	e.log.Info("tool call refused", "reason", msg)
	return ToolResult{Text: errorText(msg), IsError: true}
}

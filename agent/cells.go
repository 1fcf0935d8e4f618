package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/atomicfile"
	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/robotapi"
)

// Tool descriptions and schemas the model reads (seed arms.ArmToolkit.get_tools_spec, reworded).
const (
	pythonDescription = "Run Python code in a persistent session in which `robo` (the robot), `np`, `math` and `time` " +
		"already exist; variables, functions and imports carry over from one call to the next. The result holds " +
		"stdout, stderr, the exception if one was raised, the value of a final expression, the robot state, and " +
		"the current camera images whenever the robot moved."
	finishDescription = "End the episode. Call it once the task predicate has fired (a result showed " +
		"terminated=true) or when you cannot make progress, and then stop."
)

var (
	pythonSchema = json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"Python source"}},"required":["code"]}`)
	// finishStatuses are the statuses finish accepts: its schema's enum, checked by callFinish.
	finishStatuses = []string{"success", "failure", "stuck"}
	finishSchema   = json.RawMessage(`{"type":"object","properties":{"status":{"type":"string","enum":` + jsonText(finishStatuses) +
		`},"summary":{"type":"string","description":"one or two sentences"}},"required":["status","summary"]}`)
)

// cellsToolkit is the cells arm: python(code) and finish.
type cellsToolkit struct{ e *Episode }

func (t *cellsToolkit) Tools() []ToolSpec {
	return []ToolSpec{
		{Name: "python", Description: pythonDescription, Parameters: pythonSchema, ReadOnly: true},
		{Name: "finish", Description: finishDescription, Parameters: finishSchema, ReadOnly: true},
	}
}

func (t *cellsToolkit) Call(ctx context.Context, name string, args json.RawMessage) (ToolResult, error) {
	name = StripToolPrefix(name)
	switch name {
	case "finish":
		return t.e.callFinish(args)
	case "python":
		var a struct {
			Code *string `json:"code"`
		}
		if err := strictJSON(args, &a); err != nil || a.Code == nil {
			msg := "malformed arguments for python: expected a JSON object {\"code\": \"<python source>\"}"
			if err != nil {
				msg += "; " + err.Error()
			}
			return t.e.refuse(msg), nil
		}
		return t.e.runCell(ctx, *a.Code, "python", notebooks.AuthorAgent, nil)
	default:
		return t.e.refuse("unknown tool: " + name), nil
	}
}

// toolsToolkit is the tools arm: one function tool per primitive, plus finish.
type toolsToolkit struct{ e *Episode }

func (t *toolsToolkit) Tools() []ToolSpec {
	out := append([]ToolSpec{}, t.e.tools...)
	return append(out, ToolSpec{Name: "finish", Description: finishDescription, Parameters: finishSchema, ReadOnly: true})
}

func (t *toolsToolkit) Call(ctx context.Context, name string, args json.RawMessage) (ToolResult, error) {
	name = StripToolPrefix(name)
	if name == "finish" {
		return t.e.callFinish(args)
	}
	known := false
	for _, s := range t.e.tools {
		if s.Name == name {
			known = true
		}
	}
	if !known {
		return t.e.refuse("unknown tool: " + name), nil
	}
	var a map[string]any
	if len(bytes.TrimSpace(args)) == 0 {
		a = map[string]any{}
	} else if err := strictJSON(args, &a); err != nil || a == nil {
		msg := fmt.Sprintf("malformed arguments for %s: expected a JSON object of keyword arguments", name)
		if err != nil {
			msg += "; " + err.Error()
		}
		return t.e.refuse(msg), nil
	}
	code, err := primitiveCell(name, a)
	if err != nil {
		return t.e.refuse(fmt.Sprintf("malformed arguments for %s: %v", name, err)), nil
	}
	return t.e.runCell(ctx, code, name, notebooks.AuthorTool, a)
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// strictJSON decodes a JSON object, keeping numbers exact and rejecting trailing data.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if dec.More() {
		return errors.New("invalid JSON: trailing data after the object")
	}
	return nil
}

// refuse answers a call that did not run (malformed, unknown, budget); it is not counted.
func (e *Episode) refuse(msg string) ToolResult {
	e.log.Info("tool call refused", "reason", msg)
	return ToolResult{Text: errorText(msg), IsError: true}
}

// callFinish records the model's finish; it is never counted. Malformed arguments go back to the
// model as an error, as for python, and the episode goes on.
func (e *Episode) callFinish(args json.RawMessage) (ToolResult, error) {
	var a struct {
		Status  *string `json:"status"`
		Summary *string `json:"summary"`
	}
	const want = `expected a JSON object {"status": "success" | "failure" | "stuck", "summary": "<one or two sentences>"}`
	if err := strictJSON(args, &a); err != nil || a.Status == nil || a.Summary == nil {
		msg := "malformed arguments for finish: " + want
		if err != nil {
			msg += "; " + err.Error()
		}
		return e.refuse(msg), nil
	}
	if !slices.Contains(finishStatuses, *a.Status) {
		return e.refuse(fmt.Sprintf("malformed arguments for finish: status %q is not one of %s; %s",
			*a.Status, strings.Join(finishStatuses, ", "), want)), nil
	}
	status, summary := *a.Status, *a.Summary
	e.mu.Lock()
	terminated := e.res.EnvironmentSuccess != nil && *e.res.EnvironmentSuccess
	if e.finish == nil {
		e.finish = &FinishInfo{Status: status, Summary: summary, EnvironmentTerminated: terminated, AfterCallBudgetExhaust: e.budgetOut}
	}
	e.finished = true
	e.lastTool = "finish"
	e.mu.Unlock()
	_ = e.trace.AddMarkdown(fmt.Sprintf("**finish** — status `%s`\n\n%s", status, summary),
		notebooks.CellMeta{Author: notebooks.AuthorAgent, Tool: "finish", Finish: &notebooks.FinishMeta{Status: status, Summary: summary}}.Map())
	_ = e.saveResult()
	text := encodeFeedback(struct {
		OK                    bool   `json:"ok"`
		Status                string `json:"status"`
		Summary               string `json:"summary"`
		EnvironmentTerminated bool   `json:"environment_terminated"`
	}{true, status, summary, terminated})
	return ToolResult{Text: text, Finished: true}, nil
}

// runCell executes one agent (or tool-arm) cell: gate, budget, kernel execution with the sandbox
// on, accounting (the agent's share of the robot report), trace, ledger, feedback.
func (e *Episode) runCell(ctx context.Context, code, tool, author string, args map[string]any) (ToolResult, error) {
	shown := code
	if tool == ToolRunProgram {
		shown, _ = args["code"].(string)
	}
	held, err := e.gate.toolWait(ctx, CellInfo{Tool: tool, Code: shown})
	if err != nil {
		return ToolResult{}, err
	}
	if held {
		// A cell decided before the pause: after a person's cells it would run on a stale plan.
		if err := e.waitHumans(ctx); err != nil {
			return ToolResult{}, err
		}
		if notes := e.takeHumans(); len(notes) > 0 {
			e.recordEvent("replan", "", TrimMiddle(shown, 2000))
			u := e.humanUpdate(notes, "while this call was held by a pause")
			return ToolResult{Text: encodeFeedback(struct {
				NotRun bool   `json:"not_run"`
				Reason string `json:"reason"`
				People any    `json:"people"`
			}{true, "A person ran cells while this call was held by a pause, so it was NOT run: decide again with what they did.",
				json.RawMessage(u.Text)}), Images: u.Images}, nil
		}
	}
	e.callMu.Lock()
	defer e.callMu.Unlock()
	if ctx.Err() != nil { // never start a cell once the episode's context has ended
		return ToolResult{}, context.Cause(ctx)
	}
	e.mu.Lock()
	if e.ended {
		e.mu.Unlock()
		return ToolResult{}, ErrEpisodeOver
	}
	if e.finish != nil {
		e.mu.Unlock()
		return e.refuse("the episode is over: finish was already called"), nil
	}
	if e.cfg.MaxTurns > 0 && e.turns >= e.cfg.MaxTurns {
		first := !e.budgetOut
		e.budgetOut = true
		i := e.turns
		e.mu.Unlock()
		if first {
			e.log.Info("call budget exhausted", "max_turns", e.cfg.MaxTurns)
			_ = e.saveResult()
		}
		return ToolResult{Text: errorText("call budget exhausted: the episode is over, call finish", "cell", i), IsError: true, Finished: true}, nil
	}
	e.turns++
	i := e.turns
	e.lastTool = tool
	humans := e.humans
	e.humans = nil
	e.running, e.interrupted = &CellInfo{Turn: i, Tool: tool, Code: shown}, false
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running = nil
		e.mu.Unlock()
	}()

	file, src := fmt.Sprintf("cell_%03d.py", i), code
	if tool == ToolRunProgram {
		file = fmt.Sprintf("program_%02d.py", i)
		src = shown
	}
	if err := atomicfile.Write(filepath.Join(e.workspace, file), []byte(src)); err != nil {
		e.log.Warn("cannot save cell source", "err", err)
	}
	var partial []notebooks.Output
	sandboxed := true
	opts := kernel.ExecuteOptions{
		Metadata:        map[string]any{notebooks.MetaKey: notebooks.CellMeta{Author: author, Turn: i, Tool: tool, Sandbox: &sandboxed}.Map()},
		UserExpressions: map[string]string{"pyrualean": robotapi.CellReportExpr},
		Timeout:         e.cellTimeout(tool),
		OnOutput:        func(o notebooks.Output) { partial = append(partial, o) },
		OnSent: func(msgID string) {
			e.mu.Lock()
			if e.running != nil {
				e.running.MsgID = msgID
			}
			e.mu.Unlock()
		},
	}
	start := time.Now()
	res, err := e.kern.Client().Execute(ctx, code, opts)
	if err == nil {
		err = e.kern.Recover(ctx, res) // a cell stuck past its interrupt: restart (the episode then ends)
	}
	elapsed := time.Since(start)
	// sandbox: the cell ran under the sandbox, so replay runs it the same way.
	elapsedS := round3(elapsed.Seconds())
	meta := notebooks.CellMeta{Author: author, Turn: i, Tool: tool, Sandbox: &sandboxed, ElapsedS: &elapsedS, Args: args}
	e.mu.Lock()
	if e.running != nil {
		meta.MsgID = e.running.MsgID
	}
	byPerson := e.interrupted
	e.mu.Unlock()
	if byPerson {
		meta.InterruptedBy = "person"
	}
	if err != nil {
		// The cell did not finish: the kernel died, or the budget/ctx ended. Keep what it printed.
		outs := mergeStreams(partial)
		cause := err
		if ctx.Err() != nil {
			cause = context.Cause(ctx)
			if e.kern != nil && !isDone(e.kern.Done()) {
				ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				_ = e.kern.Interrupt(ictx)
				cancel()
			}
		}
		if isDone(e.kern.Done()) && e.kern.Err() != nil && !errors.Is(cause, kernel.ErrKernelDied) {
			cause = fmt.Errorf("%w (%v)", e.kern.Err(), err)
		}
		outs = append(outs, notebooks.Output{OutputType: notebooks.OutputError, Ename: errorType(cause), Evalue: cause.Error(), Traceback: []string{errorType(cause) + ": " + cause.Error()}})
		meta.Status = "aborted"
		_ = appendToolTurn(e.cfg.Out, i, tool, "aborted", elapsed, nil)
		_ = e.trace.AddCode(code, notebooks.CodeRun{Outputs: outs, Tags: []string{notebooks.TagRaisesException}}, meta.Map())
		e.mu.Lock()
		e.res.ToolTurns = e.turns
		e.mu.Unlock()
		_ = e.saveResult()
		return ToolResult{}, fmt.Errorf("cell %d: %w", i, cause)
	}
	span := execSpan{turn: i, start: firstTime(res.Timing.Busy, res.Timing.ExecuteInput, start),
		end: firstTime(res.Timing.Idle, res.Timing.ExecuteReply, time.Now())}
	e.addSpan(span)
	report, rerr := parseReport(res.UserExpressions)
	if rerr != nil && !res.Restarted && !isDone(e.kern.Done()) {
		// IPython evaluates user_expressions only after a cell that succeeded; after an exception ask
		// again with a silent empty execute (no hooks, no history, no execution count).
		if r2, err := e.kern.Client().Execute(ctx, "", kernel.ExecuteOptions{Silent: true, UserExpressions: map[string]string{"pyrualean": robotapi.CellReportExpr}, Timeout: 30 * time.Second}); err == nil {
			report, rerr = parseReport(r2.UserExpressions)
		}
		if rerr != nil {
			e.log.Warn("no cell report", "cell", i, "err", rerr)
		}
	}
	report = e.judgeReport(ctx, src, report)   // sealed: the robot server's numbers and flags (of what the agent wrote), not the kernel's
	report = e.account(report, owner{turn: i}) // the agent's share: a person's calls are theirs
	run := cellRun{Index: i, Outputs: res.Outputs, Status: res.Status, Elapsed: elapsed, Report: report,
		TimedOut: res.TimedOut, Restarted: res.Restarted, TimeoutS: e.cellTimeout(tool).Seconds()}
	if byPerson {
		run.Notes = append(run.Notes, "A person interrupted this cell from JupyterLab (the KeyboardInterrupt above is theirs, "+
			"not a timeout): its output is partial; the robot is where the interrupt left it.")
	}
	var result ToolResult
	switch {
	case author == notebooks.AuthorTool:
		result = buildToolFeedback(run, tool, e.cfg.Images, humans)
	case tool == ToolRunProgram:
		result = buildProgramFeedback(run, e.cfg.Feedback, e.cfg.Images, e.cfg.MaxPrograms, humans)
	default:
		result, _ = buildCellFeedback(run, e.cfg.Feedback, e.cfg.Images, humans)
	}
	if len(humans) > 0 && len(result.Images) == 0 {
		// People's cells ran before this one (a runtime that has no AwaitTurn): their fresh images.
		result.Images = e.humanUpdate(humans, "").Images
	}
	meta.Status = res.Status
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
	if err := e.trace.AddCode(code, notebooks.CodeRun{Outputs: res.Outputs, ExecutionCount: res.ExecutionCount, Timing: res.Timing, Tags: tags}, meta.Map()); err != nil {
		e.log.Warn("trace", "err", err)
	}
	e.applyDisplayUpdates(res.DisplayUpdates)
	if err := appendToolTurn(e.cfg.Out, i, tool, res.Status, elapsed, report); err != nil {
		e.log.Warn(ToolTurnsFile, "err", err)
	}
	if success, changed := e.absorbReport(report); changed {
		// Keep the trace's verdict current, so a trace cut short by a kill still says it.
		_ = e.updateTraceMeta(func(m *notebooks.EpisodeMeta) { m.Success = &success })
	}
	if err := e.saveResult(); err != nil {
		return result, fmt.Errorf("result.json: %w", err)
	}
	if res.Restarted {
		// The interrupt did not stop the cell and the kernel was restarted: the robot and its
		// simulation are gone, and re-creating them would be a reset the benchmark does not allow.
		return result, fmt.Errorf("cell %d: %w", i, ErrKernelRestarted)
	}
	return result, nil
}

// firstTime is the first non-zero time.
func firstTime(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// applyDisplayUpdates carries update_display_data for displays shown by earlier cells into the trace
// (nbformat semantics: every output with that display id gets the new data and metadata).
func (e *Episode) applyDisplayUpdates(updates []notebooks.Output) {
	for _, u := range updates {
		err := e.trace.UpdateDisplay(u.DisplayID, u.Data, u.Metadata)
		switch {
		case errors.Is(err, notebooks.ErrUnknownDisplay):
			// A display the trace never held (e.g. shown by a silent execute): nothing to update.
			e.log.Debug("display update for an unknown display", "display_id", u.DisplayID)
		case err != nil:
			e.log.Warn("trace: display update", "display_id", u.DisplayID, "err", err)
		}
	}
}

func parseReport(ue map[string]json.RawMessage) (*cellReport, error) {
	return robotapi.DecodeCellReport(ue, "pyrualean")
}

// mergeStreams joins consecutive stream chunks of the same name (OnOutput delivers them one by one).
func mergeStreams(outs []notebooks.Output) []notebooks.Output {
	var merged []notebooks.Output
	for _, o := range outs {
		if n := len(merged); n > 0 && o.OutputType == notebooks.OutputStream && merged[n-1].OutputType == notebooks.OutputStream && merged[n-1].Name == o.Name {
			merged[n-1].Text += o.Text
			continue
		}
		merged = append(merged, o)
	}
	return merged
}

// toolFeedback is a primitive call's result in the tools arm (RPent-style: result, state, images).
type toolFeedback struct {
	Tool            string      `json:"tool"`
	OK              bool        `json:"ok"`
	Result          *string     `json:"result,omitempty"`
	Error           *string     `json:"error,omitempty"`
	Stdout          string      `json:"stdout,omitempty"`
	Moved           bool        `json:"moved"`
	EnvSteps        int         `json:"env_steps"`
	State           any         `json:"state"`
	EpisodeDone     bool        `json:"episode_done"`
	EpisodeFinished *string     `json:"episode_finished,omitempty"`
	Images          []string    `json:"images,omitempty"`
	HumanCells      []humanNote `json:"human_cells,omitempty"`
}

func buildToolFeedback(run cellRun, tool, images string, humans []humanNote) ToolResult {
	ct := collectText(run.Outputs)
	fb := toolFeedback{Tool: tool, OK: !ct.hasError && !run.TimedOut, Result: ct.value, Stdout: ct.stdout, HumanCells: humans, State: map[string]any{}}
	if r := run.Report; r != nil {
		fb.Moved, fb.EnvSteps, fb.EpisodeDone = r.Moved, r.EnvSteps, r.Done
		fb.State = reportState(r)
		if r.EpisodeFinished != nil && *r.EpisodeFinished != "" {
			fb.EpisodeFinished = r.EpisodeFinished
		}
	}
	if ct.hasError {
		if ct.ename == "EpisodeFinished" {
			reason := strings.TrimSpace(ct.evalue)
			if reason == "" {
				reason = "terminated"
			}
			fb.EpisodeFinished = &reason
		} else {
			msg := ct.ename + ": " + ct.evalue
			fb.Error = &msg
		}
	}
	if run.TimedOut {
		msg := fmt.Sprintf("TimeoutError: the call ran past its %.0f s limit and was interrupted", run.TimeoutS)
		fb.Error = &msg
	}
	imgs := selectImages(run.Outputs, images)
	for _, im := range imgs {
		fb.Images = append(fb.Images, im.Name)
	}
	return ToolResult{Text: encodeFeedback(fb), Images: imgs, EpisodeDone: fb.EpisodeFinished != nil}
}

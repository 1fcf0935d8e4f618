package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pyrualean/pyrualean/notebooks"
)

// The program arm (the original's arms.py, arm "program"): the model submits whole programs instead of cells.
// Each program defines run(robo); it runs in a fresh namespace (nothing carries over from an earlier
// program, only the robot and its simulation do) under the cell watchdog, and ends completed,
// finished (the episode ended under it: EpisodeFinished), error or timeout.
//
// A program runs in the episode's own kernel as one sandboxed trace cell: its source, then the call
// `run(robo)`. The fresh namespace is made before it by a silent, unsandboxed execute that puts the
// kernel's namespace back to what it was before the first program (the setup cell's names), keeping
// that snapshot where policy code cannot reach it (an attribute of the pyrualean_robot module, which
// the sandbox does not let a program import).
const (
	ToolRunProgram = "run_program"

	programEntry          = "run(robo)"
	resetProgramNamespace = "(lambda m, g: (m.__dict__.setdefault('_program_baseline', dict(g)), " +
		"[g.pop(k) for k in [k for k in g if k not in m._program_baseline]], g.update(m._program_baseline), None)[-1])" +
		"(__import__('pyrualean_robot'), globals())"
)

var runProgramSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"code":{"type":"string","description":"the whole program: Python source that defines run(robo)"},` +
	`"path":{"type":"string","description":"instead of code: a .py file in your workspace holding the program"}}}`)

// runProgramDescription is the run_program tool's text; with a program budget it ends, as the
// original's does, with how many calls are allowed.
func runProgramDescription(maxPrograms int) string {
	d := "Run a complete Python program that defines `run(robo)`. The program runs in a fresh namespace " +
		"(`robo`, `np`, `math`, `time` and `display` exist; nothing from an earlier program does) and then " +
		"`run(robo)` is called under a watchdog. The result gives the program's status (completed, finished " +
		"when the episode ended during it, error, timeout), stdout, stderr, the exception if any, the robot " +
		"state, the camera images if the robot moved, and programs_left."
	if maxPrograms > 0 {
		s := "s"
		if maxPrograms == 1 {
			s = ""
		}
		d += fmt.Sprintf(" You may call it at most %d time%s.", maxPrograms, s)
	}
	return d
}

// programToolkit is the program arm: run_program(code | path) and finish.
type programToolkit struct {
	e  *Episode
	mu sync.Mutex // one program at a time, budget check and run together
}

func (t *programToolkit) Tools() []ToolSpec {
	return []ToolSpec{
		{Name: ToolRunProgram, Description: runProgramDescription(t.e.spec.MaxPrograms), Parameters: runProgramSchema, ReadOnly: true},
		{Name: "finish", Description: finishDescription, Parameters: finishSchema, ReadOnly: true},
	}
}

func (t *programToolkit) Call(ctx context.Context, name string, args json.RawMessage) (ToolResult, error) {
	name = StripToolPrefix(name)
	switch name {
	case "finish":
		return t.e.calls.callFinish(args)
	case ToolRunProgram:
	default:
		return t.e.calls.refuse("unknown tool: " + name), nil
	}
	var a struct {
		Code *string `json:"code"`
		Path *string `json:"path"`
	}
	if err := strictJSON(args, &a); err != nil || (a.Code == nil) == (a.Path == nil) {
		msg := "malformed arguments for run_program: expected a JSON object with exactly one of {\"code\": \"<python source>\"} or {\"path\": \"<file in the workspace>\"}"
		if err != nil {
			msg += "; " + err.Error()
		}
		return t.e.calls.refuse(msg), nil
	}
	src, file := "", "" // file: the program's file in the workspace ("" : program_NN.py, saved by call)
	if a.Code != nil {
		src = *a.Code
	} else {
		file = filepath.Base(*a.Path)
		var err error
		if src, err = t.readWorkspaceFile(*a.Path); err != nil {
			return t.e.calls.refuse("run_program: " + err.Error()), nil
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.e
	// The call budget is checked first (by call); then the program budget (the original's order).
	calls := e.book.callsMade()
	if n := e.spec.MaxPrograms; n > 0 && calls >= n && (e.spec.MaxCalls == 0 || calls < e.spec.MaxCalls) && !e.book.isFinished() {
		// Not the call budget: the episode ends as completed, as the original's (the model is to finish).
		e.log.Info("program budget exhausted", "max_programs", n)
		return ToolResult{Text: errorText(fmt.Sprintf("program budget exhausted (%d); call finish", n), "programs_left", 0), IsError: true, Finished: true}, nil
	}
	if err := e.steps.silent(ctx, resetProgramNamespace, e.spec.CellTimeout()); err != nil {
		return ToolResult{}, fmt.Errorf("run_program: fresh namespace: %w", err)
	}
	// The trace cell keeps the program as run_program's arguments (metadata.pyrualean.args), as a
	// tools-arm cell keeps its primitive's, so the replay runtime can submit it again.
	return e.calls.call(ctx, agentCall{code: programCell(src), source: src, tool: ToolRunProgram, author: notebooks.AuthorAgent, file: file,
		args: map[string]any{"code": src}})
}

// programCell is the trace cell that runs one program: its source, then the entry point's call.
func programCell(src string) string {
	return strings.TrimRight(src, " \t\r\n") + "\n\n" + programEntry
}

// readWorkspaceFile reads a program the model wrote into its workspace (relative to it, or absolute
// inside it). The file is opened beneath the workspace (os.Root): a link out of it, a path it cannot
// resolve (a loop, a chain past PATH_MAX) or anything but a regular file of at most MaxWorkspaceRead
// bytes is refused, with the reason, and nothing of it is read.
func (t *programToolkit) readWorkspaceFile(p string) (string, error) {
	rel, err := workspaceRel(t.e.files.workspace, p)
	if err != nil {
		return "", err
	}
	b, err := t.e.files.readWorkspace(rel, MaxWorkspaceRead)
	if err != nil {
		return "", fmt.Errorf("refused to read %q: it must be a regular file beneath the workspace, reached without leaving it: %w", p, err)
	}
	return string(b), nil
}

// workspaceRel turns a path the agent gave (relative to the workspace, or absolute inside it) into one
// relative to the workspace, lexically: links are resolved only by the os.Root that opens it.
func workspaceRel(ws, p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q is not a file name", p)
	}
	if !filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	rel, err := filepath.Rel(filepath.Clean(ws), filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("path %q is outside the workspace", p)
	}
	return rel, nil
}

// Program statuses (the original's run_policy).
const (
	ProgramCompleted = "completed"
	ProgramFinished  = "finished"
	ProgramError     = "error"
	ProgramTimeout   = "timeout"
)

// programFeedback is run_program's result, in the original's key order: the program's number and
// file, how it ended, its streams and exception, how many programs are left (null: no program budget),
// then (rich) the ledger and state, and what people did.
type programFeedback struct {
	Program        int          `json:"program"`
	File           string       `json:"file"`
	Status         string       `json:"status"`
	Reason         *string      `json:"reason,omitempty"` // why the episode ended under it (status finished)
	Exception      *string      `json:"exception,omitempty"`
	Stdout         string       `json:"stdout"`
	Stderr         string       `json:"stderr"`
	ElapsedS       float64      `json:"elapsed_s"`
	ProgramsLeft   *int         `json:"programs_left"`
	PrimitiveCalls *[]any       `json:"primitive_calls,omitempty"`
	Moved          *bool        `json:"moved,omitempty"`
	EnvSteps       *int         `json:"env_steps,omitempty"`
	State          any          `json:"state,omitempty"`
	EpisodeDone    *bool        `json:"episode_done,omitempty"`
	Images         []string     `json:"images,omitempty"`
	Notes          []string     `json:"notes,omitempty"`
	HumanCells     []personNote `json:"human_cells,omitempty"`
}

// programStatus says how a program ended: finished only when the robot stopped it (EpisodeFinished
// raised), not when it returned after the task had terminated.
func programStatus(run cellRun) string {
	ct := collectText(run.Outputs)
	switch {
	case run.TimedOut:
		return ProgramTimeout
	case ct.hasError && ct.ename == "EpisodeFinished":
		return ProgramFinished
	case ct.hasError:
		return ProgramError
	}
	return ProgramCompleted
}

// buildProgramFeedback turns the cell that ran program number run.Index into run_program's result.
func buildProgramFeedback(run cellRun, feedback, images string, maxPrograms int, people []personNote) ToolResult {
	res, fb := buildCellFeedback(run, feedback, images, people, styleOriginal)
	pf := programFeedback{Program: run.Index, File: run.File, Status: programStatus(run),
		Exception: fb.Exception, Stdout: fb.Stdout, Stderr: fb.Stderr, ElapsedS: fb.ElapsedS,
		PrimitiveCalls: fb.PrimitiveCalls, Moved: fb.Moved, EnvSteps: fb.EnvSteps, State: fb.State, EpisodeDone: fb.EpisodeDone,
		Images: fb.Images, Notes: fb.Notes, HumanCells: fb.HumanCells}
	if pf.Status == ProgramFinished {
		pf.Reason = fb.EpisodeFinished // why the robot stopped it
	}
	if maxPrograms > 0 {
		left := max(maxPrograms-run.Index, 0)
		pf.ProgramsLeft = &left
	}
	res.Text = encodeFeedback(pf)
	return res
}

// ProgramStatus reads the status of the last program from a run_program result's text ("" when the
// text is not one: a refusal).
func ProgramStatus(text string) string {
	var v struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal([]byte(text), &v)
	return v.Status
}

// programContract is the program arm's "how you control the robot" (seed: the single-program
// contract when one program is allowed).
func programContract(p PromptParts) string {
	budget := ""
	switch {
	case p.MaxPrograms == 1:
		budget = "You may call it EXACTLY ONCE: that one program must carry out the whole task, checking " +
			"results in code (gripper opening, whether a move reached its target, `terminated`) and retrying " +
			"where it can, since you will not see its results before it ends.\n"
	case p.MaxPrograms > 1:
		budget = fmt.Sprintf("You may call it at most %d times; each program should carry out as much of the task as "+
			"it can and check its results in code.\n", p.MaxPrograms)
	}
	return "# How you control the robot\n\n" +
		"You act through ONE tool, `run_program(code)`: you submit a complete Python program that defines a " +
		"function `run(robo)`. The program runs in a fresh namespace in which `robo` (the robot, bound to the " +
		"live simulator), `np`, `math`, `time` and `display(image)` exist, and then `run(robo)` is called. " +
		"Nothing you define carries over to a later program; the robot and the simulator keep their state. " +
		"A program runs under a watchdog; the result says how it ended: `completed` (run returned), `finished` " +
		"(the episode ended during it), `error` (an exception, shown) or `timeout`, plus stdout, stderr and " +
		"`programs_left`. " + feedbackNote(p.Feedback) + "\n" + imageNote(p) + "\n" + budget +
		"The program is sandboxed: import `numpy`, `math`, `time`, `json`, `re`, `PIL`, `scipy` and other " +
		"pure-computation modules, but not `os`, `sys`, `subprocess`, `pathlib` or networking; files open only " +
		"inside your workspace; private attributes of `robo` (names starting with `_`) and reaching into Python " +
		"internals (`__globals__`, `__subclasses__`, ...) are refused: such a program does not run and you are told why.\n\n" +
		scoringSection(p)
}

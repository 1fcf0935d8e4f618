// Package replay re-executes an episode trace's code cells in a fresh kernel and reports, cell by
// cell, whether the outputs are the recorded ones and whether the episode's outcome is the same.
//
// The trace's first code cell creates `robo` with the recorded robot, task and seed, so re-running the
// cells in order rebuilds the same episode; nothing else about the episode needs to be passed.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/robotapi"
)

// OutcomeExpression is evaluated (as a user expression, after the last cell) to learn the replayed
// episode's outcome; its application/json carries {done, success, ...}.
const OutcomeExpression = robotapi.CellReportExpr

// Options tune a replay. The zero value replays every code cell on the trace's kernelspec.
type Options struct {
	// Until is the index (0-based, in the notebook's cell list) of the last cell to replay; negative
	// means all. A partial replay does not compare the outcome.
	Until int
	// Out, when set, receives the replayed notebook (saved atomically after every cell).
	Out string
	// KernelName overrides the trace's metadata.kernelspec.name.
	KernelName string
	// Dir is the kernel's working directory and the robot's workspace; default a fresh temp dir.
	// The setup cell's workspace="..." argument is pointed here so a replay never writes into the
	// recorded run's folder (KeepWorkspace turns that off).
	Dir           string
	KeepWorkspace bool
	CellTimeout   time.Duration // default 10 minutes
	Tolerances    notebooks.Tolerances
	Logger        *slog.Logger
	// Sealed is SealAuto (default, as play's), SealOn or SealOff: whether the trace's code runs in the OS
	// sandbox with its robot in a robot server. The choice is in the report and the replayed notebook.
	Sealed string
	// OnCell, when set, is told about each cell as soon as it is compared.
	OnCell func(CellReport)
}

// CellReport is one replayed code cell.
type CellReport struct {
	Index          int    `json:"index"`           // position in the notebook's cells
	ID             string `json:"id"`              // cell id
	Author         string `json:"author"`          // metadata.pyrualean.author
	ExecutionCount *int   `json:"execution_count"` // recorded In[n]
	Match          bool   `json:"match"`
	Skipped        string `json:"skipped,omitempty"` // why the outputs were not compared (the cell still ran)
	Reason         string `json:"reason,omitempty"`  // why it diverged
	Stats          string `json:"stats,omitempty"`   // what was compared, for a match
}

// Report is the outcome of a replay.
type Report struct {
	Trace          string
	Cells          []CellReport
	FirstDivergent *CellReport // nil when every replayed cell matched
	// Outcome: recorded metadata.pyrualean.success against the replayed robot's report.
	OutcomeCompared  bool
	RecordedSuccess  *bool
	ReplayedSuccess  *bool
	ReplayedDone     *bool
	OutcomeNote      string // why the outcome was not compared, or what differed
	OutcomeDiffers   bool
	Partial          bool // --until stopped before the last cell
	ReplayedNotebook string
	Seal             SealRecord // how the trace's code ran (sealed or not, and why)
}

// Reproduced reports whether every replayed cell matched and the outcome (when compared) is the same.
func (r *Report) Reproduced() bool { return r.FirstDivergent == nil && !r.OutcomeDiffers }

// ErrBadTrace is returned for a trace that cannot be replayed (unreadable, no code cells).
var ErrBadTrace = errors.New("replay: bad trace")

// Run replays the trace at path.
func Run(ctx context.Context, path string, opts Options) (*Report, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	trace, err := notebooks.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTrace, err)
	}
	last := len(trace.Cells) - 1
	if opts.Until >= 0 && opts.Until < last {
		last = opts.Until
	}
	rep := &Report{Trace: path, Partial: last < len(trace.Cells)-1}
	codeCells := 0
	for i := 0; i <= last; i++ {
		if trace.Cells[i].CellType == notebooks.CellCode {
			codeCells++
		}
	}
	if codeCells == 0 {
		return nil, fmt.Errorf("%w: %s has no code cells up to cell %d", ErrBadTrace, path, last)
	}

	name := opts.KernelName
	if name == "" {
		if ks, ok := trace.Metadata["kernelspec"].(map[string]any); ok {
			name, _ = ks["name"].(string)
		}
	}
	if name == "" {
		name = "pyrualean"
	}
	spec, err := kernel.FindSpec(name)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pyrualean-replay-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	mode := opts.Sealed
	switch mode {
	case "":
		mode = SealAuto
	case SealAuto, SealOn, SealOff:
	default:
		return nil, fmt.Errorf("replay: sealed %q: want auto, on or off", mode)
	}
	sealed, spec, lo, sealRec, err := sealKernel(ctx, mode, spec, dir, trace, log)
	rep.Seal = sealRec
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer sealed.close(log) // after the kernel's shutdown (deferred below, run first)
	k, err := kernel.Launch(ctx, spec, lo)
	if err != nil {
		return rep, fmt.Errorf("replay: start kernel: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		k.Shutdown(sctx)
	}()
	client := k.Client()

	// The replayed notebook: the trace up to `last`, code cells carrying the new outputs.
	out := &notebooks.Notebook{Nbformat: trace.Nbformat, NbformatMinor: trace.NbformatMinor, Metadata: maps.Clone(trace.Metadata)}
	ep, _ := out.Metadata[notebooks.MetaKey].(map[string]any)
	ep = maps.Clone(ep)
	if ep == nil {
		ep = map[string]any{}
	}
	out.Metadata[notebooks.MetaKey] = ep
	replayMeta := map[string]any{"of": path, "status": "running", "seal": sealRec.recordMap()}
	ep["replay"] = replayMeta
	save := func() error {
		if opts.Out == "" {
			return nil
		}
		return notebooks.WriteFileAtomic(opts.Out, out)
	}
	if err := save(); err != nil {
		return nil, err
	}

	timeout := opts.CellTimeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	for i := 0; i <= last; i++ {
		cell := trace.Cells[i]
		if cell.CellType != notebooks.CellCode {
			out.Cells = append(out.Cells, cell)
			continue
		}
		meta := notebooks.CellMetaOf(cell)
		author := meta.Author
		cr := CellReport{Index: i, ID: cell.ID, Author: author, ExecutionCount: cell.ExecutionCount}
		code := cell.Source
		if author == notebooks.AuthorSetup && !opts.KeepWorkspace {
			code = retargetWorkspace(code, dir)
		}
		res, err := client.Execute(ctx, code, kernel.ExecuteOptions{Metadata: executeMetadata(meta), Timeout: timeout})
		if err == nil {
			err = k.Recover(ctx, res) // a cell stuck past its interrupt: the next cells need an idle kernel
		}
		if err != nil {
			// The kernel could not run the cell (died, ctx cancelled): that is the end of the replay.
			cr.Reason = "not executed: " + err.Error()
			rep.addCell(cr, opts.OnCell)
			replayMeta["status"] = "failed"
			_ = save()
			return rep, fmt.Errorf("replay: cell %d: %w", i, err)
		}
		recorded := meta.Status
		switch {
		case recorded == "aborted" || recorded == "timeout":
			// The recording was cut short (kernel died, budget ended, interrupted at its timeout):
			// its outputs are a fragment that an uninterrupted run cannot be expected to match.
			cr.Skipped = "recorded as " + recorded + "; outputs not compared"
		case res.TimedOut:
			cr.Reason = fmt.Sprintf("timed out after %v", timeout)
		default:
			cr.Reason, cr.Stats = notebooks.OutputsMatch(cell.Outputs, res.Outputs, opts.Tolerances)
		}
		cr.Match = cr.Reason == ""
		rep.addCell(cr, opts.OnCell)
		nc := cell
		nc.Outputs = res.Outputs
		nc.ExecutionCount = res.ExecutionCount
		nc.Metadata = maps.Clone(cell.Metadata)
		if ex := res.Timing.Metadata(); len(ex) > 0 {
			nc.Metadata["execution"] = ex
		}
		out.Cells = append(out.Cells, nc)
		if err := save(); err != nil {
			return rep, err
		}
	}

	rep.outcome(ctx, client, sealed, trace)
	replayMeta["status"] = "done"
	replayMeta["reproduced"] = rep.Reproduced()
	if rep.FirstDivergent != nil {
		replayMeta["first_divergent_cell"] = rep.FirstDivergent.Index
	}
	if rep.ReplayedSuccess != nil {
		replayMeta["success"] = *rep.ReplayedSuccess
	}
	if err := save(); err != nil {
		return rep, err
	}
	rep.ReplayedNotebook = opts.Out
	return rep, nil
}

var workspaceArg = regexp.MustCompile(`\bworkspace\s*=\s*(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')`)

// retargetWorkspace points a setup cell's workspace="..." argument at dir.
func retargetWorkspace(code, dir string) string {
	q, _ := json.Marshal(dir)
	return workspaceArg.ReplaceAllLiteralString(code, "workspace="+string(q))
}

// executeMetadata is the execute_request metadata a cell ran with: its pyrualean block, with the
// sandbox on for cells the agent wrote unless the trace says otherwise.
func executeMetadata(meta notebooks.CellMeta) map[string]any {
	if meta.Sandbox == nil {
		on := meta.Author == notebooks.AuthorAgent || meta.Author == notebooks.AuthorTool
		meta.Sandbox = &on
	}
	return map[string]any{notebooks.MetaKey: meta.Map()}
}

func (r *Report) addCell(c CellReport, on func(CellReport)) {
	r.Cells = append(r.Cells, c)
	if !c.Match && r.FirstDivergent == nil {
		cp := c
		r.FirstDivergent = &cp
	}
	if on != nil {
		on(c)
	}
}

// outcome asks the replayed robot for its report and compares success with the recorded one.
// Sealed, the robot server answers (the kernel's word could be the trace's code's).
func (r *Report) outcome(ctx context.Context, c *kernel.Client, sealed *sealedKernel, trace *notebooks.Notebook) {
	r.RecordedSuccess = notebooks.ParseEpisodeMeta(trace.Metadata).Success
	if r.Partial {
		r.OutcomeNote = "partial replay: outcome not compared"
		return
	}
	if r.RecordedSuccess == nil {
		r.OutcomeNote = "the trace records no metadata.pyrualean.success"
		return
	}
	report, err := kernelOutcome(ctx, c)
	if sealed != nil {
		report, err = sealed.outcome(ctx)
	}
	if err != nil {
		r.OutcomeNote = "robot report unavailable: " + err.Error()
		r.OutcomeDiffers = true
		return
	}
	if report.Success == nil {
		r.OutcomeNote = "robot report has no success field"
		r.OutcomeDiffers = true
		return
	}
	r.OutcomeCompared = true
	r.ReplayedSuccess, r.ReplayedDone = report.Success, &report.Done
	if *report.Success != *r.RecordedSuccess {
		r.OutcomeDiffers = true
		r.OutcomeNote = fmt.Sprintf("success %v, recorded %v", *report.Success, *r.RecordedSuccess)
	}
}

// kernelOutcome asks the kernel's robot for its report (unsealed replays).
func kernelOutcome(ctx context.Context, c *kernel.Client) (*robotapi.CellReport, error) {
	res, err := c.Execute(ctx, "", kernel.ExecuteOptions{Silent: true, NoHistory: true,
		UserExpressions: map[string]string{"outcome": OutcomeExpression}, Timeout: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("could not ask the robot: %w", err)
	}
	return robotapi.DecodeCellReport(res.UserExpressions, "outcome")
}

// JSON is the report as one JSON object (for scripts and dashboards).
func (r *Report) JSON() ([]byte, error) {
	type outcome struct {
		Compared        bool   `json:"compared"`
		Same            bool   `json:"same"`
		RecordedSuccess *bool  `json:"recorded_success"`
		ReplayedSuccess *bool  `json:"replayed_success"`
		ReplayedDone    *bool  `json:"replayed_done"`
		Note            string `json:"note,omitempty"`
	}
	v := struct {
		Trace          string       `json:"trace"`
		Reproduced     bool         `json:"reproduced"`
		Partial        bool         `json:"partial"`
		FirstDivergent *CellReport  `json:"first_divergent"`
		Outcome        outcome      `json:"outcome"`
		Cells          []CellReport `json:"cells"`
		Replayed       string       `json:"replayed_notebook,omitempty"`
		Sealed         bool         `json:"sealed"`
		Seal           SealRecord   `json:"seal"`
	}{r.Trace, r.Reproduced(), r.Partial, r.FirstDivergent,
		outcome{r.OutcomeCompared, r.OutcomeCompared && !r.OutcomeDiffers, r.RecordedSuccess, r.ReplayedSuccess, r.ReplayedDone, r.OutcomeNote},
		r.Cells, r.ReplayedNotebook, r.Seal.Sealed, r.Seal}
	return json.Marshal(v)
}

// WriteText prints the report: one line per replayed cell, then the verdict.
func (r *Report) WriteText(w io.Writer) {
	for _, c := range r.Cells {
		fmt.Fprintln(w, c.Line())
	}
	fmt.Fprintln(w, r.Verdict())
}

// Line is the cell's one-line report.
func (c CellReport) Line() string {
	in := "In[ ]"
	if c.ExecutionCount != nil {
		in = fmt.Sprintf("In[%d]", *c.ExecutionCount)
	}
	who := c.Author
	if who == "" {
		who = "-"
	}
	status := "ok"
	detail := c.Stats
	if c.Skipped != "" {
		status, detail = "skipped", c.Skipped
	}
	if !c.Match {
		status, detail = "DIVERGED", c.Reason
	}
	return strings.TrimRight(fmt.Sprintf("cell %-3d %-8s %-7s %-6s %-8s %s", c.Index, c.ID, in, who, status, detail), " ")
}

// Verdict is the closing summary.
func (r *Report) Verdict() string {
	var b strings.Builder
	matched := 0
	skipped := 0
	for _, c := range r.Cells {
		switch {
		case c.Skipped != "":
			skipped++
		case c.Match:
			matched++
		}
	}
	fmt.Fprintf(&b, "%d/%d code cells reproduced", matched, len(r.Cells)-skipped)
	if skipped > 0 {
		fmt.Fprintf(&b, " (%d not compared)", skipped)
	}
	if r.FirstDivergent != nil {
		fmt.Fprintf(&b, "; first divergent cell: %d (id %s): %s", r.FirstDivergent.Index, r.FirstDivergent.ID, r.FirstDivergent.Reason)
	}
	b.WriteString("\noutcome: ")
	switch {
	case r.OutcomeCompared && !r.OutcomeDiffers:
		fmt.Fprintf(&b, "same (success=%v)", *r.ReplayedSuccess)
	case r.OutcomeDiffers:
		fmt.Fprintf(&b, "DIFFERENT: %s", r.OutcomeNote)
	default:
		fmt.Fprintf(&b, "not compared (%s)", r.OutcomeNote)
	}
	b.WriteString("\n" + r.Seal.Line())
	if r.Reproduced() {
		b.WriteString("\nREPRODUCED")
	} else {
		b.WriteString("\nDIVERGED")
	}
	return b.String()
}

package agent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
)

// cellReport is cell_report()'s JSON: what the robot saw during one cell.
type cellReport struct {
	Moved           bool             `json:"moved"`
	EnvSteps        int              `json:"env_steps"`
	EnvStepsTotal   int              `json:"env_steps_total"`
	Calls           []map[string]any `json:"calls"`
	State           map[string]any   `json:"state"`
	Done            bool             `json:"done"`
	Success         *bool            `json:"success"`
	EpisodeFinished *string          `json:"episode_finished"`
	SandboxFlags    []string         `json:"sandbox_flags"`
}

// cellRun is one executed cell as the feedback builder sees it.
type cellRun struct {
	Index     int
	Outputs   []notebooks.Output
	Status    string // ok | error | aborted | timeout
	Elapsed   time.Duration
	Report    *cellReport
	TimedOut  bool
	Restarted bool
	TimeoutS  float64
}

// humanNote tells the agent about a cell a person ran in its kernel.
type humanNote struct {
	Code   string `json:"code"`
	Output string `json:"output,omitempty"`
}

// cellFeedback is the python tool's result. Field order is the seed's key order.
type cellFeedback struct {
	Cell            int               `json:"cell"`
	Stdout          string            `json:"stdout"`
	Stderr          string            `json:"stderr"`
	ElapsedS        float64           `json:"elapsed_s"`
	Value           *string           `json:"value,omitempty"`
	Exception       *string           `json:"exception,omitempty"`
	EpisodeFinished *string           `json:"episode_finished,omitempty"`
	Images          []string          `json:"images,omitempty"`
	PrimitiveCalls  *[]map[string]any `json:"primitive_calls,omitempty"`
	Moved           *bool             `json:"moved,omitempty"`
	EnvSteps        *int              `json:"env_steps,omitempty"`
	State           map[string]any    `json:"state,omitempty"`
	EpisodeDone     *bool             `json:"episode_done,omitempty"`
	HumanCells      []humanNote       `json:"human_cells,omitempty"`
}

// encodeFeedback renders a result as indented JSON without HTML escaping, capped at MaxTextChars.
func encodeFeedback(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf(`{"error": "cannot encode result: %s"}`, err)
	}
	return capText(strings.TrimRight(buf.String(), "\n"))
}

// errorText renders a toolkit error the seed's way: {"error": "..."}.
func errorText(msg string, extra ...any) string {
	m := map[string]any{"error": msg}
	for i := 0; i+1 < len(extra); i += 2 {
		m[fmt.Sprint(extra[i])] = extra[i+1]
	}
	return encodeFeedback(m)
}

// cellText collects a cell's streams, value and error from its nbformat outputs.
type cellText struct {
	stdout, stderr string
	value          *string
	ename, evalue  string
	traceback      string
	hasError       bool
}

func collectText(outs []notebooks.Output) cellText {
	var ct cellText
	var so, se strings.Builder
	for _, o := range outs {
		switch o.OutputType {
		case notebooks.OutputStream:
			if o.Name == "stderr" {
				se.WriteString(o.Text)
			} else {
				so.WriteString(o.Text)
			}
		case notebooks.OutputExecuteResult:
			if v, ok := o.Data["text/plain"].(string); ok {
				v = TrimMiddle(StripANSI(v), ValueCapChars)
				ct.value = &v
			}
		case notebooks.OutputError:
			ct.hasError = true
			ct.ename, ct.evalue = o.Ename, o.Evalue
			ct.traceback = joinTraceback(o.Traceback, o.Ename, o.Evalue)
		}
	}
	ct.stdout = TrimMiddle(StripANSI(so.String()), StreamCapChars)
	ct.stderr = TrimMiddle(StripANSI(se.String()), StreamCapChars)
	return ct
}

// imageSource reads metadata.pyrualean.{source,camera} of an image output; images without it (a
// matplotlib figure, IPython.display.Image) count as display().
func imageSource(o notebooks.Output) (source, camera string) {
	source = "display"
	if pm, ok := o.Metadata[notebooks.MetaKey].(map[string]any); ok {
		if s, ok := pm["source"].(string); ok && s != "" {
			source = s
		}
		camera, _ = pm["camera"].(string)
	}
	return source, camera
}

// selectImages applies the image policy to a cell's image outputs (seed §2 step 9): on-motion keeps
// the robot's motion images, on-demand the cameras robo.show() asked for (deduplicated), none
// neither; display() images are always kept.
func selectImages(outs []notebooks.Output, policy string) []Image {
	var imgs []Image
	seen := map[string]bool{}
	displays := 0
	for _, o := range outs {
		if o.OutputType != notebooks.OutputDisplayData && o.OutputType != notebooks.OutputExecuteResult {
			continue
		}
		b64, ok := o.Data["image/png"].(string)
		if !ok {
			continue
		}
		png, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			continue
		}
		source, camera := imageSource(o)
		var name string
		switch source {
		case "on-motion":
			if policy != ImagesOnMotion {
				continue
			}
			name = camera
		case "show":
			if policy != ImagesOnDemand {
				continue
			}
			name = camera
		default:
			name = fmt.Sprintf("display_%d", displays)
			displays++
		}
		if name == "" {
			name = fmt.Sprintf("image_%d", len(imgs))
		}
		if !strings.HasSuffix(name, ".png") {
			name += ".png"
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		imgs = append(imgs, Image{Name: name, PNG: png})
	}
	return imgs
}

// ledgerSummary keeps what the model needs of a ledger record (seed: tool, kwargs, ok, error, summary).
func ledgerSummary(calls []map[string]any) []map[string]any {
	out := []map[string]any{}
	for _, c := range calls {
		if c["tool"] == "artifact" {
			continue
		}
		m := map[string]any{}
		for _, k := range []string{"tool", "kwargs", "ok", "error", "summary"} {
			if v, ok := c[k]; ok && v != nil {
				m[k] = v
			}
		}
		out = append(out, m)
	}
	if len(out) > 40 {
		out = out[len(out)-40:]
	}
	return out
}

// buildCellFeedback turns one executed cell into the python tool's result.
func buildCellFeedback(run cellRun, feedback, images string, humans []humanNote) (ToolResult, cellFeedback) {
	ct := collectText(run.Outputs)
	fb := cellFeedback{
		Cell: run.Index, Stdout: ct.stdout, Stderr: ct.stderr,
		ElapsedS: float64(int64(run.Elapsed.Seconds()*100+0.5)) / 100, Value: ct.value, HumanCells: humans,
	}
	if ct.hasError {
		if ct.ename == "EpisodeFinished" {
			reason := strings.TrimSpace(ct.evalue)
			if run.Report != nil && run.Report.EpisodeFinished != nil {
				reason = *run.Report.EpisodeFinished
			}
			if reason == "" {
				reason = "terminated"
			}
			fb.EpisodeFinished = &reason
		} else {
			exc := TrimMiddle(ct.traceback, ValueCapChars)
			if ct.ename == "SandboxError" {
				exc = "SandboxError: " + ct.evalue
			}
			fb.Exception = &exc
		}
	}
	if run.TimedOut {
		msg := fmt.Sprintf("TimeoutError: the cell ran past its %.0f s limit and was interrupted; the output above is partial.", run.TimeoutS)
		if run.Restarted {
			msg += " The kernel did not stop and was RESTARTED: every variable is lost and the robot must be set up again."
		}
		if fb.Exception != nil {
			msg = *fb.Exception + "\n" + msg
		}
		fb.Exception = &msg
	}
	if fb.EpisodeFinished == nil && run.Report != nil && run.Report.EpisodeFinished != nil && *run.Report.EpisodeFinished != "" {
		fb.EpisodeFinished = run.Report.EpisodeFinished
	}
	imgs := selectImages(run.Outputs, images)
	for _, im := range imgs {
		fb.Images = append(fb.Images, im.Name)
	}
	if feedback != FeedbackPure {
		r := run.Report
		if r == nil {
			r = &cellReport{}
		}
		calls := ledgerSummary(r.Calls)
		fb.PrimitiveCalls = &calls
		moved, steps, done := r.Moved, r.EnvSteps, r.Done
		fb.Moved, fb.EnvSteps, fb.EpisodeDone = &moved, &steps, &done
		fb.State = r.State
		if fb.State == nil {
			fb.State = map[string]any{}
		}
	}
	res := ToolResult{Text: encodeFeedback(fb), Images: imgs}
	if fb.EpisodeFinished != nil {
		res.Finished = true
	}
	return res, fb
}

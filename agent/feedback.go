package agent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/spec"
)

// reportState is the report's state in the robot's key order ({} when there is none).
func reportState(r *cellReport) any {
	if v, err := decodeOrdered(r.RawState); err == nil && v != nil {
		return v
	}
	if r.State != nil {
		return r.State
	}
	return map[string]any{}
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
	Notes     []string // plain words about what people did to this cell (a person interrupted it)
	Between   int      // robot calls the agent's code made between cells, counted with this one
	// Omitted is what the per-cell output limits dropped (marked in the text where it was);
	// Incomplete: the cell ended without the kernel's idle, so its last outputs may be missing.
	Omitted    kernel.OutputOmission
	Incomplete bool
	File       string // run_program: the program's file in the workspace
	// Labels name cells by execution count for tracebacks ("<cell 3>", "<a person's cell 1>").
	Labels map[int]string
}

// outputNotes are plain words about a cell's output the model must know: what the limits dropped,
// what may be missing, and robot calls made between cells that this result counts.
func outputNotes(run cellRun) []string {
	var notes []string
	if o := run.Omitted; o.Any() {
		notes = append(notes, fmt.Sprintf("The cell printed more than a cell may keep: %d bytes of text and %d outputs were "+
			"omitted from the middle (the beginning and the end are kept; the omission is marked where it was).", o.StreamBytes, o.Outputs))
	}
	if run.Incomplete {
		notes = append(notes, "The kernel did not say the cell ended: its last outputs may be missing.")
	}
	if run.Between > 0 {
		notes = append(notes, fmt.Sprintf("%d robot call(s) were made between cells by code you left running; they are counted with this cell.", run.Between))
	}
	return notes
}

// personNote tells the agent about a cell a person ran in its kernel and what it did to the robot
// (the person's calls and steps: never counted as the agent's).
type personNote struct {
	Cell     int      `json:"cell"` // the person's cell number in the episode
	Code     string   `json:"code"`
	Output   string   `json:"output,omitempty"`
	Moved    bool     `json:"moved"`
	EnvSteps int      `json:"env_steps,omitempty"`
	Calls    []string `json:"primitive_calls,omitempty"` // the primitives the person called, in order

	images []Image // fresh camera images per the image policy (not in the JSON: attached)
	state  any     // the robot's state after the cell
}

// cellFeedback is the python tool's result. Field order is the original's key order (arms._python and
// _feedback): cell, value, exception or episode_finished, the streams, elapsed_s, then (rich) the ledger
// and state, then the names of the attached images. human_cells is ours (cells a person ran).
type cellFeedback struct {
	Cell            int          `json:"cell"`
	Value           *string      `json:"value,omitempty"`
	Exception       *string      `json:"exception,omitempty"`
	EpisodeFinished *string      `json:"episode_finished,omitempty"`
	Stdout          string       `json:"stdout"`
	Stderr          string       `json:"stderr"`
	ElapsedS        float64      `json:"elapsed_s"`
	PrimitiveCalls  *[]any       `json:"primitive_calls,omitempty"`
	Moved           *bool        `json:"moved,omitempty"`
	EnvSteps        *int         `json:"env_steps,omitempty"`
	State           any          `json:"state,omitempty"`
	EpisodeDone     *bool        `json:"episode_done,omitempty"`
	Images          []string     `json:"images,omitempty"`
	Notes           []string     `json:"notes,omitempty"`
	HumanCells      []personNote `json:"human_cells,omitempty"`
}

// resultStyle is how a prompt profile reads results.
type resultStyle struct {
	depth int // how deep a result's JSON breaks its lines (shallowIndent)
	// robotFrames keeps the robot package's frames in a cell's traceback, as the original's in-kernel
	// robot shows its library's; the compact profile leaves them out (robotFrameRE).
	robotFrames bool
}

var (
	// styleOriginal: every level indented by two, the original's json.dumps(indent=2).
	styleOriginal = resultStyle{depth: 1 << 20, robotFrames: true}
	// styleCompact: one line per primitive call and per state field; no robot frames, which carry
	// host paths and ~60 tokens per robot error that the error's own line already says.
	styleCompact = resultStyle{depth: 2}
)

// styleOf is the style a prompt profile reads results in.
func styleOf(profile string) resultStyle {
	if profile == spec.ProfileCompact {
		return styleCompact
	}
	return styleOriginal
}

// encodeFeedback renders a result as indented JSON without HTML escaping, capped at MaxTextChars.
func encodeFeedback(v any) string { return encodeFeedbackAt(v, styleOriginal.depth) }

// encodeFeedbackAt is encodeFeedback in a layout: laid out first, then capped, so a result that only the
// original's indentation makes too long stays whole in a shallower one.
func encodeFeedbackAt(v any, depth int) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf(`{"error": "cannot encode result: %s"}`, err)
	}
	b, err := shallowIndent(buf.Bytes(), depth)
	if err != nil {
		return fmt.Sprintf(`{"error": "cannot encode result: %s"}`, err)
	}
	return capText(string(b))
}

// shallowIndent lays out a JSON document with line breaks only down to maxDepth: at 1 each member of
// the top-level object on its line, at 2 also each member or element of the values they hold; anything
// deeper on one line, with a space after ':' and ','. The compact prompt profile reads results this way:
// a cell's primitive_calls become one line per call instead of one line per number. Key order, numbers and strings stay byte for byte; a large maxDepth gives
// json.Indent's layout with "  ".
func shallowIndent(src []byte, maxDepth int) ([]byte, error) {
	var c bytes.Buffer
	if err := json.Compact(&c, src); err != nil {
		return nil, err
	}
	b := c.Bytes()
	out := bytes.NewBuffer(make([]byte, 0, len(b)+len(b)/4))
	newline := func(depth int) {
		out.WriteByte('\n')
		for range depth {
			out.WriteString("  ")
		}
	}
	depth, inString, escaped := 0, false, false
	for i, ch := range b {
		if inString {
			out.WriteByte(ch)
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
			continue
		}
		switch ch {
		case '"':
			inString = true
			out.WriteByte(ch)
		case '{', '[':
			out.WriteByte(ch)
			depth++
			if depth <= maxDepth && b[i+1] != '}' && b[i+1] != ']' { // compact JSON: a container is never last
				newline(depth)
			}
		case '}', ']':
			if depth <= maxDepth && b[i-1] != '{' && b[i-1] != '[' {
				newline(depth - 1)
			}
			depth--
			out.WriteByte(ch)
		case ',':
			out.WriteByte(ch)
			if depth <= maxDepth {
				newline(depth)
			} else {
				out.WriteByte(' ')
			}
		case ':':
			out.WriteString(": ")
		default:
			out.WriteByte(ch)
		}
	}
	return out.Bytes(), nil
}

// errorText renders a toolkit error the original's way: {"error": "..."}.
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
	traceback      []string // IPython's, joined by joinTraceback in the result's style
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
			ct.traceback = o.Traceback
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

// selectImages applies the image policy to a cell's image outputs (the original's §2 step 9): on-motion keeps
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
			if policy != spec.ImagesOnMotion {
				continue
			}
			name = camera
		case "show":
			if policy != spec.ImagesOnDemand {
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
		// Camera images are named like files (agentview.png), display() images display_N (the original's names).
		if source != "display" && !strings.HasSuffix(name, ".png") {
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

// maxFeedbackCalls is how many of a cell's primitive calls the model reads (the newest; the original's arms.py).
const maxFeedbackCalls = 40

// ledgerSummary is the original's primitive_calls: per call tool, kwargs, ok, error, then the result's
// summary fields flattened in (eef_pos left out); artifact reads are not listed.
func ledgerSummary(r *cellReport) []any {
	out := []any{}
	for i, c := range r.Calls {
		if c["tool"] == "artifact" {
			continue
		}
		var rec *jsonObject
		if len(r.RawCalls) == len(r.Calls) {
			if v, err := decodeOrdered(r.RawCalls[i]); err == nil {
				rec, _ = v.(*jsonObject)
			}
		}
		if rec == nil { // no raw record: same fields, Go's key order
			b, _ := json.Marshal(c)
			v, _ := decodeOrdered(b)
			rec, _ = v.(*jsonObject)
		}
		if rec == nil {
			continue
		}
		item := &jsonObject{}
		for _, k := range []string{"tool", "kwargs", "ok", "error"} {
			v, _ := rec.get(k)
			item.set(k, v)
		}
		if sum, ok := rec.get("summary"); ok {
			if so, ok := sum.(*jsonObject); ok {
				for j, k := range so.keys {
					if k != "eef_pos" {
						item.set(k, so.vals[j])
					}
				}
			}
		}
		out = append(out, item)
	}
	if len(out) > maxFeedbackCalls {
		out = out[len(out)-maxFeedbackCalls:]
	}
	return out
}

// buildCellFeedback turns one executed cell into the python tool's result.
func buildCellFeedback(run cellRun, feedback, images string, people []personNote, style resultStyle) (ToolResult, cellFeedback) {
	ct := collectText(run.Outputs)
	fb := cellFeedback{
		Cell: run.Index, Stdout: ct.stdout, Stderr: ct.stderr,
		ElapsedS: float64(int64(run.Elapsed.Seconds()*100+0.5)) / 100, Value: ct.value, HumanCells: people,
		Notes: append(append([]string(nil), run.Notes...), outputNotes(run)...),
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
			exc := TrimMiddle(relabelCells(joinTraceback(ct.traceback, ct.ename, ct.evalue, style.robotFrames), run.Labels), ValueCapChars)
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
	if feedback != spec.FeedbackPure {
		r := run.Report
		if r == nil {
			r = &cellReport{}
		}
		calls := ledgerSummary(r)
		fb.PrimitiveCalls = &calls
		moved, steps, done := r.Moved, r.EnvSteps, r.Done
		fb.Moved, fb.EnvSteps, fb.EpisodeDone = &moved, &steps, &done
		fb.State = reportState(r)
	}
	return ToolResult{Text: encodeFeedbackAt(fb, style.depth), Images: imgs, EpisodeDone: fb.EpisodeFinished != nil}, fb
}

// jsonObject is a JSON object that keeps its keys in the order they were read or added, so what the
// model reads keeps the robot's (Python dict) order instead of Go's sorted map order.
type jsonObject struct {
	keys []string
	vals []any
}

func (o *jsonObject) set(k string, v any) {
	for i, key := range o.keys {
		if key == k {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

// Len and At let pylit render the object as a Python dict, keys in order.
func (o *jsonObject) Len() int               { return len(o.keys) }
func (o *jsonObject) At(i int) (string, any) { return o.keys[i], o.vals[i] }

func (o *jsonObject) get(k string) (any, bool) {
	for i, key := range o.keys {
		if key == k {
			return o.vals[i], true
		}
	}
	return nil, false
}

// MarshalJSON writes the keys in order, without HTML escaping (like encodeFeedback).
func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	out := []byte{'{'}
	for i, k := range o.keys {
		if i > 0 {
			out = append(out, ',')
		}
		for j, v := range []any{k, o.vals[i]} {
			buf.Reset()
			if err := enc.Encode(v); err != nil {
				return nil, err
			}
			out = append(out, bytes.TrimRight(buf.Bytes(), "\n")...)
			if j == 0 {
				out = append(out, ':')
			}
		}
	}
	return append(out, '}'), nil
}

// decodeOrdered decodes JSON keeping object key order (objects become *jsonObject, numbers json.Number).
func decodeOrdered(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &jsonObject{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o.set(k, v)
			}
			_, err := dec.Token()
			return o, err
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return list, err
		}
		return nil, fmt.Errorf("unexpected delimiter %v", t)
	default:
		return tok, nil
	}
}

// toolFeedback is a primitive call's result in the tools arm (RPent-style: result, state, images).
type toolFeedback struct {
	Tool            string       `json:"tool"`
	OK              bool         `json:"ok"`
	Result          *string      `json:"result,omitempty"`
	Error           *string      `json:"error,omitempty"`
	Stdout          string       `json:"stdout,omitempty"`
	Moved           bool         `json:"moved"`
	EnvSteps        int          `json:"env_steps"`
	State           any          `json:"state"`
	EpisodeDone     bool         `json:"episode_done"`
	EpisodeFinished *string      `json:"episode_finished,omitempty"`
	Images          []string     `json:"images,omitempty"`
	HumanCells      []personNote `json:"human_cells,omitempty"`
}

func buildToolFeedback(run cellRun, tool, images string, people []personNote, style resultStyle) ToolResult {
	ct := collectText(run.Outputs)
	fb := toolFeedback{Tool: tool, OK: !ct.hasError && !run.TimedOut, Result: ct.value, Stdout: ct.stdout, HumanCells: people, State: map[string]any{}}
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
	return ToolResult{Text: encodeFeedbackAt(fb, style.depth), Images: imgs, EpisodeDone: fb.EpisodeFinished != nil}
}

// cellNames names the episode's cells by execution count, as tracebacks should (relabelCells): the
// agent's "<cell 3>", a person's "<a person's cell 1>".
type cellNames struct {
	mu    sync.Mutex
	names map[int]string
}

// add names the cell that ran with execution count n (nil: none) and returns every name so far.
func (c *cellNames) add(n *int, name string) map[int]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil {
		c.names = map[int]string{}
	}
	if n != nil {
		c.names[*n] = name
	}
	return maps.Clone(c.names)
}

package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/pyrualean/pyrualean/notebooks"
)

// outputs assembles one cell's iopub messages into nbformat outputs, as nbclient and JupyterLab do:
// consecutive streams of one name merge, clear_output(wait=True) waits for the next output,
// update_display_data replaces every output with its display_id, transient is dropped.
type outputs struct {
	list         []notebooks.Output
	clearPending bool
	// updates for display ids this cell did not show (they belong to earlier cells)
	foreignUpdates []notebooks.Output
}

// decodeTree decodes JSON into generic values with json.Number leaves, so numbers survive unchanged.
func decodeTree(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

// messageOutput converts one iopub message to an output; ok is false for messages that are not outputs.
func messageOutput(m *Message) (o notebooks.Output, ok bool, err error) {
	switch m.MsgType {
	case "stream", "display_data", "update_display_data", "execute_result", "error":
	default:
		return o, false, nil
	}
	f, err := objectFields(m.Content)
	if err != nil {
		return o, false, fmt.Errorf("%s: %w", m.MsgType, err)
	}
	str := func(k string) (string, error) {
		if raw, ok := f[k]; ok && len(raw) > 0 && raw[0] == '"' {
			return jsonString(raw)
		}
		return "", nil
	}
	switch m.MsgType {
	case "stream":
		o.OutputType = notebooks.OutputStream
		if o.Name, err = str("name"); err == nil {
			o.Text, err = str("text")
		}
		return o, err == nil, err
	case "error":
		o.OutputType = notebooks.OutputError
		if o.Ename, err = str("ename"); err == nil {
			o.Evalue, err = str("evalue")
		}
		o.Traceback = []string{}
		if raw, ok := f["traceback"]; ok && err == nil {
			if e := json.Unmarshal(raw, &o.Traceback); e != nil || o.Traceback == nil {
				o.Traceback = []string{}
			}
		}
		return o, err == nil, err
	}
	o = notebooks.Output{OutputType: notebooks.OutputDisplayData, Data: notebooks.MimeBundle{}, Metadata: map[string]any{}}
	if raw, ok := f["data"]; ok {
		df, err := objectFields(raw)
		if err != nil {
			return o, false, fmt.Errorf("%s data: %w", m.MsgType, err)
		}
		for mime, v := range df {
			if o.Data[mime], err = jsonValue(v); err != nil {
				return o, false, fmt.Errorf("%s data %s: %w", m.MsgType, mime, err)
			}
		}
	}
	if raw, ok := f["metadata"]; ok {
		if err := decodeTree(raw, &o.Metadata); err != nil {
			return o, false, fmt.Errorf("%w: %s metadata: %v", ErrMalformed, m.MsgType, err)
		}
		if o.Metadata == nil {
			o.Metadata = map[string]any{}
		}
	}
	if raw, ok := f["transient"]; ok {
		var t struct {
			DisplayID string `json:"display_id"`
		}
		_ = json.Unmarshal(raw, &t)
		o.DisplayID = t.DisplayID
	}
	if m.MsgType == "execute_result" {
		o.OutputType = notebooks.OutputExecuteResult
		if raw, ok := f["execution_count"]; ok {
			var n *int
			if json.Unmarshal(raw, &n) == nil {
				o.ExecutionCount = n
			}
		}
	}
	return o, true, nil
}

// add applies one iopub message; it returns the output to stream to a callback, if any.
func (b *outputs) add(m *Message) (*notebooks.Output, error) {
	if m.MsgType == "clear_output" {
		var c struct{ Wait bool }
		_ = json.Unmarshal(m.Content, &c)
		if c.Wait {
			b.clearPending = true
		} else {
			b.list, b.clearPending = nil, false
		}
		return nil, nil
	}
	o, ok, err := messageOutput(m)
	if err != nil || !ok {
		return nil, err
	}
	if m.MsgType == "update_display_data" {
		if o.DisplayID == "" || !b.update(o) {
			b.foreignUpdates = append(b.foreignUpdates, o)
		}
		return &o, nil
	}
	if b.clearPending {
		b.list, b.clearPending = nil, false
	}
	if o.OutputType == notebooks.OutputDisplayData && o.DisplayID != "" {
		b.update(o) // a display with a known id updates the earlier ones and is also appended
	}
	if o.OutputType == notebooks.OutputStream && len(b.list) > 0 {
		last := &b.list[len(b.list)-1]
		if last.OutputType == notebooks.OutputStream && last.Name == o.Name {
			last.Text += o.Text
			return &o, nil
		}
	}
	b.list = append(b.list, o)
	return &o, nil
}

func (b *outputs) update(o notebooks.Output) bool {
	found := false
	for i := range b.list {
		if b.list[i].DisplayID == o.DisplayID {
			b.list[i].Data, b.list[i].Metadata = o.Data, o.Metadata
			found = true
		}
	}
	return found
}

var backspace = regexp.MustCompile(`[^\n]\x08`)

// final returns the outputs with \r and \b applied in stream text (nbclient's coalesce_streams), so a
// progress bar ends as its last state.
func (b *outputs) final() []notebooks.Output {
	for i := range b.list {
		o := &b.list[i]
		if o.OutputType != notebooks.OutputStream {
			continue
		}
		if strings.Contains(o.Text, "\r") {
			o.Text = applyCR(o.Text)
		}
		for strings.Contains(o.Text, "\b") {
			t := backspace.ReplaceAllString(o.Text, "")
			if t == o.Text {
				break
			}
			o.Text = t
		}
	}
	return b.list
}

// applyCR keeps, on each line, what follows its last carriage return that is not line-final.
func applyCR(s string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		body, nl := strings.CutSuffix(l, "\n")
		trail := ""
		for strings.HasSuffix(body, "\r") { // "\r\n" line ends stay
			body, trail = body[:len(body)-1], trail+"\r"
		}
		if j := strings.LastIndex(body, "\r"); j >= 0 {
			body = body[j+1:]
		}
		lines[i] = body + trail
		if nl {
			lines[i] += "\n"
		}
	}
	return strings.Join(lines, "")
}

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

type mimeContent struct {
	Data           json.RawMessage `json:"data"`
	Metadata       json.RawMessage `json:"metadata"`
	ExecutionCount *int            `json:"execution_count"`
	Transient      struct {
		DisplayID string `json:"display_id"`
	} `json:"transient"`
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

// output converts one iopub message to an output; ok is false for messages that are not outputs.
func messageOutput(m *Message) (o notebooks.Output, ok bool, err error) {
	switch m.MsgType {
	case "stream":
		var c struct{ Name, Text string }
		if err := json.Unmarshal(m.Content, &c); err != nil {
			return o, false, fmt.Errorf("%w: stream: %v", ErrMalformed, err)
		}
		return notebooks.Output{OutputType: notebooks.OutputStream, Name: c.Name, Text: c.Text}, true, nil
	case "display_data", "update_display_data", "execute_result":
		var c mimeContent
		if err := json.Unmarshal(m.Content, &c); err != nil {
			return o, false, fmt.Errorf("%w: %s: %v", ErrMalformed, m.MsgType, err)
		}
		o = notebooks.Output{OutputType: notebooks.OutputDisplayData, DisplayID: c.Transient.DisplayID,
			Data: notebooks.MimeBundle{}, Metadata: map[string]any{}}
		if err := decodeTree(c.Data, &o.Data); err != nil {
			return o, false, fmt.Errorf("%w: %s data: %v", ErrMalformed, m.MsgType, err)
		}
		if err := decodeTree(c.Metadata, &o.Metadata); err != nil {
			return o, false, fmt.Errorf("%w: %s metadata: %v", ErrMalformed, m.MsgType, err)
		}
		if o.Data == nil {
			o.Data = notebooks.MimeBundle{}
		}
		if o.Metadata == nil {
			o.Metadata = map[string]any{}
		}
		if m.MsgType == "execute_result" {
			o.OutputType = notebooks.OutputExecuteResult
			o.ExecutionCount = c.ExecutionCount
		}
		return o, true, nil
	case "error":
		var c struct {
			Ename, Evalue string
			Traceback     []string
		}
		if err := json.Unmarshal(m.Content, &c); err != nil {
			return o, false, fmt.Errorf("%w: error: %v", ErrMalformed, err)
		}
		if c.Traceback == nil {
			c.Traceback = []string{}
		}
		return notebooks.Output{OutputType: notebooks.OutputError, Ename: c.Ename, Evalue: c.Evalue, Traceback: c.Traceback}, true, nil
	}
	return o, false, nil
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

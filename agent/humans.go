package agent

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
)

// watchHumans records cells that other clients (a person in JupyterLab through the gateway) run on
// the episode's kernel: they are seen on iopub as execute_input whose parent belongs to a foreign
// session. Each one goes into the trace (author "human") and is summarised to the agent in its next
// feedback.
func (e *Episode) watchHumans() {
	client := e.kern.Client()
	msgs, cancel := client.Subscribe(1024)
	e.stopHumans = cancel
	e.humansDone = make(chan struct{})
	own := client.Session()
	go func() {
		defer close(e.humansDone)
		pending := map[string]*humanCell{}
		for m := range msgs {
			if m.Channel != kernel.Channel("iopub") || m.ParentMsgID == "" {
				continue
			}
			hc := pending[m.ParentMsgID]
			if m.MsgType == "execute_input" {
				if parentSession(m.ParentHeader) == own {
					continue
				}
				var c struct {
					Code           string `json:"code"`
					ExecutionCount *int   `json:"execution_count"`
				}
				_ = json.Unmarshal(m.Content, &c)
				pending[m.ParentMsgID] = &humanCell{code: c.Code, count: c.ExecutionCount}
				continue
			}
			if hc == nil {
				continue
			}
			if m.MsgType == "status" {
				var st struct {
					ExecutionState string `json:"execution_state"`
				}
				_ = json.Unmarshal(m.Content, &st)
				if st.ExecutionState == "idle" {
					delete(pending, m.ParentMsgID)
					e.recordHuman(hc)
				}
				continue
			}
			if m.MsgType == "update_display_data" {
				if o, ok := iopubOutput(m); ok && o.DisplayID != "" {
					hc.updateDisplay(e, o)
				}
				continue
			}
			if o, ok := iopubOutput(m); ok {
				if o.DisplayID != "" && o.OutputType != notebooks.OutputStream {
					hc.updateOwn(o) // shown again under its id: earlier outputs follow (earlier cells: AddCode)
				}
				hc.outputs = append(hc.outputs, o)
			}
		}
		// The client closed or Finish stopped us: keep whatever a person was running.
		for _, hc := range pending {
			e.recordHuman(hc)
		}
	}()
}

// humanWatch stops the watcher and says when it has recorded everything.
type humanWatch struct {
	stopHumans func()
	humansDone chan struct{}
}

type humanCell struct {
	code    string
	count   *int
	outputs []notebooks.Output
}

// updateDisplay applies a person's update_display_data: to this cell's own outputs with that display
// id, or else to the trace's earlier cells.
func (hc *humanCell) updateDisplay(e *Episode, u notebooks.Output) {
	if !hc.updateOwn(u) {
		e.applyDisplayUpdates([]notebooks.Output{u})
	}
}

// updateOwn replaces data and metadata of this cell's outputs with u's display id.
func (hc *humanCell) updateOwn(u notebooks.Output) bool {
	found := false
	for i := range hc.outputs {
		if hc.outputs[i].DisplayID == u.DisplayID {
			hc.outputs[i].Data, hc.outputs[i].Metadata = u.Data, u.Metadata
			found = true
		}
	}
	return found
}

func (e *Episode) recordHuman(hc *humanCell) {
	outs := mergeStreams(hc.outputs)
	_ = e.trace.AddCode(hc.code, notebooks.CodeRun{Outputs: outs, ExecutionCount: hc.count},
		notebooks.CellMeta{Author: notebooks.AuthorHuman}.Map())
	ct := collectText(outs)
	summary := ct.stdout
	if ct.value != nil {
		summary += *ct.value
	}
	if ct.hasError {
		summary += ct.ename + ": " + ct.evalue
	}
	e.mu.Lock()
	e.humans = append(e.humans, humanNote{Code: TrimMiddle(hc.code, 2000), Output: TrimMiddle(strings.TrimSpace(summary), 1000)})
	e.res.HumanCells++
	e.mu.Unlock()
	_ = e.saveResult()
}

func parentSession(raw json.RawMessage) string {
	var h struct {
		Session string `json:"session"`
	}
	_ = json.Unmarshal(raw, &h)
	return h.Session
}

// iopubOutput converts an output-bearing iopub message to an nbformat output.
func iopubOutput(m *kernel.Message) (notebooks.Output, bool) {
	var c struct {
		Name           string         `json:"name"`
		Text           string         `json:"text"`
		Data           map[string]any `json:"data"`
		Metadata       map[string]any `json:"metadata"`
		ExecutionCount *int           `json:"execution_count"`
		Ename          string         `json:"ename"`
		Evalue         string         `json:"evalue"`
		Traceback      []string       `json:"traceback"`
		Transient      struct {
			DisplayID string `json:"display_id"`
		} `json:"transient"`
	}
	dec := json.NewDecoder(bytes.NewReader(m.Content))
	dec.UseNumber() // numbers in data and metadata are written back exactly as the kernel sent them
	if dec.Decode(&c) != nil {
		return notebooks.Output{}, false
	}
	switch m.MsgType {
	case "stream":
		return notebooks.Output{OutputType: notebooks.OutputStream, Name: c.Name, Text: c.Text}, true
	case "display_data", "update_display_data":
		return notebooks.Output{OutputType: notebooks.OutputDisplayData, Data: c.Data, Metadata: c.Metadata, DisplayID: c.Transient.DisplayID}, true
	case "execute_result":
		return notebooks.Output{OutputType: notebooks.OutputExecuteResult, Data: c.Data, Metadata: c.Metadata, ExecutionCount: c.ExecutionCount, DisplayID: c.Transient.DisplayID}, true
	case "error":
		return notebooks.Output{OutputType: notebooks.OutputError, Ename: c.Ename, Evalue: c.Evalue, Traceback: c.Traceback}, true
	}
	return notebooks.Output{}, false
}

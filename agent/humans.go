package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
)

// watchHumans records cells that other clients (a person in JupyterLab through the gateway) run on
// the episode's kernel: they are seen on iopub as execute_input whose parent belongs to a foreign
// session. Each one goes into the trace (author "human", tag "human"), its robot calls are accounted
// to it (settleHuman, accounting.go), and it is told to the agent before its next decision
// (AwaitTurn) or in its next feedback.
func (e *Episode) watchHumans() {
	client := e.kern.Client()
	msgs, cancel := client.Subscribe(1024)
	e.stopHumans = cancel
	e.humansDone = make(chan struct{})
	e.settleCtx, e.stopSettling = context.WithCancel(context.Background())
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
				hc := &humanCell{code: c.Code, count: c.ExecutionCount, msgID: m.ParentMsgID, start: m.Date()}
				hc.n = e.humanStarted(hc.start)
				pending[m.ParentMsgID] = hc
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
					e.endSpan(hc.n, m.Date())
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
	stopHumans   func()
	humansDone   chan struct{}
	settleCtx    context.Context // ends when Finish no longer waits for people's cells to be accounted
	stopSettling context.CancelFunc
}

type humanCell struct {
	n       int // the person's cell number in the episode
	code    string
	count   *int
	msgID   string
	start   time.Time
	outputs []notebooks.Output
	id      string // its trace cell's id
	summary string
}

// humanStarted numbers a person's cell that started and counts it as running until it is accounted.
func (e *Episode) humanStarted(start time.Time) int {
	e.mu.Lock()
	e.humanSeq++
	n := e.humanSeq
	e.setHumansRunningLocked(e.humansRunning + 1)
	e.mu.Unlock()
	e.addSpan(execSpan{human: n, start: start})
	return n
}

func (e *Episode) setHumansRunningLocked(n int) {
	e.humansRunning = n
	if e.humansChanged == nil {
		e.humansChanged = make(chan struct{})
	}
	close(e.humansChanged)
	e.humansChanged = make(chan struct{})
}

// waitHumans waits until no person's cell is running or being accounted (or ctx ends).
func (e *Episode) waitHumans(ctx context.Context) error {
	for {
		e.mu.Lock()
		if e.humansRunning <= 0 {
			e.mu.Unlock()
			return nil
		}
		if e.humansChanged == nil {
			e.humansChanged = make(chan struct{})
		}
		ch := e.humansChanged
		e.mu.Unlock()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		}
	}
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

// recordHuman writes a person's cell to the trace as it ends (so the trace keeps execution order),
// then accounts its robot calls in the background.
func (e *Episode) recordHuman(hc *humanCell) {
	outs := mergeStreams(hc.outputs)
	hc.outputs = outs
	tags := []string{notebooks.TagHuman}
	if raised(outs) {
		tags = append(tags, notebooks.TagRaisesException)
	}
	hc.id = notebooks.NewCellID()
	if err := e.trace.AddCode(hc.code, notebooks.CodeRun{ID: hc.id, Outputs: outs, ExecutionCount: hc.count, Tags: tags},
		notebooks.CellMeta{Author: notebooks.AuthorHuman, HumanCell: hc.n, MsgID: hc.msgID}.Map()); err != nil {
		e.log.Warn("trace: a person's cell", "err", err)
	}
	ct := collectText(outs)
	summary := ct.stdout
	if ct.value != nil {
		summary += *ct.value
	}
	if ct.hasError {
		summary += ct.ename + ": " + ct.evalue
	}
	hc.summary = summary
	go e.settleHuman(hc)
}

// settleHuman accounts a person's cell: once no agent cell runs (callMu), it takes the robot's
// report, puts each call under the cell that made it, records the person's ledger on their trace
// cell and keeps a note (with fresh images per the image policy) for the agent.
func (e *Episode) settleHuman(hc *humanCell) {
	defer func() {
		e.mu.Lock()
		e.setHumansRunningLocked(e.humansRunning - 1)
		e.mu.Unlock()
	}()
	e.callMu.Lock()
	e.mu.Lock()
	ended := e.accountingOver
	e.mu.Unlock()
	var r *cellReport
	if !ended {
		ctx, cancel := context.WithTimeout(e.settleCtx, 60*time.Second)
		r = e.humanReport(ctx)
		cancel()
		e.account(r, owner{human: hc.n})
	}
	e.callMu.Unlock()

	e.mu.Lock()
	t := e.tallyLocked(hc.n)
	ledger, tools := t.ledger, append([]string(nil), t.tools...)
	e.mu.Unlock()
	if err := e.trace.PatchCellMeta(hc.id, notebooks.CellMeta{Ledger: &ledger}.Map()); err != nil && !ended {
		e.log.Warn("trace: a person's ledger", "err", err)
	}
	note := humanNote{Cell: hc.n, Code: TrimMiddle(hc.code, 2000), Output: TrimMiddle(strings.TrimSpace(StripANSI(hc.summary)), 1000),
		Moved: ledger.EnvSteps > 0, EnvSteps: ledger.EnvSteps, Calls: tools}
	if len(note.Calls) > maxFeedbackCalls {
		note.Calls = note.Calls[len(note.Calls)-maxFeedbackCalls:]
	}
	note.images = selectImages(hc.outputs, e.cfg.Images)
	if r != nil {
		note.state = reportState(r)
	}
	e.mu.Lock()
	e.humans = append(e.humans, note)
	e.res.HumanCells++
	e.mu.Unlock()
	_ = e.saveResult()
}

// takeHumans hands over the notes on people's cells the agent has not heard of yet.
func (e *Episode) takeHumans() []humanNote {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.humans
	e.humans = nil
	return h
}

// HumanUpdate is what people did in the episode's kernel since the model last heard, told to it
// before its next decision (AwaitTurn). Empty when nothing happened.
type HumanUpdate struct {
	Text   string
	Images []Image
}

// Empty says there is nothing to tell.
func (u HumanUpdate) Empty() bool { return u.Text == "" && len(u.Images) == 0 }

// AwaitTurn is called by a runtime before each model decision. It waits while a person has the
// episode paused (Step lets one decision through), waits for people's cells that are running to end
// and be accounted, and returns what they did, for the runtime to tell the model before it decides.
func (e *Episode) AwaitTurn(ctx context.Context) (HumanUpdate, error) {
	if err := e.gate.awaitTurn(ctx); err != nil {
		return HumanUpdate{}, err
	}
	if err := e.waitHumans(ctx); err != nil {
		return HumanUpdate{}, err
	}
	return e.humanUpdate(e.takeHumans(), "since your last decision"), nil
}

// humanUpdate tells the model plainly what people did: their cells, whether they moved the robot
// (their calls are theirs, not the agent's), the robot's state after them and fresh camera images
// per the image policy (the newest person's cell's).
func (e *Episode) humanUpdate(notes []humanNote, when string) HumanUpdate {
	if len(notes) == 0 {
		return HumanUpdate{}
	}
	steps, moved := 0, false
	for _, n := range notes {
		steps += n.EnvSteps
		moved = moved || n.Moved
	}
	cells := "1 cell"
	if len(notes) > 1 {
		cells = fmt.Sprintf("%d cells", len(notes))
	}
	msg := fmt.Sprintf("A person ran %s in your kernel %s (shown below; their variables are in your namespace).", cells, when)
	if moved {
		msg += fmt.Sprintf(" The person MOVED THE ROBOT (%d env steps, not counted as yours): the scene is not what you last saw.", steps)
	} else {
		msg += " The robot did not move."
	}
	u := struct {
		Note       string      `json:"note"`
		HumanCells []humanNote `json:"human_cells"`
		State      any         `json:"state,omitempty"`
		Images     []string    `json:"images,omitempty"`
	}{Note: msg, HumanCells: notes}
	var imgs []Image
	for i := len(notes) - 1; i >= 0; i-- {
		if u.State == nil && notes[i].state != nil {
			u.State = notes[i].state
		}
		if imgs == nil && len(notes[i].images) > 0 {
			imgs = notes[i].images
		}
	}
	for _, im := range imgs {
		u.Images = append(u.Images, im.Name)
	}
	return HumanUpdate{Text: encodeFeedback(u), Images: imgs}
}

func parentSession(raw json.RawMessage) string {
	var h struct {
		Session string `json:"session"`
	}
	_ = json.Unmarshal(raw, &h)
	return h.Session
}

// raised says whether outputs hold an error (the cell raised).
func raised(outs []notebooks.Output) bool {
	for _, o := range outs {
		if o.OutputType == notebooks.OutputError {
			return true
		}
	}
	return false
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

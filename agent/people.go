package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
)

// people is what people do in a live episode: cells a person runs in JupyterLab on the episode's
// kernel. They reach it only through the gateway (PersonKernel.Forward), so the host knows each one
// from the request itself, never from what the kernel says. Each waits its turn in the dispatcher like
// an agent cell, goes into the trace as the person's (author "human", tag "human"), has its robot calls
// charged to the person (attribution.go), and is told to the model before its next decision
// (AwaitTurn) or with its next result. After the end, in a kernel kept for people (KeepKernel), their
// cells run one at a time and go into the trace as after the end (runAfterEnd); otherwise they pass
// straight through, unrecorded.
type people struct {
	e *Episode

	mu      sync.Mutex
	seq     int                  // people's cells so far
	running int                  // submitted, not yet recorded
	changed chan struct{}        // closed and replaced when running changes
	notes   []personNote         // what the model has not heard yet
	tallies map[int]*personTally // per person's cell: what it did to the robot
	over    bool                 // the episode ended: cells are after the end (or pass straight through)
	closed  bool                 // Close: the kernel goes, nothing more is recorded
	ctx     context.Context      // ends when Finish stops waiting for people's cells
	stop    context.CancelFunc

	afterMu sync.Mutex     // cells after the end run and are recorded one at a time, in order
	after   sync.WaitGroup // cells after the end not yet recorded (Close waits for them)
}

// personTally is what one person's cell did to the robot.
type personTally struct {
	ledger notebooks.CellLedger
	tools  []string
}

func newPeople(e *Episode) *people {
	p := &people{e: e, changed: make(chan struct{}), tallies: map[int]*personTally{}}
	p.ctx, p.stop = context.WithCancel(context.Background())
	return p
}

// personCell is one of a person's execute requests as it runs.
type personCell struct {
	n      int
	msg    *kernel.Message
	code   string
	silent bool
	count  *int
	out    *kernel.OutputBuilder // the one IOPub assembler, bounded as an agent cell's
	after  bool                  // run after the episode ended, in the kernel kept for people
}

// submit takes a person's execute_request: it runs in its turn, in the background.
func (p *people) submit(m *kernel.Message) error {
	var c struct {
		Code   string `json:"code"`
		Silent bool   `json:"silent"`
	}
	_ = json.Unmarshal(m.Content, &c)
	p.mu.Lock()
	if p.closed || (p.over && !p.e.kept()) {
		p.mu.Unlock()
		return p.e.kern.Client().Send(kernel.Shell, m)
	}
	p.seq++
	pc := &personCell{n: p.seq, msg: m, code: c.Code, silent: c.Silent, out: kernel.NewOutputBuilder(kernel.OutputLimits{}), after: p.over}
	if pc.after {
		p.after.Add(1)
		p.mu.Unlock()
		go p.runAfterEnd(pc)
		return nil
	}
	p.setRunningLocked(p.running + 1)
	p.mu.Unlock()
	go p.run(pc)
	return nil
}

// runAfterEnd runs a person's cell in the kernel kept after the end (play --serve-linger) and records
// it in the trace as theirs, after the end: the episode's counts and verdict are final, so it is
// counted apart (human_cells_after_end) and its robot calls are nobody's ledger.
func (p *people) runAfterEnd(pc *personCell) {
	defer p.after.Done()
	p.afterMu.Lock()
	defer p.afterMu.Unlock()
	e := p.e
	reply, err := e.kern.Client().Forward(context.Background(), kernel.Shell, pc.msg, pc.follow)
	if err != nil {
		e.log.Warn("a person's cell after the end", "cell", pc.n, "err", err)
	}
	pc.replied(reply)
	p.record(pc, agentShare{})
}

// run sends a person's cell when the kernel is free, follows it to its end, charges its robot calls
// and records it.
func (p *people) run(pc *personCell) {
	e := p.e
	defer func() {
		p.mu.Lock()
		p.setRunningLocked(p.running - 1)
		p.mu.Unlock()
	}()
	if err := e.exec.acquire(p.ctx); err != nil {
		// The episode ended while it waited: in a kernel kept for people it is a cell after the end;
		// else it runs unrecorded.
		p.mu.Lock()
		kept := !p.closed && e.kept()
		if kept {
			pc.after = true
			p.after.Add(1)
		}
		p.mu.Unlock()
		if kept {
			p.runAfterEnd(pc)
			return
		}
		_ = e.kern.Client().Send(kernel.Shell, pc.msg)
		return
	}
	e.exec.begin(owner{person: pc.n})
	reply, err := e.kern.Client().Forward(p.ctx, kernel.Shell, pc.msg, pc.follow)
	e.exec.end()
	if err != nil {
		e.log.Warn("a person's cell", "cell", pc.n, "err", err)
	}
	pc.replied(reply)
	var share agentShare
	if !isDone(e.kern.Done()) {
		share = e.steps.verdict(p.ctx, "", nil, owner{person: pc.n})
	}
	e.exec.release()
	p.record(pc, share)
}

// replied takes the execution count from a person's cell's execute_reply (nil: none came).
func (pc *personCell) replied(reply *kernel.Message) {
	if reply == nil {
		return
	}
	var r struct {
		ExecutionCount *int `json:"execution_count"`
	}
	if json.Unmarshal(reply.Content, &r) == nil && r.ExecutionCount != nil {
		pc.count = r.ExecutionCount
	}
}

// follow takes one message of a person's cell: its execution count and its outputs.
func (pc *personCell) follow(m *kernel.Message) {
	if m.Channel != kernel.IOPub {
		return
	}
	switch m.MsgType {
	case "status":
	case "execute_input":
		var c struct {
			ExecutionCount *int `json:"execution_count"`
		}
		if json.Unmarshal(m.Content, &c) == nil && c.ExecutionCount != nil {
			pc.count = c.ExecutionCount
		}
	default:
		_ = pc.out.Add(m) // a malformed output is skipped (Add says why; the person's client shows theirs)
	}
}

// record writes a person's cell to the trace (in execution order: cells run one at a time) with what it
// did to the robot, and keeps a note for the model. The agent's share of the verdict (calls its code
// made between cells) is counted here too.
func (p *people) record(pc *personCell, share agentShare) {
	e := p.e
	p.mu.Lock()
	if p.over && !pc.after {
		pc.after = true // it ended after the end: the episode's counts are final
	}
	p.mu.Unlock()
	if share.report != nil {
		e.book.absorb(share.report, e.brief.stateful)
	}
	applyDisplayUpdates(e.trace, e.log, pc.out.DisplayUpdates())
	p.mu.Lock()
	t := p.tallyLocked(pc.n)
	ledger, tools := t.ledger, append([]string(nil), t.tools...)
	p.mu.Unlock()
	if pc.silent {
		_ = e.book.save()
		return
	}
	outs := pc.out.Final()
	e.names.add(pc.count, fmt.Sprintf("<a person's cell %d>", pc.n))
	tags := []string{notebooks.TagHuman}
	if pc.after {
		tags = append(tags, notebooks.TagAfterEnd)
	}
	if raised(outs) {
		tags = append(tags, notebooks.TagRaisesException)
	}
	meta := notebooks.CellMeta{Author: notebooks.AuthorHuman, HumanCell: pc.n, MsgID: pc.msg.MsgID, Ledger: &ledger, AfterEnd: pc.after}
	if pc.after {
		meta.Ledger = nil // the ledger closed with the episode: its robot calls are not counted
	}
	if err := e.trace.AddCode(pc.code, notebooks.CodeRun{Outputs: outs, ExecutionCount: pc.count, Tags: tags}, meta.Map()); err != nil {
		e.log.Warn("trace: a person's cell", "err", err)
	}
	if pc.after {
		e.book.update(func(r *Result) { r.HumanCellsAfterEnd++ })
		_ = e.book.save()
		return
	}
	ct := collectText(outs)
	summary := ct.stdout
	if ct.value != nil {
		summary += *ct.value
	}
	if ct.hasError {
		summary += ct.ename + ": " + ct.evalue
	}
	note := personNote{Cell: pc.n, Code: TrimMiddle(pc.code, 2000), Output: TrimMiddle(strings.TrimSpace(StripANSI(summary)), 1000),
		Moved: ledger.EnvSteps > 0, EnvSteps: ledger.EnvSteps, Calls: tools}
	if len(note.Calls) > maxFeedbackCalls {
		note.Calls = note.Calls[len(note.Calls)-maxFeedbackCalls:]
	}
	note.images = selectImages(outs, e.spec.Images)
	if share.report != nil {
		note.state = reportState(share.report)
	}
	p.mu.Lock()
	p.notes = append(p.notes, note)
	p.mu.Unlock()
	e.book.update(func(r *Result) { r.HumanCells++ })
	_ = e.book.save()
}

// charge counts calls and steps against a person's cell and result.json's human_* totals.
func (p *people) charge(person, calls, stateful, steps int, tool string) {
	p.mu.Lock()
	t := p.tallyLocked(person)
	t.ledger.Calls += calls
	t.ledger.StatefulCalls += stateful
	t.ledger.EnvSteps += steps
	if tool != "" {
		t.tools = append(t.tools, tool)
	}
	p.mu.Unlock()
	p.e.book.chargePeople(calls, stateful, steps)
}

func (p *people) tallyLocked(n int) *personTally {
	t := p.tallies[n]
	if t == nil {
		t = &personTally{}
		p.tallies[n] = t
	}
	return t
}

func (p *people) setRunningLocked(n int) {
	p.running = n
	close(p.changed)
	p.changed = make(chan struct{})
}

// wait waits until no person's cell is queued, running or being recorded (or ctx ends).
func (p *people) wait(ctx context.Context) error {
	for {
		p.mu.Lock()
		if p.running <= 0 {
			p.mu.Unlock()
			return nil
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		}
	}
}

// take hands over the notes on people's cells the model has not heard of yet.
func (p *people) take() []personNote {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.notes
	p.notes = nil
	return n
}

// runningCount is how many people's cells are queued, running or being recorded.
func (p *people) runningCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

// close is Close's part, before the kernel goes: nothing more is recorded; wait waits for the cells
// after the end already taken (they end with the kernel).
func (p *people) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// end is Finish's part: people's cells still running get ctx's time to end and be recorded, then
// later ones are cells after the end (a kept kernel) or pass straight through, unrecorded.
func (p *people) end(ctx context.Context) {
	_ = p.wait(ctx)
	p.mu.Lock()
	p.over = true
	p.mu.Unlock()
	p.stop()
}

// PeopleUpdate is what people did in the episode's kernel since the model last heard, told to it before
// its next decision (AwaitTurn). Empty when nothing happened.
type PeopleUpdate struct {
	Text   string
	Images []Image
}

// Empty says there is nothing to tell.
func (u PeopleUpdate) Empty() bool { return u.Text == "" && len(u.Images) == 0 }

// AwaitTurn is called by a runtime before each model decision. It waits while a person has the
// episode paused (Step lets one decision through), waits for people's cells that are running to end
// and be accounted, and returns what they did, for the runtime to tell the model before it decides.
func (e *Episode) AwaitTurn(ctx context.Context) (PeopleUpdate, error) {
	if err := e.gate.awaitTurn(ctx); err != nil {
		return PeopleUpdate{}, err
	}
	if err := e.people.wait(ctx); err != nil {
		return PeopleUpdate{}, err
	}
	return personUpdate(e.people.take(), "since your last decision"), nil
}

// personUpdate tells the model plainly what people did: their cells, whether they moved the robot
// (their calls are theirs, not the agent's), the robot's state after them and fresh camera images per
// the image policy (the newest person's cell's).
func personUpdate(notes []personNote, when string) PeopleUpdate {
	if len(notes) == 0 {
		return PeopleUpdate{}
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
		Note       string       `json:"note"`
		HumanCells []personNote `json:"human_cells"`
		State      any          `json:"state,omitempty"`
		Images     []string     `json:"images,omitempty"`
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
	return PeopleUpdate{Text: encodeFeedback(u), Images: imgs}
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

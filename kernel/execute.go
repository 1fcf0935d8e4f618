package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
)

// ExecuteOptions tune one execute_request.
type ExecuteOptions struct {
	Silent, NoHistory, AllowStdin, StopOnError bool
	UserExpressions                            map[string]string
	Metadata                                   map[string]any // execute_request metadata
	// Timeout interrupts the cell; if the kernel is not idle within Grace (default 5 s) afterwards the
	// result is Stuck and the wait ends. Whether to restart is the kernel's owner's call (Kernel.Recover).
	Timeout time.Duration
	Grace   time.Duration
	// OnOutput receives each output as it arrives (a stream chunk as its own stream output; an
	// update_display_data as a display_data carrying DisplayID), whole: Limits bound only Outputs.
	OnOutput func(notebooks.Output)
	// OnSent, when set, is told the execute_request's msg_id once it is sent (a live view names the
	// running cell by it).
	OnSent func(msgID string)
	// Input answers input_request when AllowStdin is set. Without it, input() gets EOF and raises
	// EOFError in the cell, so a cell never hangs waiting for a person.
	Input func(ctx context.Context, prompt string, password bool) (string, error)
	// Limits bound what Outputs keep (zero fields: the defaults); OnOutput still sees everything.
	Limits OutputLimits
}

// ErrorInfo is an execute_reply or error output's exception.
type ErrorInfo struct {
	Ename, Evalue string
	Traceback     []string
}

// ExecuteResult is one executed cell.
type ExecuteResult struct {
	MsgID           string
	Outputs         []notebooks.Output // nbformat shape, streams merged, clear_output/update_display applied
	ExecutionCount  *int
	Status          string // ok | error | aborted | timeout
	Error           *ErrorInfo
	UserExpressions map[string]json.RawMessage
	Timing          notebooks.ExecTiming
	// DisplayUpdates are update_display_data for display ids shown by earlier cells.
	DisplayUpdates        []notebooks.Output
	TimedOut, Interrupted bool
	// Stuck: the kernel was still busy Grace after the interrupt; the cell was given up on, and the
	// kernel will run nothing else until it stops or is restarted (Kernel.Recover).
	Stuck bool
	// Restarted: Kernel.Recover restarted the kernel to end the stuck cell (its state is gone).
	Restarted bool
	// Omitted says what opts.Limits dropped from Outputs (each drop is also marked where it was).
	Omitted OutputOmission
	// OutputsIncomplete: the cell ended without its status: idle (lost on iopub, or iopub went silent),
	// so outputs may be missing.
	OutputsIncomplete bool
}

// ErrTimeout is wrapped in the error of a stuck cell's kernel that could not be restarted.
var ErrTimeout = errors.New("kernel: cell timed out")

// A cell is done at its status: idle, but ipykernel may send some of its output after that: when the
// flush it does between its reply and its idle times out (its iopub thread flush_timeout, 10 s, behind a
// flood), the flush's message is queued behind the idle (IOPubThread re-schedules a send made from its
// own thread), and the cell's last print comes after the idle. Such an idle was made at least the
// flush's wait after the reply, so an idle made lateIdle after the reply is followed by a barrier: a
// kernel_info_request on control, whose own iopub status is queued behind everything the kernel had
// queued when our idle went out. Until the barrier comes back the cell's output is still collected.
//
// After the reply, iopub may stay quiet for a long time (the kernel flushes twice more, up to 10 s
// each, before its idle); only lostIdleAfter of silence ends the cell without its idle, and the result
// says its outputs may be incomplete.
const (
	lateIdle       = 200 * time.Millisecond
	barrierTimeout = 10 * time.Second
	lostIdleAfter  = 30 * time.Second
)

type executeReply struct {
	Status          string                     `json:"status"`
	ExecutionCount  *int                       `json:"execution_count"`
	Ename           string                     `json:"ename"`
	Evalue          string                     `json:"evalue"`
	Traceback       []string                   `json:"traceback"`
	UserExpressions map[string]json.RawMessage `json:"user_expressions"`
}

// Execute runs code and returns when both its execute_reply and its status: idle have arrived.
// It fails only when the kernel could not run the cell (dead, restarted, client closed, ctx done);
// an exception in the cell is a result with Status "error". When it fails after the request was sent,
// the result returned beside the error holds what had arrived (outputs so far). Cancelling ctx only
// stops the wait (the cell runs on in the kernel); opts.Timeout is what interrupts a cell.
func (c *Client) Execute(ctx context.Context, code string, opts ExecuteOptions) (*ExecuteResult, error) {
	ue := opts.UserExpressions
	if ue == nil {
		ue = map[string]string{}
	}
	content := map[string]any{
		"code": code, "silent": opts.Silent, "store_history": !opts.NoHistory,
		"user_expressions": ue, "allow_stdin": opts.AllowStdin, "stop_on_error": opts.StopOnError,
	}
	m, err := newMessage("execute_request", c.session.ID, content)
	if err != nil {
		return nil, err
	}
	if opts.Metadata != nil {
		if m.Metadata, err = marshalJSON(opts.Metadata); err != nil {
			return nil, fmt.Errorf("kernel: execute metadata: %w", err)
		}
	}
	w, err := c.register(ctx, m.MsgID, false)
	if err != nil {
		return nil, err
	}
	defer c.unregister(m.MsgID)
	if err := c.send(Shell, m); err != nil {
		return nil, err
	}
	if opts.OnSent != nil {
		opts.OnSent(m.MsgID)
	}
	x := &execution{c: c, opts: &opts, w: w, res: &ExecuteResult{MsgID: m.MsgID}, out: NewOutputBuilder(opts.Limits)}
	defer func() {
		if x.barrierID != "" {
			c.unregister(x.barrierID)
		}
	}()
	return x.wait(ctx)
}

// execution is one Execute waiting for its cell's messages.
type execution struct {
	c    *Client
	opts *ExecuteOptions
	w    *waiter
	res  *ExecuteResult
	out  *OutputBuilder

	gotReply, gotIdle bool
	// The timeout drives a small state machine: at Timeout interrupt, at Timeout+Grace give up (Stuck).
	timer    *time.Timer
	deadline <-chan time.Time
	// After the reply: iopub quiet (see lostIdleAfter), and the barrier after a late idle.
	quietTimer  *time.Timer
	quiet       <-chan time.Time
	barrierID   string
	barrierDone bool
}

// wait consumes the cell's messages until it is done, timed out past its grace, or the wait fails.
func (x *execution) wait(ctx context.Context) (*ExecuteResult, error) {
	if x.opts.Timeout > 0 {
		x.timer = time.NewTimer(x.opts.Timeout)
		defer x.timer.Stop()
		x.deadline = x.timer.C
	}
	defer func() {
		if x.quietTimer != nil {
			x.quietTimer.Stop()
		}
	}()
	for !(x.gotReply && x.gotIdle && (x.barrierID == "" || x.barrierDone)) {
		select { // a cell that never stops printing still times out
		case <-x.deadline:
			if err, stop := x.onTimeout(ctx); stop {
				return x.finish(), err
			}
		default:
		}
		r, werr, ok := x.w.pop()
		if !ok {
			select {
			case <-x.w.notify:
			case <-x.quiet:
				x.onQuiet()
				return x.finish(), nil
			case <-x.deadline:
				if err, stop := x.onTimeout(ctx); stop {
					return x.finish(), err
				}
			case <-ctx.Done():
				return x.finish(), fmt.Errorf("kernel: execute: %w", context.Cause(ctx))
			}
			continue
		}
		if werr != nil {
			return x.finish(), fmt.Errorf("kernel: execute: %w", werr)
		}
		if x.quietTimer != nil {
			x.quietTimer.Reset(x.quietFor())
		}
		if err := x.handle(ctx, r); err != nil {
			return x.finish(), err
		}
		if x.gotReply && x.gotIdle && x.barrierID == "" && x.res.Timing.Idle.Sub(x.res.Timing.ExecuteReply) > lateIdle {
			x.sendBarrier()
		}
	}
	return x.finish(), nil
}

func (x *execution) finish() *ExecuteResult {
	x.res.Outputs = x.out.Final()
	x.res.DisplayUpdates = x.out.DisplayUpdates()
	x.res.Omitted = x.out.Omitted()
	return x.res
}

// handle applies one message of the cell (or of its barrier).
func (x *execution) handle(ctx context.Context, r *Message) error {
	if x.barrierID != "" && r.ParentMsgID == x.barrierID {
		x.barrierDone = x.barrierDone || r.Channel == IOPub // what iopub held before it is in
		return nil
	}
	switch r.Channel {
	case IOPub:
		x.onIOPub(r)
	case Shell:
		if r.MsgType == "execute_reply" {
			return x.onReply(r)
		}
	case Stdin:
		if r.MsgType == "input_request" {
			return x.c.answerInput(ctx, r, *x.opts)
		}
	}
	return nil
}

func (x *execution) onIOPub(r *Message) {
	switch r.MsgType {
	case "status":
		var s struct {
			ExecutionState string `json:"execution_state"`
		}
		_ = json.Unmarshal(r.Content, &s)
		switch s.ExecutionState {
		case "busy":
			x.res.Timing.Busy = r.Date()
		case "idle":
			x.res.Timing.Idle = r.Date()
			x.gotIdle = true
		}
	case "execute_input":
		x.res.Timing.ExecuteInput = r.Date()
		var s struct {
			ExecutionCount *int `json:"execution_count"`
		}
		if json.Unmarshal(r.Content, &s) == nil && s.ExecutionCount != nil && x.res.ExecutionCount == nil {
			x.res.ExecutionCount = s.ExecutionCount
		}
	default:
		var o *notebooks.Output
		var err error
		if x.opts.OnOutput != nil {
			o, err = x.out.AddLive(r)
		} else {
			err = x.out.Add(r)
		}
		if err != nil {
			x.c.malformed.Add(1)
			x.c.log.Warn("kernel: skipped a malformed output", "type", r.MsgType, "err", err)
		} else if o != nil {
			x.opts.OnOutput(*o)
		}
	}
}

func (x *execution) onReply(r *Message) error {
	x.gotReply = true
	x.res.Timing.ExecuteReply = r.Date()
	x.quietTimer = time.NewTimer(x.quietFor())
	x.quiet = x.quietTimer.C
	var rep executeReply
	if err := json.Unmarshal(r.Content, &rep); err != nil {
		return fmt.Errorf("%w: execute_reply: %v", ErrMalformed, err)
	}
	if x.res.Status != "timeout" {
		x.res.Status = rep.Status
	}
	if rep.ExecutionCount != nil {
		x.res.ExecutionCount = rep.ExecutionCount
	}
	x.res.UserExpressions = rep.UserExpressions
	if rep.Status == "error" {
		x.res.Error = &ErrorInfo{Ename: rep.Ename, Evalue: rep.Evalue, Traceback: rep.Traceback}
	}
	return nil
}

// sendBarrier asks for a kernel_info on control, its messages queued with the cell's (see lateIdle).
func (x *execution) sendBarrier() {
	m, err := newMessage("kernel_info_request", x.c.session.ID, nil)
	if err == nil {
		x.c.route(m.MsgID, x.w)
		x.barrierID = m.MsgID
		if err = x.c.send(Control, m); err != nil {
			x.barrierDone = true
		}
	}
	if err != nil {
		x.c.log.Warn("kernel: cannot send a barrier after a late idle", "err", err)
		x.res.OutputsIncomplete = true
		return
	}
	if x.quietTimer != nil {
		x.quietTimer.Reset(x.quietFor())
	}
}

func (x *execution) quietFor() time.Duration {
	if x.barrierID != "" {
		return barrierTimeout
	}
	return x.c.lostIdleAfter
}

// onQuiet runs when iopub has been quiet for too long after the reply (no idle) or after a barrier
// (no answer): the cell ends, and its outputs may be incomplete.
func (x *execution) onQuiet() {
	if x.barrierID != "" {
		x.c.log.Warn("kernel: no answer to the barrier after a late idle; finishing the cell", "waited", barrierTimeout)
	} else {
		x.c.log.Warn("kernel: iopub silent after execute_reply, no status idle; finishing the cell", "waited", x.c.lostIdleAfter)
	}
	x.res.OutputsIncomplete = true
}

// onTimeout runs when the timer fires: first interrupt and give the kernel grace, then give up (Stuck).
// stop reports that Execute must return, with err.
func (x *execution) onTimeout(ctx context.Context) (err error, stop bool) {
	grace := x.opts.Grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	if !x.res.TimedOut {
		x.res.TimedOut, x.res.Status = true, "timeout"
		x.c.log.Info("kernel: cell timed out; interrupting", "timeout", x.opts.Timeout)
		ictx, icancel := context.WithTimeout(ctx, grace)
		err := x.c.interrupt(ictx)
		icancel()
		if err != nil {
			x.c.log.Warn("kernel: interrupt after timeout failed", "err", err)
		} else {
			x.res.Interrupted = true
		}
		x.timer.Reset(grace)
		return nil, false
	}
	x.deadline = nil
	x.c.log.Warn("kernel: not idle after the interrupt; giving up on the cell", "grace", grace)
	x.res.Stuck = true
	return nil, true
}

// answerInput replies to input_request: with opts.Input if the caller allowed stdin and gave one,
// else with EOF ("\x04"), which ipykernel turns into EOFError in the cell.
func (c *Client) answerInput(ctx context.Context, req *Message, opts ExecuteOptions) error {
	value := "\x04"
	if opts.Input != nil {
		var p struct {
			Prompt   string `json:"prompt"`
			Password bool   `json:"password"`
		}
		_ = json.Unmarshal(req.Content, &p)
		v, err := opts.Input(ctx, p.Prompt, p.Password)
		if err == nil {
			value = v
		}
	}
	reply, err := newMessage("input_reply", c.session.ID, map[string]string{"value": value})
	if err != nil {
		return err
	}
	reply.ParentHeader = req.Header
	reply.ParentMsgID = req.MsgID
	return c.send(Stdin, reply)
}

// interrupt uses the kernel's own mechanism when we launched it (SIGINT or a message, per its spec),
// else interrupt_request on control.
func (c *Client) interrupt(ctx context.Context) error {
	if c.interruptFn != nil {
		return c.interruptFn(ctx)
	}
	return c.InterruptRequest(ctx)
}

// InterruptRequest sends interrupt_request on control and waits for the reply.
func (c *Client) InterruptRequest(ctx context.Context) error {
	m, err := newMessage("interrupt_request", c.session.ID, nil)
	if err != nil {
		return err
	}
	_, err = c.Request(ctx, Control, m)
	return err
}

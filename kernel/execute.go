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
	// update_display_data as a display_data carrying DisplayID).
	OnOutput func(notebooks.Output)
	// OnSent, when set, is told the execute_request's msg_id once it is sent (a live view names the
	// running cell by it).
	OnSent func(msgID string)
	// Input answers input_request when AllowStdin is set. Without it, input() gets EOF and raises
	// EOFError in the cell, so a cell never hangs waiting for a person.
	Input func(ctx context.Context, prompt string, password bool) (string, error)
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
}

// ErrTimeout is wrapped in the error of a stuck cell's kernel that could not be restarted.
var ErrTimeout = errors.New("kernel: cell timed out")

// iopubTimeout bounds the wait for status: idle once execute_reply is in and iopub is silent
// (nbclient waits 4 s; a loaded machine deserves more).
const iopubTimeout = 10 * time.Second

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
// an exception in the cell is a result with Status "error". Cancelling ctx only stops the wait (the
// cell runs on in the kernel); opts.Timeout is what interrupts a cell.
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
	res := &ExecuteResult{MsgID: m.MsgID}
	var out outputs
	var gotReply, gotIdle bool

	// The timeout drives a small state machine: at Timeout interrupt, at Timeout+Grace give up (Stuck).
	var deadline <-chan time.Time
	var timer *time.Timer
	if opts.Timeout > 0 {
		timer = time.NewTimer(opts.Timeout)
		defer timer.Stop()
		deadline = timer.C
	}
	grace := opts.Grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	finish := func() *ExecuteResult {
		res.Outputs = out.final()
		res.DisplayUpdates = out.foreignUpdates
		if res.Outputs == nil {
			res.Outputs = []notebooks.Output{}
		}
		return res
	}
	// After the reply, outputs may still be in flight on iopub; each one restarts this wait.
	var idleTimer *time.Timer
	var idleWait <-chan time.Time
	for !(gotReply && gotIdle) {
		select { // a cell that never stops printing still times out
		case <-deadline:
			if res, err, stop := c.onTimeout(ctx, res, &opts, timer, &deadline, grace, finish); stop {
				return res, err
			}
		default:
		}
		r, werr, ok := w.pop()
		if !ok {
			select {
			case <-w.notify:
			case <-idleWait:
				// The reply came but iopub went quiet without our idle (a lost message): do not hang.
				c.log.Warn("kernel: no status idle after execute_reply; finishing the cell", "waited", iopubTimeout)
				return finish(), nil
			case <-deadline:
				if res, err, stop := c.onTimeout(ctx, res, &opts, timer, &deadline, grace, finish); stop {
					return res, err
				}
			case <-ctx.Done():
				return nil, fmt.Errorf("kernel: execute: %w", context.Cause(ctx))
			}
			continue
		}
		if werr != nil {
			return nil, fmt.Errorf("kernel: execute: %w", werr)
		}
		if idleTimer != nil {
			idleTimer.Reset(iopubTimeout)
		}
		{
			switch r.Channel {
			case IOPub:
				switch r.MsgType {
				case "status":
					var s struct {
						ExecutionState string `json:"execution_state"`
					}
					_ = json.Unmarshal(r.Content, &s)
					switch s.ExecutionState {
					case "busy":
						res.Timing.Busy = r.Date()
					case "idle":
						res.Timing.Idle = r.Date()
						gotIdle = true
					}
				case "execute_input":
					res.Timing.ExecuteInput = r.Date()
					var s struct {
						ExecutionCount *int `json:"execution_count"`
					}
					if json.Unmarshal(r.Content, &s) == nil && s.ExecutionCount != nil && res.ExecutionCount == nil {
						res.ExecutionCount = s.ExecutionCount
					}
				default:
					o, err := out.add(r)
					if err != nil {
						c.malformed.Add(1)
						c.log.Warn("kernel: skipped a malformed output", "type", r.MsgType, "err", err)
					} else if o != nil && opts.OnOutput != nil {
						opts.OnOutput(*o)
					}
				}
			case Shell:
				if r.MsgType != "execute_reply" {
					continue
				}
				gotReply = true
				res.Timing.ExecuteReply = r.Date()
				idleTimer = time.NewTimer(iopubTimeout)
				defer idleTimer.Stop()
				idleWait = idleTimer.C
				var rep executeReply
				if err := json.Unmarshal(r.Content, &rep); err != nil {
					return nil, fmt.Errorf("%w: execute_reply: %v", ErrMalformed, err)
				}
				if res.Status != "timeout" {
					res.Status = rep.Status
				}
				if rep.ExecutionCount != nil {
					res.ExecutionCount = rep.ExecutionCount
				}
				res.UserExpressions = rep.UserExpressions
				if rep.Status == "error" {
					res.Error = &ErrorInfo{Ename: rep.Ename, Evalue: rep.Evalue, Traceback: rep.Traceback}
				}
			case Stdin:
				if r.MsgType == "input_request" {
					if err := c.answerInput(ctx, r, opts); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return finish(), nil
}

// onTimeout runs when the timer fires: first interrupt and give the kernel grace, then restart it.
// stop reports that Execute must return (res, err).
func (c *Client) onTimeout(ctx context.Context, res *ExecuteResult, opts *ExecuteOptions, timer *time.Timer,
	deadline *<-chan time.Time, grace time.Duration, finish func() *ExecuteResult) (*ExecuteResult, error, bool) {
	if !res.TimedOut {
		res.TimedOut, res.Status = true, "timeout"
		c.log.Info("kernel: cell timed out; interrupting", "timeout", opts.Timeout)
		ictx, icancel := context.WithTimeout(ctx, grace)
		err := c.interrupt(ictx)
		icancel()
		if err != nil {
			c.log.Warn("kernel: interrupt after timeout failed", "err", err)
		} else {
			res.Interrupted = true
		}
		timer.Reset(grace)
		return nil, nil, false
	}
	*deadline = nil
	c.log.Warn("kernel: not idle after the interrupt; giving up on the cell", "grace", grace)
	res.Stuck = true
	return finish(), nil, true
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

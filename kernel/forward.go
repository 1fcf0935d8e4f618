package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Forward sends another client's request m on ch as it is (header, session and identities untouched;
// signed with this connection's key, as Send does) and follows it: each message whose parent it is
// (its iopub outputs and status, its reply) goes to each, in arrival order, with none dropped however
// many there are, until the reply has come and, on shell, the kernel has gone idle after it (or iopub
// stayed quiet for lostIdleAfter after the reply). It returns the reply. The request's own client
// gets every message as usual (subscribers); Forward never answers stdin for it.
func (c *Client) Forward(ctx context.Context, ch Channel, m *Message, each func(*Message)) (*Message, error) {
	if m == nil || m.MsgID == "" {
		return nil, fmt.Errorf("kernel: Forward: a message with a msg_id is required")
	}
	w, err := c.register(ctx, m.MsgID, false)
	if err != nil {
		return nil, err
	}
	defer c.unregister(m.MsgID)
	if err := c.send(ch, m); err != nil {
		return nil, err
	}
	var reply *Message
	idle := ch != Shell // only shell requests make the kernel busy
	var quiet <-chan time.Time
	for reply == nil || !idle {
		r, werr, ok := w.pop()
		if !ok {
			select {
			case <-w.notify:
			case <-quiet:
				return reply, nil // the idle was lost: do not hang on it
			case <-ctx.Done():
				return reply, fmt.Errorf("kernel: %s: %w", m.MsgType, context.Cause(ctx))
			}
			continue
		}
		if werr != nil {
			return reply, fmt.Errorf("kernel: %s: %w", m.MsgType, werr)
		}
		if each != nil {
			each(r)
		}
		switch {
		case r.Channel == ch && reply == nil:
			reply = r
			t := time.NewTimer(lostIdleAfter)
			defer t.Stop()
			quiet = t.C
		case r.Channel == IOPub && r.MsgType == "status":
			var s struct {
				ExecutionState string `json:"execution_state"`
			}
			if json.Unmarshal(r.Content, &s) == nil && s.ExecutionState == "idle" {
				idle = true
			}
		}
	}
	return reply, nil
}

package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/google/uuid"
)

// Errors a Client returns; match them with errors.Is.
var (
	ErrClosed     = errors.New("kernel: client closed")
	ErrKernelDied = errors.New("kernel: kernel died")
	ErrRestarted  = errors.New("kernel: kernel restarted while the request was pending")
	// ErrPortCollision: while connecting, messages signed with another key arrived and the kernel never
	// answered: our ports reach some other kernel (free ports are only free until someone binds them).
	ErrPortCollision = errors.New("kernel: connection ports reach another kernel")
)

// ClientOptions configures Attach.
type ClientOptions struct {
	Logger *slog.Logger
	// ReadyTimeout bounds the wait for the iopub subscription (default 60 s).
	ReadyTimeout time.Duration
	// TimeToDead is how long a missing heartbeat takes to declare an attached kernel dead (default 3 s).
	TimeToDead time.Duration
}

// Stats counts what a client has seen.
type Stats struct {
	Sent, Received  uint64
	BadSignatures   uint64 // dropped: signature did not verify
	Malformed       uint64 // dropped: not a Jupyter message
	SubscriberDrops uint64 // messages a full subscriber buffer missed
	HeartbeatMisses uint64 // heartbeat periods without an answer
	Restarts        uint64
}

// Client is one long-lived connection to a kernel, safe for concurrent use. Every incoming message
// goes to the request whose msg_id is its parent (if one is pending) and to every subscriber.
type Client struct {
	log     *slog.Logger
	session *Session
	info    ConnectionInfo

	// Set by Kernel for kernels we own; nil for attached ones (then interrupt goes over control and
	// a timed-out cell cannot be restarted).
	interruptFn func(context.Context) error
	onHBLost    func()
	// ignoreWelcome readies by nudging only, as for ipykernel < 7.2 (PUB iopub, no welcome)
	ignoreWelcome bool

	mu      sync.RWMutex
	socks   *sockets
	waiters map[string]*waiter
	subs    map[int]subscriber
	nextSub int
	dead    error // non-nil once the kernel is gone or the client closed
	// restarting is open while a restart replaces the process; new requests wait for it
	restarting chan struct{}
	done       chan struct{}

	lastPong  atomic.Int64 // unix nanos
	hbStop    chan struct{}
	hbDone    chan struct{}
	closeOnce sync.Once

	sent, received, badSig, malformed, subDrops, hbMisses, restarts atomic.Uint64

	lostIdleAfter time.Duration // see execute.go
}

func newClient(ci ConnectionInfo, logger *slog.Logger) (*Client, error) {
	if logger == nil {
		logger = slog.Default()
	}
	sess, err := NewSession(uuid.NewString(), []byte(ci.Key), ci.SignatureScheme)
	if err != nil {
		return nil, err
	}
	return &Client{
		log: logger, session: sess, info: ci,
		waiters: map[string]*waiter{}, subs: map[int]subscriber{},
		done: make(chan struct{}), hbStop: make(chan struct{}), hbDone: make(chan struct{}),
		lostIdleAfter: lostIdleAfter,
	}, nil
}

// Attach connects to an already running kernel from its connection file and waits until its iopub
// subscription is live. The kernel's death is detected by heartbeat only.
func Attach(ctx context.Context, connFile string, opts ClientOptions) (*Client, error) {
	return attach(ctx, connFile, opts, false)
}

// attach is Attach; ignoreWelcome makes readiness take the nudge path of kernels without XPUB.
func attach(ctx context.Context, connFile string, opts ClientOptions, ignoreWelcome bool) (*Client, error) {
	ci, err := ReadConnectionFile(connFile)
	if err != nil {
		return nil, err
	}
	c, err := newClient(ci, opts.Logger)
	if err != nil {
		return nil, err
	}
	c.ignoreWelcome = ignoreWelcome
	ttd := opts.TimeToDead
	if ttd <= 0 {
		ttd = 3 * time.Second
	}
	c.onHBLost = func() {
		c.markDead(fmt.Errorf("%w: no heartbeat for %v", ErrKernelDied, ttd))
	}
	rt := opts.ReadyTimeout
	if rt <= 0 {
		rt = 60 * time.Second
	}
	rctx, cancel := context.WithTimeout(ctx, rt)
	defer cancel()
	if err := c.connect(rctx); err != nil {
		c.Close()
		return nil, err
	}
	go c.heartbeat(ttd)
	return c, nil
}

// connect dials a fresh socket set, swaps it in and waits for readiness.
func (c *Client) connect(ctx context.Context) error {
	// subscribe before dialing: the welcome can arrive as soon as the SUB connects
	sub, cancel := c.Subscribe(256)
	defer cancel()
	socks, err := dialSockets(ctx, c.ConnectionInfo(), c.session.ID, c.dispatch, c.pong)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		socks.close()
		return c.dead
	}
	old := c.socks
	c.socks = socks
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
	c.lastPong.Store(time.Now().UnixNano())
	return c.waitReady(ctx, sub)
}

// portCollisionGrace is how long foreign-signed traffic may arrive before our kernel's first answer
// before the ports are declared taken; a kernel importing its robot stack answers kernel_info well
// within it once it is listening.
const portCollisionGrace = 5 * time.Second

// waitReady returns once an iopub message proves our subscription is live: an iopub_welcome (XPUB
// kernels, ipykernel ≥ 7.2), or else any iopub message together with a reply to kernel_info_request,
// which we repeat every 0.5 s (jupyter_server's nudge).
func (c *Client) waitReady(ctx context.Context, sub <-chan *Message) error {
	asked := map[string]bool{}
	// Foreign traffic (bad signatures) that keeps coming while our kernel stays silent means our
	// ports belong to another kernel; say so after a grace period instead of waiting out the timeout.
	foreign0, started := c.badSig.Load(), time.Now()
	nudge := func() error {
		m, err := newMessage("kernel_info_request", c.session.ID, nil)
		if err != nil {
			return err
		}
		asked[m.MsgID] = true
		return c.send(Shell, m)
	}
	if err := nudge(); err != nil {
		return err
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var replied, iopub bool
	for {
		select {
		case m, ok := <-sub:
			if !ok {
				return c.deadErr()
			}
			switch {
			case m.Channel == IOPub && m.MsgType == "iopub_welcome" && !c.ignoreWelcome:
				return nil
			case m.Channel == IOPub && m.MsgType == "iopub_welcome":
			case m.Channel == IOPub:
				iopub = true
			case m.Channel == Shell && asked[m.ParentMsgID]:
				replied = true
			}
			if replied && iopub {
				return nil
			}
		case <-tick.C:
			if n := c.badSig.Load() - foreign0; n > 0 && !replied && !iopub && time.Since(started) > portCollisionGrace {
				return fmt.Errorf("%w: %d messages signed with another key and no answer from ours in %v",
					ErrPortCollision, n, time.Since(started).Round(time.Millisecond))
			}
			if err := nudge(); err != nil {
				return err
			}
		case <-ctx.Done():
			if n := c.badSig.Load() - foreign0; n > 0 && !replied {
				return fmt.Errorf("%w: %d messages signed with another key and no answer from ours: %w", ErrPortCollision, n, context.Cause(ctx))
			}
			return fmt.Errorf("kernel: not ready (kernel_info reply: %v, iopub: %v): %w", replied, iopub, context.Cause(ctx))
		}
	}
}

// dispatch verifies and routes one incoming message. It runs on the socket reader goroutines and
// never blocks: waiters queue without bound, subscribers drop when their buffer is full.
func (c *Client) dispatch(ch Channel, frames [][]byte) {
	m, err := c.session.Decode(ch, frames)
	if err != nil {
		// logged at the first and then every 1000th, so a flood cannot flood the log too
		if errors.Is(err, ErrBadSignature) {
			if n := c.badSig.Add(1); n%1000 == 1 {
				c.log.Warn("kernel: dropped a message with a bad signature", "channel", ch, "total", n)
			}
		} else if n := c.malformed.Add(1); n%1000 == 1 {
			c.log.Warn("kernel: dropped a malformed message", "channel", ch, "err", err, "total", n)
		}
		return
	}
	c.received.Add(1)
	c.mu.RLock()
	defer c.mu.RUnlock()
	if w := c.waiters[m.ParentMsgID]; w != nil && m.ParentMsgID != "" {
		w.push(m)
	}
	for _, s := range c.subs {
		select {
		case s.ch <- m:
		default:
			c.subDrops.Add(1)
			s.drops.Add(1)
		}
	}
}

func (c *Client) pong([]byte) { c.lastPong.Store(time.Now().UnixNano()) }

// heartbeat pings once a second; ttd without an answer calls onHBLost once.
func (c *Client) heartbeat(ttd time.Duration) {
	defer close(c.hbDone)
	t := time.NewTicker(time.Second / 2)
	defer t.Stop()
	missed := false
	for {
		select {
		case <-c.hbStop:
			return
		case <-t.C:
		}
		c.mu.RLock()
		s := c.socks
		c.mu.RUnlock()
		if s != nil {
			_ = s.hb.Send(zmq4.NewMsgFrom([]byte{}, []byte("ping")))
		}
		age := time.Since(time.Unix(0, c.lastPong.Load()))
		if age > time.Second {
			c.hbMisses.Add(1)
		}
		if age > ttd && !missed {
			missed = true
			c.log.Warn("kernel: heartbeat lost", "silent_for", age.Round(time.Millisecond))
			if c.onHBLost != nil {
				c.onHBLost()
			}
		} else if age <= ttd {
			missed = false
		}
	}
}

// send signs m and writes it on ch.
func (c *Client) send(ch Channel, m *Message) error {
	c.mu.RLock()
	s, dead := c.socks, c.dead
	c.mu.RUnlock()
	if dead != nil {
		return dead
	}
	if s == nil {
		return ErrClosed
	}
	sock, err := s.socket(ch)
	if err != nil {
		return err
	}
	if err := sock.Send(zmq4.NewMsgFrom(c.session.Encode(m)...)); err != nil {
		return fmt.Errorf("kernel: send %s on %s: %w", m.MsgType, ch, err)
	}
	c.sent.Add(1)
	return nil
}

// Send writes m on ch as given (header, parent, identities untouched) and signs it with this
// connection's key: a gateway forwards its clients' messages through it. Replies reach subscribers.
func (c *Client) Send(ch Channel, m *Message) error {
	if m == nil {
		return fmt.Errorf("kernel: Send: nil message")
	}
	return c.send(ch, m)
}

// Request sends m on ch (shell or control) and returns the reply whose parent it is. A message from
// NewMessage gets this client's session.
func (c *Client) Request(ctx context.Context, ch Channel, m *Message) (*Message, error) {
	return c.request(ctx, ch, m, false)
}

// request is Request; duringRestart lets the restart itself talk to the old process.
func (c *Client) request(ctx context.Context, ch Channel, m *Message, duringRestart bool) (*Message, error) {
	if err := m.withSession(c.session.ID); err != nil {
		return nil, err
	}
	w, err := c.register(ctx, m.MsgID, duringRestart)
	if err != nil {
		return nil, err
	}
	defer c.unregister(m.MsgID)
	if err := c.send(ch, m); err != nil {
		return nil, err
	}
	for {
		r, err := w.next(ctx)
		if err != nil {
			return nil, fmt.Errorf("kernel: %s: %w", m.MsgType, err)
		}
		if r.Channel == ch {
			return r, nil
		}
	}
}

// KernelInfo asks the kernel for its kernel_info_reply content.
func (c *Client) KernelInfo(ctx context.Context) (json.RawMessage, error) {
	m, err := newMessage("kernel_info_request", c.session.ID, nil)
	if err != nil {
		return nil, err
	}
	r, err := c.Request(ctx, Shell, m)
	if err != nil {
		return nil, err
	}
	return r.Content, nil
}

// Subscribe returns a channel that receives every incoming message on all channels (including
// ones with no known parent: other clients' requests, background threads). A subscriber whose buffer
// is full misses messages (counted in Stats.SubscriberDrops) rather than stall the kernel client. The
// channel is closed by cancel or when the client closes or the kernel dies.
func (c *Client) Subscribe(buffer int) (<-chan *Message, func()) {
	ch, _, cancel := c.SubscribeCounted(buffer)
	return ch, cancel
}

// SubscribeCounted is Subscribe that also says how many messages this subscriber has missed so far,
// so that what it builds from them (a person's cell) can be marked incomplete instead of silently
// short.
func (c *Client) SubscribeCounted(buffer int) (msgs <-chan *Message, missed func() uint64, cancel func()) {
	s := subscriber{ch: make(chan *Message, max(buffer, 1)), drops: new(atomic.Uint64)}
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		close(s.ch)
		return s.ch, s.drops.Load, func() {}
	}
	id := c.nextSub
	c.nextSub++
	c.subs[id] = s
	c.mu.Unlock()
	var once sync.Once
	return s.ch, s.drops.Load, func() {
		once.Do(func() {
			c.mu.Lock()
			if s, ok := c.subs[id]; ok {
				delete(c.subs, id)
				close(s.ch)
			}
			c.mu.Unlock()
		})
	}
}

type subscriber struct {
	ch    chan *Message
	drops *atomic.Uint64
}

// Session returns this client's session id (also its DEALER identity).
func (c *Client) Session() string { return c.session.ID }

// ConnectionInfo returns the kernel's connection parameters.
func (c *Client) ConnectionInfo() ConnectionInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.info
}

// Stats returns counters since the client was made.
func (c *Client) Stats() Stats {
	return Stats{
		Sent: c.sent.Load(), Received: c.received.Load(), BadSignatures: c.badSig.Load(),
		Malformed: c.malformed.Load(), SubscriberDrops: c.subDrops.Load(), HeartbeatMisses: c.hbMisses.Load(),
		Restarts: c.restarts.Load(),
	}
}

// Done is closed when the client can no longer talk to the kernel (closed, or the kernel died).
func (c *Client) Done() <-chan struct{} { return c.done }

// Err says why Done is closed.
func (c *Client) Err() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.dead
}

func (c *Client) deadErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// Close disconnects; pending requests fail with ErrClosed. It does not stop the kernel.
func (c *Client) Close() error {
	c.markDead(ErrClosed)
	return nil
}

// markDead ends the client with err: pending requests and subscribers are released, sockets closed.
func (c *Client) markDead(err error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.dead = err
		socks := c.socks
		c.socks = nil
		for id, w := range c.waiters {
			w.fail(err)
			delete(c.waiters, id)
		}
		for id, s := range c.subs {
			close(s.ch)
			delete(c.subs, id)
		}
		close(c.done)
		c.mu.Unlock()
		if socks != nil {
			socks.close()
		}
		close(c.hbStop)
	})
}

// beginRestart fails every pending request with ErrRestarted and holds new ones until endRestart,
// so that nothing is sent into the sockets of a process that is going away.
func (c *Client) beginRestart() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.restarting == nil {
		c.restarting = make(chan struct{})
	}
	for id, w := range c.waiters {
		w.fail(ErrRestarted)
		delete(c.waiters, id)
	}
}

// endRestart releases the requests held by beginRestart (they then fail if the restart failed).
func (c *Client) endRestart() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.restarting != nil {
		close(c.restarting)
		c.restarting = nil
	}
}

// register makes the mailbox for a request's replies; during a restart it waits for the new process.
func (c *Client) register(ctx context.Context, msgID string, duringRestart bool) (*waiter, error) {
	for {
		c.mu.Lock()
		if c.dead != nil {
			c.mu.Unlock()
			return nil, c.dead
		}
		if hold := c.restarting; hold != nil && !duringRestart {
			c.mu.Unlock()
			select {
			case <-hold:
				continue
			case <-c.done:
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		w := newWaiter()
		c.waiters[msgID] = w
		c.mu.Unlock()
		return w, nil
	}
}

// route sends the replies to another request (msgID) to w as well: a barrier's messages then queue
// behind the ones that came before them.
func (c *Client) route(msgID string, w *waiter) {
	c.mu.Lock()
	if c.dead == nil {
		c.waiters[msgID] = w
	}
	c.mu.Unlock()
}

func (c *Client) unregister(msgID string) {
	c.mu.Lock()
	delete(c.waiters, msgID)
	c.mu.Unlock()
}

// waiter is an unbounded mailbox for the messages of one request.
type waiter struct {
	mu     sync.Mutex
	q      []*Message
	err    error
	notify chan struct{}
}

func newWaiter() *waiter { return &waiter{notify: make(chan struct{}, 1)} }

func (w *waiter) push(m *Message) {
	w.mu.Lock()
	w.q = append(w.q, m)
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *waiter) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// pop returns the next queued message, or the failure once the queue is empty; ok is false when
// there is neither (wait on notify).
func (w *waiter) pop() (m *Message, err error, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.q) > 0 {
		m = w.q[0]
		w.q[0] = nil
		w.q = w.q[1:]
		return m, nil, true
	}
	if w.err != nil {
		return nil, w.err, true
	}
	return nil, nil, false
}

// next returns the next message; queued messages come before a failure.
func (w *waiter) next(ctx context.Context) (*Message, error) {
	for {
		if m, err, ok := w.pop(); ok {
			return m, err
		}
		select {
		case <-w.notify:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

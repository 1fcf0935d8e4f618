package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/pyrualean/pyrualean/kernel"
)

// outMsg is one message on its way to sockets; frames are encoded once per protocol and shared.
type outMsg struct {
	m    *wireMsg
	size int

	legacyOnce sync.Once
	legacy     []byte
	legacyBin  bool
	legacyErr  error

	v1Once sync.Once
	v1     []byte
}

func newOutMsg(m *wireMsg) *outMsg {
	size := len(m.Header) + len(m.ParentHeader) + len(m.Metadata) + len(m.Content) + 64
	for _, b := range m.Buffers {
		size += len(b)
	}
	return &outMsg{m: m, size: size}
}

func (o *outMsg) frame(v1 bool) ([]byte, bool, error) {
	if v1 {
		o.v1Once.Do(func() { o.v1 = encodeV1(o.m) })
		return o.v1, true, nil
	}
	o.legacyOnce.Do(func() { o.legacy, o.legacyBin, o.legacyErr = encodeLegacy(o.m) })
	return o.legacy, o.legacyBin, o.legacyErr
}

type pendingKey struct{ session, msgID string }

// maxPending bounds the request→socket routing table; the oldest entries go first.
const maxPending = 4096

// managedKernel is one kernel the gateway serves: a single kernel client fanned out to every socket.
// IOPub goes to all; shell/control/stdin replies go to the socket whose request they answer.
type managedKernel struct {
	id, name string
	external bool      // added with AddKernel (a live episode): the agent owns its lifetime
	live     *LiveSpec // the spec an added kernel is listed under (nil: name is an ordinary kernelspec)
	log      *slog.Logger
	ringMax  [2]int
	// relaunch starts a replacement process when the kernel is dead (nil: not ours to relaunch);
	// autoRestart does so by itself when it dies, as jupyter_server's restarter.
	relaunch    func(context.Context) (Kernel, error)
	autoRestart bool
	life        sync.Mutex // serialises restarts

	mu            sync.Mutex
	h             Kernel // the current process; replaced when a dead kernel is relaunched
	upSince       time.Time
	autoRestarts  int // automatic restarts in a row, each after less than stableStart up
	st            *execState
	lastActivity  time.Time
	kernelSession string                // header.session of the kernel, reused for synthetic status
	conns         map[*wsConn]struct{}  // live sockets (several may share a client session id)
	cursors       map[string]cursor     // where each disconnected session stopped, kept for backlogAge
	ring          *backlog              // recent messages for reconnecting sessions
	pending       map[pendingKey]string // (request session, msg id) → client session id
	pendingOrder  []pendingKey
	closed        bool
	restarting    bool
	refusals      []Refusal // what the gateway refused to do to this kernel, newest last (bounded)
	// agentThinking: the live episode's agent is deciding its next call (its model or CLI at work, no
	// cell running): clients see the kernel busy, as a person would expect of a kernel someone is
	// working on (agentbusy.go).
	agentThinking bool

	subCancel func()
}

// Refusal is one thing a client asked of a kernel that the gateway refused (restart or shutdown of a
// live episode's kernel). Episodes list them so JupyterLab can say so instead of showing nothing.
type Refusal struct {
	At      string `json:"at"`
	Action  string `json:"action"`
	Reason  string `json:"reason"`  // short, for a person: "restarting it would lose the robot"
	Message string `json:"message"` // the whole error
}

// maxRefusals bounds the refusals kept per kernel.
const maxRefusals = 50

// refuse records that the gateway refused action on a live episode's kernel, and why, and returns
// the error (wrapping ErrForbidden).
func (mk *managedKernel) refuse(action, reason string) error {
	msg := fmt.Sprintf("kernel %s belongs to a live episode; %s (%s refused)", mk.id, reason, action)
	mk.mu.Lock()
	mk.refusals = append(mk.refusals, Refusal{At: jupyterTime(time.Now()), Action: action, Reason: reason, Message: msg})
	if n := len(mk.refusals); n > maxRefusals {
		mk.refusals = append([]Refusal(nil), mk.refusals[n-maxRefusals:]...)
	}
	mk.mu.Unlock()
	mk.log.Info("refused", "action", action, "reason", msg)
	return fmt.Errorf("%w: %s", ErrForbidden, msg)
}

// refusalList is a copy of the refusals, oldest first.
func (mk *managedKernel) refusalList() []Refusal {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	return append([]Refusal{}, mk.refusals...)
}

// Restarter limits, as jupyter_client's KernelRestarter: a kernel that dies again within stableStart of
// each start is given up on after restartLimit tries.
const (
	restartLimit = 5
	stableStart  = 10 * time.Second
)

func newManagedKernel(id, name string, h Kernel, external bool, log *slog.Logger, ringCount, ringBytes int) *managedKernel {
	mk := &managedKernel{
		id: id, name: name, h: h, external: external, log: log.With("kernel", id),
		ringMax: [2]int{ringCount, ringBytes},
		st:      newExecState(), lastActivity: time.Now(),
		conns: map[*wsConn]struct{}{}, cursors: map[string]cursor{}, ring: newBacklog(ringCount, ringBytes),
		pending: map[pendingKey]string{}, upSince: time.Now(),
	}
	return mk
}

// start subscribes to the kernel client and learns the kernel's session; the kernel is ready by now.
func (mk *managedKernel) start(ctx context.Context) {
	mk.follow(mk.handle())
	mk.learnSession(ctx)
	mk.mu.Lock()
	if mk.st.state == StateStarting {
		mk.st.set(StateIdle)
	}
	mk.mu.Unlock()
}

// handle is the current kernel process.
func (mk *managedKernel) handle() Kernel {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	return mk.h
}

// follow subscribes to h's client and routes what it receives until h is replaced or closed.
func (mk *managedKernel) follow(h Kernel) {
	sub, cancel := subscribe(h, 1024)
	mk.mu.Lock()
	prev := mk.subCancel
	mk.subCancel = cancel
	mk.mu.Unlock()
	if prev != nil {
		prev()
	}
	go mk.pump(h, sub)
}

func (mk *managedKernel) learnSession(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := kernelSession(ctx, mk.handle())
	if err != nil {
		mk.log.Warn("kernel_info for the kernel session failed", "err", err)
		return
	}
	mk.mu.Lock()
	mk.kernelSession = s
	mk.mu.Unlock()
}

// pump reads everything the kernel client receives and routes it; it also notices kernel death.
func (mk *managedKernel) pump(h Kernel, sub <-chan *wireMsg) {
	done := h.Done()
	for {
		select {
		case m, ok := <-sub:
			if !ok {
				// The kernel client closes subscriptions when the kernel dies (done is closed first).
				select {
				case <-h.Done():
					mk.markDead(h)
				default:
				}
				return
			}
			mk.fromKernel(m)
		case <-done:
			done = nil
			mk.markDead(h)
		}
	}
}

// markDead tells every socket that process h died; with autoRestart a replacement is started.
func (mk *managedKernel) markDead(h Kernel) {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if mk.closed || mk.h != h || mk.st.state == StateDead || mk.restarting {
		return
	}
	err := h.Err()
	if errors.Is(err, kernel.ErrShutdown) {
		mk.log.Info("kernel shut down by its owner")
	} else {
		mk.log.Warn("kernel died", "err", err)
	}
	mk.st.set(StateDead)
	mk.broadcastLocked(mk.syntheticStatusLocked(StateDead))
	if !mk.autoRestart || mk.relaunch == nil || errors.Is(err, kernel.ErrShutdown) {
		return
	}
	if time.Since(mk.upSince) >= stableStart {
		mk.autoRestarts = 0
	}
	if mk.autoRestarts >= restartLimit {
		mk.log.Error("kernel keeps dying; not restarting it again", "restarts", mk.autoRestarts)
		return
	}
	mk.autoRestarts++
	mk.log.Info("restarting the dead kernel", "attempt", mk.autoRestarts)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := mk.restart(ctx); err != nil {
			mk.log.Warn("automatic restart failed", "err", err)
		}
	}()
}

// fromKernel routes one message from the kernel.
func (mk *managedKernel) fromKernel(m *wireMsg) {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if mk.closed {
		return
	}
	if m.Channel == "iopub" {
		if m.MsgType == "iopub_welcome" {
			return // our own subscription's handshake, not the clients'
		}
		if m.Session != "" {
			mk.kernelSession = m.Session
		}
		if tracked(m.MsgType) || tracked(m.ParentMsgType) || mk.st.state == StateBusy {
			mk.lastActivity = time.Now()
		}
		if m.MsgType == "status" {
			var c struct {
				ExecutionState string `json:"execution_state"`
			}
			if json.Unmarshal(m.Content, &c) == nil && !mk.restarting {
				mk.st.observeStatus(c.ExecutionState, m.ParentMsgID, m.ParentMsgType)
			}
		}
		mk.broadcastLocked(newOutMsg(m))
		if m.MsgType == "status" && mk.agentThinking && mk.st.modelState() == StateIdle {
			mk.broadcastLocked(mk.syntheticStatusLocked(StateBusy)) // the kernel is done, the agent is not
		}
		return
	}
	key := pendingKey{m.ParentSession, m.ParentMsgID}
	target, ok := mk.pending[key]
	if !ok {
		return // a reply to the agent's own request, or to a socket long gone
	}
	if m.Channel != "stdin" && m.MsgType != "" && len(m.MsgType) > 6 && m.MsgType[len(m.MsgType)-6:] == "_reply" {
		delete(mk.pending, key)
	}
	mk.deliverLocked(target, newOutMsg(m))
}

// fromClient forwards a socket's message to the kernel, remembering who asked.
func (mk *managedKernel) fromClient(c *wsConn, m *wireMsg) error {
	mk.mu.Lock()
	if mk.st.state == StateDead {
		mk.answerDeadLocked(c, m)
		mk.mu.Unlock()
		return fmt.Errorf("kernel %s is dead: %w", mk.id, ErrNoSuchKernel)
	}
	if mk.external && m.MsgType == "shutdown_request" {
		mk.mu.Unlock()
		return mk.refuse("shutdown", "the agent is still using it")
	}
	if m.Channel == "shell" || m.Channel == "control" {
		key := pendingKey{m.Session, m.MsgID}
		if _, dup := mk.pending[key]; !dup {
			mk.pendingOrder = append(mk.pendingOrder, key)
		}
		mk.pending[key] = c.session
		for len(mk.pendingOrder) > maxPending {
			delete(mk.pending, mk.pendingOrder[0])
			mk.pendingOrder = mk.pendingOrder[1:]
		}
		if len(mk.pendingOrder) > 2*len(mk.pending)+64 {
			mk.compactPendingLocked()
		}
		if tracked(m.MsgType) {
			mk.lastActivity = time.Now()
		}
	}
	h := mk.h
	mk.mu.Unlock()
	return send(h, m)
}

// answerDeadLocked replies to a request sent to a dead kernel instead of dropping it: a `dead` status and
// an error reply (nbclient's DeadKernelError), so a client waiting on its reply does not hang.
func (mk *managedKernel) answerDeadLocked(c *wsConn, m *wireMsg) {
	c.enqueue(0, mk.syntheticStatusLocked(StateDead))
	base, ok := strings.CutSuffix(m.MsgType, "_request")
	if !ok || (m.Channel != "shell" && m.Channel != "control") {
		return
	}
	hint := "restart it: POST " + "/api/kernels/" + mk.id + "/restart"
	if mk.external {
		hint = "it belonged to an episode that ended"
	}
	content, _ := json.Marshal(map[string]any{"status": "error", "ename": "DeadKernelError",
		"evalue": fmt.Sprintf("kernel %s is dead; %s", mk.id, hint), "traceback": []string{}})
	header, _ := json.Marshal(map[string]string{
		"msg_id": uuid.NewString(), "msg_type": base + "_reply", "session": mk.kernelSession, "username": "kernel",
		"date": jupyterTime(time.Now()), "version": "5.3",
	})
	parent := m.Header
	if len(parent) == 0 {
		parent = emptyDict
	}
	reply := &wireMsg{Channel: m.Channel, Header: header, ParentHeader: parent, Metadata: emptyDict, Content: content,
		MsgType: base + "_reply", Session: mk.kernelSession, ParentMsgID: m.MsgID}
	mk.deliverLocked(c.session, newOutMsg(reply))
}

func (mk *managedKernel) compactPendingLocked() {
	kept := mk.pendingOrder[:0]
	seen := map[pendingKey]bool{}
	for _, k := range mk.pendingOrder {
		if _, ok := mk.pending[k]; ok && !seen[k] {
			seen[k] = true
			kept = append(kept, k)
		}
	}
	mk.pendingOrder = kept
}

// broadcastLocked records an IOPub message in the backlog and queues it on every socket.
func (mk *managedKernel) broadcastLocked(o *outMsg) {
	seq := mk.ring.add("", o)
	for c := range mk.conns {
		c.enqueue(seq, o)
	}
	mk.trimLocked()
}

// backlogAge is how long a disconnected session can come back and still get what it missed.
const backlogAge = 15 * time.Minute

type cursor struct {
	seq  uint64
	left time.Time
}

// trimLocked drops what no one can still need: messages every live socket has written, unless a
// disconnected session (seen within backlogAge) has not got them. An unwatched kernel keeps nothing.
func (mk *managedKernel) trimLocked() {
	now := time.Now()
	low := mk.ring.last()
	for s, c := range mk.cursors {
		if now.Sub(c.left) > backlogAge {
			delete(mk.cursors, s)
			continue
		}
		low = min(low, c.seq)
	}
	for c := range mk.conns {
		low = min(low, c.surelySeen(now))
	}
	mk.ring.dropThrough(low)
}

// deliverLocked records a message meant for one client session and queues it if that client is here.
func (mk *managedKernel) deliverLocked(target string, o *outMsg) {
	seq := mk.ring.add(target, o)
	for c := range mk.conns {
		if c.session == target {
			c.enqueue(seq, o)
		}
	}
	mk.trimLocked()
}

// syntheticStatusLocked builds an IOPub status the kernel did not send (dead, restarting, or the current
// state for a new client). It reuses the kernel's session: JupyterLab drops messages of other sessions.
func (mk *managedKernel) syntheticStatusLocked(state string) *outMsg {
	header, _ := json.Marshal(map[string]string{
		"msg_id": uuid.NewString(), "msg_type": "status", "session": mk.kernelSession, "username": "kernel",
		"date": jupyterTime(time.Now()), "version": "5.3",
	})
	content, _ := json.Marshal(map[string]string{"execution_state": state})
	m := &wireMsg{Channel: "iopub", Header: header, ParentHeader: emptyDict, Metadata: emptyDict, Content: content,
		MsgType: "status", Session: mk.kernelSession}
	return newOutMsg(m)
}

// attach registers a socket: a session seen before gets what it has not acknowledged; everyone gets the
// current state. A session that is still live on another socket (two tabs, or a reconnect that beats
// the old socket's teardown) resumes from the furthest-behind of those sockets, so nothing in flight
// to a dying socket is lost; the old socket is not replaced (jupyter_server does, and in gateway mode
// its abandoned upstream connections then knock out the live one).
func (mk *managedKernel) attach(c *wsConn) {
	mk.awaitDying(c.session)
	mk.mu.Lock()
	defer mk.mu.Unlock()
	cur, known := mk.cursors[c.session]
	from := cur.seq
	now := time.Now()
	for o := range mk.conns {
		if o.session == c.session {
			if seen := o.surelySeen(now); !known || seen < from {
				from = seen
			}
			known = true
		}
	}
	delete(mk.cursors, c.session)
	mk.conns[c] = struct{}{}
	// Where this socket starts, so trimming keeps exactly what it has yet to acknowledge.
	if !known {
		from = mk.ring.last()
	}
	c.start(from)
	if known {
		entries, gap := mk.ring.since(c.session, from)
		if gap {
			mk.log.Warn("backlog overflowed; the reconnecting client missed some messages", "session", c.session)
		}
		for _, e := range entries {
			c.enqueue(e.seq, e.msg)
		}
	}
	// The kernel's own status for a new client: execution_state survives page reloads.
	c.enqueue(0, mk.syntheticStatusLocked(mk.shownStateLocked()))
}

// dyingWait is how long a reconnecting session waits for its previous socket to finish reading: a
// client that dropped its connection and came straight back may still have acknowledgements queued
// on the old socket, and resuming before they are read would send those frames twice.
const dyingWait = 500 * time.Millisecond

func (mk *managedKernel) awaitDying(session string) {
	mk.mu.Lock()
	var old []*wsConn
	for o := range mk.conns {
		if o.session == session {
			old = append(old, o)
		}
	}
	mk.mu.Unlock()
	if len(old) == 0 {
		return
	}
	t := time.NewTimer(dyingWait)
	defer t.Stop()
	for _, o := range old {
		select {
		case <-o.gone:
		case <-t.C:
			return // a live second socket (another tab with the same session id)
		}
	}
}

func (mk *managedKernel) sessionLiveLocked(session string) bool {
	for c := range mk.conns {
		if c.session == session {
			return true
		}
	}
	return false
}

// detach forgets a socket, keeping its cursor so a reconnect with the same session id can resume.
func (mk *managedKernel) detach(c *wsConn) {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if _, ok := mk.conns[c]; ok {
		delete(mk.conns, c)
		if mk.sessionLiveLocked(c.session) {
			return
		}
		now := time.Now()
		mk.cursors[c.session] = cursor{seq: c.surelySeen(now), left: now}
		if len(mk.cursors) > 1024 { // bounded: forget the session furthest behind
			var worst string
			lowest := ^uint64(0)
			for s, q := range mk.cursors {
				if q.seq < lowest {
					worst, lowest = s, q.seq
				}
			}
			delete(mk.cursors, worst)
		}
	}
}

// restart restarts the kernel, telling sockets restarting then idle; sockets stay open across it.
// A dead kernel (killed, or stopped by a client's shutdown_request) is relaunched from its spec.
func (mk *managedKernel) restart(ctx context.Context) error {
	mk.life.Lock()
	defer mk.life.Unlock()
	mk.mu.Lock()
	h := mk.h
	dead := mk.st.state == StateDead || h.Err() != nil
	mk.restarting = true
	mk.st.set(StateRestarting)
	mk.broadcastLocked(mk.syntheticStatusLocked(StateRestarting))
	mk.mu.Unlock()
	var err error
	switch {
	case !dead:
		err = h.Restart(ctx)
	case mk.relaunch == nil:
		err = fmt.Errorf("kernel is dead and was not started by the gateway: %w", h.Err())
	default:
		var nh Kernel
		if nh, err = mk.relaunch(ctx); err == nil {
			mk.mu.Lock()
			mk.h = nh
			mk.mu.Unlock()
			mk.follow(nh)
			_ = h.Shutdown(ctx) // already dead: this only releases what is left of it
		}
	}
	mk.mu.Lock()
	mk.restarting = false
	mk.mu.Unlock()
	if err != nil {
		mk.mu.Lock()
		mk.st.set(StateDead)
		mk.broadcastLocked(mk.syntheticStatusLocked(StateDead))
		mk.mu.Unlock()
		return fmt.Errorf("restart kernel %s: %w", mk.id, err)
	}
	mk.learnSession(ctx)
	mk.mu.Lock()
	mk.st.set(StateIdle)
	mk.lastActivity = time.Now()
	mk.upSince = time.Now()
	mk.broadcastLocked(mk.syntheticStatusLocked(StateIdle))
	mk.mu.Unlock()
	// A restart that failed half-way (the old process gone, no new one) is noticed by the pump.
	return nil
}

// close stops routing and closes every socket; shutting the process down is the caller's choice.
func (mk *managedKernel) close(code int, reason string) {
	mk.mu.Lock()
	if mk.closed {
		mk.mu.Unlock()
		return
	}
	mk.closed = true
	conns := make([]*wsConn, 0, len(mk.conns))
	for c := range mk.conns {
		conns = append(conns, c)
	}
	mk.conns = map[*wsConn]struct{}{}
	cancel := mk.subCancel
	mk.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, c := range conns {
		c.closeWith(code, reason)
	}
}

// model is the Jupyter kernel model.
func (mk *managedKernel) model() kernelModel {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	return kernelModel{ID: mk.id, Name: mk.name, LastActivity: jupyterTime(mk.lastActivity),
		ExecutionState: mk.shownStateLocked(), Connections: len(mk.conns)}
}

func (mk *managedKernel) idleFor(now time.Time) (time.Duration, bool) {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	// Dead kernels are always culled; live ones only when nobody is connected and they are not busy.
	cullable := !mk.external && (mk.st.state == StateDead || (len(mk.conns) == 0 && mk.st.state != StateBusy))
	return now.Sub(mk.lastActivity), cullable
}

// jupyterTime formats like jupyter_server: microseconds and a Z (its gateway client parses exactly that).
func jupyterTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

package gateway

import (
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

const (
	pingInterval = 30 * time.Second
	pongWait     = 90 * time.Second
	writeWait    = 10 * time.Second
)

// queued is one frame waiting for a socket's writer; seq 0 marks a message that is not in the backlog.
type queued struct {
	seq uint64
	msg *outMsg
}

// wsConn is one client WebSocket on a kernel. A writer goroutine owns all writes; a client too slow to
// keep up is disconnected (it can reconnect with its session_id and resume) instead of slowing others.
//
// What the client really read is known from WebSocket pongs, not from successful writes: a write only
// reaches the kernel's socket buffer, and a client that has closed (or vanished) never reads what is
// still in flight. Each backlog frame is followed by a ping carrying its sequence number; a client's
// WebSocket layer answers that ping when its reader comes to it, after it handed the frame over, so
// the pong says that frame was read. (A ping before its frame is answered before the frame is read: a
// WebSocketApp of Python's websocket-client, closed from another thread between the two, can lose a
// frame it acknowledged.) Frames written but not acknowledged are sent again when the session comes back: none
// is lost, and what repeats is the tail the client read after its last answered ping (at least once).
type wsConn struct {
	ws      *websocket.Conn
	session string
	v1      bool
	log     *slog.Logger

	out   chan queued
	acked atomic.Uint64 // last backlog sequence number the client acknowledged (pong) reading
	trail *ackTrail     // non-nil for a relay or a browser: its acknowledgements count only trail.hold late (acks.go)
	// drainBy (unix nanoseconds, 0 = not yet) is when the reader must give up once the writer has
	// ended: the reader, not the writer, ends the connection, so acknowledgements already in the
	// socket's receive buffer are still read (a writer that closed the connection on a write error
	// would lose them, and a reconnecting session would get those frames twice).
	drainBy    atomic.Int64
	writerDone chan struct{}

	closeOnce sync.Once
	closing   chan struct{}
	gone      chan struct{} // closed once the read loop ended and the kernel forgot this socket
	closeCode int
	closeMsg  string
}

func newWSConn(ws *websocket.Conn, session string, v1 bool, hold time.Duration, queue int, log *slog.Logger) *wsConn {
	c := &wsConn{ws: ws, session: session, v1: v1, log: log, out: make(chan queued, queue), closing: make(chan struct{}),
		gone: make(chan struct{}), writerDone: make(chan struct{})}
	if hold > 0 {
		c.trail = &ackTrail{hold: hold}
	}
	return c
}

// start sets where the socket starts: it has seen everything up to seq.
func (c *wsConn) start(seq uint64) {
	c.acked.Store(seq)
	if c.trail != nil {
		c.trail.reset(seq)
	}
}

// surelySeen is the last backlog sequence number the client's reader has surely seen, as of now: what
// it acknowledged, or for a relay or a browser what it acknowledged trail.hold ago.
func (c *wsConn) surelySeen(now time.Time) uint64 {
	if c.trail != nil {
		return min(c.acked.Load(), c.trail.asOf(now.Add(-c.trail.hold)))
	}
	return c.acked.Load()
}

func (c *wsConn) enqueue(seq uint64, o *outMsg) {
	select {
	case c.out <- queued{seq, o}:
	default:
		c.closeWith(websocket.CloseTryAgainLater, "client too slow: reconnect with the same session_id to resume")
	}
}

// closeWith asks the writer to send a close frame and end the connection.
func (c *wsConn) closeWith(code int, reason string) {
	c.closeOnce.Do(func() {
		c.closeCode, c.closeMsg = code, cleanReason(reason)
		close(c.closing)
	})
}

// writeLoop sends queued frames and pings until the connection closes.
func (c *wsConn) writeLoop() {
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	defer close(c.writerDone)
	defer c.stopReading()
	for {
		select {
		case q := <-c.out:
			if err := c.write(q); err != nil {
				c.log.Debug("websocket write failed", "err", err)
				c.closeWith(websocket.CloseGoingAway, "")
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				return
			}
		case <-c.closing:
			// Flush what is already queued (e.g. a final dead status), then say goodbye.
		flush:
			for {
				select {
				case q := <-c.out:
					if c.write(q) != nil {
						return
					}
				default:
					break flush
				}
			}
			msg := websocket.FormatCloseMessage(c.closeCode, c.closeMsg)
			_ = c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
			return
		}
	}
}

func (c *wsConn) write(q queued) error {
	frame, binary, err := q.msg.frame(c.v1)
	if err != nil {
		c.log.Warn("dropping a kernel message that cannot be encoded", "err", err)
		return nil
	}
	kind := websocket.TextMessage
	if binary {
		kind = websocket.BinaryMessage
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
	if err := c.ws.WriteMessage(kind, frame); err != nil || q.seq == 0 {
		return err
	}
	// The ping follows its frame: a reader meets it only once it has handed that frame over.
	return c.ws.WriteControl(websocket.PingMessage, strconv.AppendUint(nil, q.seq, 10), time.Now().Add(writeWait))
}

// drainWait is how long the reader goes on after the writer ended: long enough to read what the client
// already sent (its last acknowledgements, its close frame), short enough not to keep a dead socket.
const drainWait = time.Second

// stopReading tells the reader to end within drainWait.
func (c *wsConn) stopReading() {
	by := time.Now().Add(drainWait)
	c.drainBy.Store(by.UnixNano())
	_ = c.ws.SetReadDeadline(by)
}

// extendRead pushes the read deadline out by pongWait, unless the writer has ended. The second look at
// drainBy closes the race with stopReading: whichever deadline is set last, the drain one wins.
func (c *wsConn) extendRead() error {
	if by := c.drainBy.Load(); by != 0 {
		return c.ws.SetReadDeadline(time.Unix(0, by))
	}
	err := c.ws.SetReadDeadline(time.Now().Add(pongWait))
	if by := c.drainBy.Load(); by != 0 {
		return c.ws.SetReadDeadline(time.Unix(0, by))
	}
	return err
}

// onPong records the acknowledgement a pong carries (keep-alive pings carry none).
func (c *wsConn) onPong(data string) {
	seq, err := strconv.ParseUint(data, 10, 64)
	if err != nil {
		return
	}
	for {
		cur := c.acked.Load()
		if seq <= cur {
			return
		}
		if c.acked.CompareAndSwap(cur, seq) {
			if c.trail != nil {
				c.trail.record(time.Now(), seq)
			}
			return
		}
	}
}

// readLoop decodes client frames and hands them to the kernel until the client goes away or misbehaves.
func (c *wsConn) readLoop(mk *managedKernel, maxBytes int64) {
	c.ws.SetReadLimit(maxBytes)
	_ = c.extendRead()
	c.ws.SetPongHandler(func(data string) error {
		c.onPong(data)
		return c.extendRead()
	})
	for {
		kind, data, err := c.ws.ReadMessage()
		if err != nil {
			switch {
			case errors.Is(err, websocket.ErrReadLimit):
				c.log.Warn("closing a websocket that sent an oversize message", "session", c.session, "limit", maxBytes)
				c.closeWith(websocket.CloseMessageTooBig, "message exceeds the gateway's maximum message size")
			case websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived):
				c.closeWith(websocket.CloseNormalClosure, "")
			default:
				c.closeWith(websocket.CloseGoingAway, "")
			}
			return
		}
		_ = c.extendRead()
		var m *wireMsg
		switch {
		case c.v1:
			if kind != websocket.BinaryMessage {
				err = errors.Join(ErrBadFrame, errors.New("v1 protocol frames must be binary"))
				break
			}
			m, err = decodeV1(data)
		case kind == websocket.BinaryMessage:
			m, err = decodeLegacyBinary(data)
		default:
			m, err = decodeLegacyText(data)
		}
		if err != nil {
			c.log.Warn("closing a websocket that sent a malformed message", "session", c.session, "err", err)
			c.closeWith(websocket.CloseInvalidFramePayloadData, err.Error())
			return
		}
		if !validChannel(m.Channel) {
			c.log.Warn("ignoring a message on a channel clients cannot send on", "channel", m.Channel, "msg_type", m.MsgType)
			continue
		}
		if err := mk.fromClient(c, m); err != nil {
			c.log.Warn("message not delivered to the kernel", "msg_type", m.MsgType, "err", err)
		}
	}
}

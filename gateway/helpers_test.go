package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

type testWriter struct {
	t  testing.TB
	mu sync.Mutex
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(&testWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// startGateway runs a real gateway on a loopback port for a test that starts real kernels through it
// (or beside it): heavy, so skipped under -short.
func startGateway(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	nbtest.Heavy(t, "real kernels behind the gateway")
	return serveGateway(t, cfg)
}

// serveGateway runs a real gateway on a loopback port, for a test that starts no kernel (the HTTP
// surface, refusals, the episodes API): it runs in the fast tier too.
func serveGateway(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s := New(cfg)
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		s.Close()
	})
	return s, hs
}

// api does one authenticated request and decodes a JSON answer into out (when non-nil).
func api(t testing.TB, hs *httptest.Server, token, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		default:
			raw, _ := json.Marshal(b)
			rd = bytes.NewReader(raw)
		}
	}
	req, _ := http.NewRequest(method, hs.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "token "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		var e errorBody
		if json.Unmarshal(raw, &e) != nil || e.Reason == "" {
			t.Errorf("%s %s: error %d without a {reason,message} body: %s", method, path, resp.StatusCode, raw)
		}
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

// wsClient is a raw Jupyter WebSocket client for tests.
type wsClient struct {
	t        testing.TB
	ws       *websocket.Conn
	session  string
	v1       bool
	msgs     chan *wireMsg
	closed   chan struct{}
	closeMu  sync.Mutex
	closeErr error
}

func wsURL(base, kernelID, session, token string) string {
	u := "ws" + strings.TrimPrefix(base, "http") + "/api/kernels/" + kernelID + "/channels?session_id=" + session
	if token != "" {
		u += "&token=" + token
	}
	return u
}

func dialWS(t testing.TB, url, session string, v1 bool, header http.Header) (*wsClient, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	if v1 {
		d.Subprotocols = []string{ProtocolV1}
	}
	ws, resp, err := d.Dial(url, header)
	if err != nil {
		return nil, resp, err
	}
	c := &wsClient{t: t, ws: ws, session: session, v1: ws.Subprotocol() == ProtocolV1, msgs: make(chan *wireMsg, 4096), closed: make(chan struct{})}
	go c.read()
	t.Cleanup(func() { ws.Close() })
	return c, resp, nil
}

func (c *wsClient) read() {
	defer close(c.closed)
	for {
		kind, data, err := c.ws.ReadMessage()
		if err != nil {
			c.closeMu.Lock()
			c.closeErr = err
			c.closeMu.Unlock()
			return
		}
		var m *wireMsg
		switch {
		case c.v1:
			m, err = decodeV1(data)
		case kind == websocket.BinaryMessage:
			m, err = decodeLegacyBinary(data)
		default:
			m, err = decodeLegacyText(data)
		}
		if err != nil {
			c.t.Errorf("server sent a frame we cannot decode: %v", err)
			continue
		}
		if m.Channel == "" {
			c.t.Errorf("server frame without channel")
		}
		p := headerView{}
		_ = json.Unmarshal(m.ParentHeader, &p)
		m.ParentSession, m.ParentMsgType = p.Session, p.MsgType
		c.msgs <- m
	}
}

func (c *wsClient) closeError() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	return c.closeErr
}

// send writes a request and returns its msg_id.
func (c *wsClient) send(channel, msgType string, content any) string {
	c.t.Helper()
	id := uuid.NewString()
	h, _ := json.Marshal(map[string]string{"msg_id": id, "msg_type": msgType, "session": c.session, "username": "test",
		"version": "5.3", "date": jupyterTime(time.Now())})
	body, _ := json.Marshal(content)
	m := &wireMsg{Channel: channel, Header: h, ParentHeader: emptyDict, Metadata: emptyDict, Content: body, MsgID: id, MsgType: msgType}
	c.write(m)
	return id
}

func (c *wsClient) write(m *wireMsg) {
	c.t.Helper()
	var err error
	if c.v1 {
		err = c.ws.WriteMessage(websocket.BinaryMessage, encodeV1(m))
	} else {
		frame, bin, eerr := encodeLegacy(m)
		if eerr != nil {
			c.t.Fatal(eerr)
		}
		kind := websocket.TextMessage
		if bin {
			kind = websocket.BinaryMessage
		}
		err = c.ws.WriteMessage(kind, frame)
	}
	if err != nil {
		c.t.Fatalf("ws write: %v", err)
	}
}

func (c *wsClient) execute(code string) string {
	return c.send("shell", "execute_request", map[string]any{"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
}

// until collects messages until pred holds (that message included) or the timeout passes.
func (c *wsClient) until(timeout time.Duration, what string, pred func(*wireMsg) bool) []*wireMsg {
	c.t.Helper()
	var got []*wireMsg
	deadline := time.After(timeout)
	for {
		select {
		case m := <-c.msgs:
			got = append(got, m)
			if pred(m) {
				return got
			}
		case <-c.closed:
			// drain what arrived before the close
		drain:
			for {
				select {
				case m := <-c.msgs:
					got = append(got, m)
					if pred(m) {
						return got
					}
				default:
					break drain
				}
			}
			c.t.Fatalf("socket closed (%v) while waiting for %s; got %s", c.closeError(), what, summarize(got))
			return nil
		case <-deadline:
			c.t.Fatalf("timed out waiting for %s; got %s", what, summarize(got))
			return nil
		}
	}
}

// runCell executes code and returns everything up to both the idle status and the execute_reply of
// that request (the reply travels on shell, the status on iopub: either may come first).
func (c *wsClient) runCell(code string, timeout time.Duration) (string, []*wireMsg) {
	c.t.Helper()
	id := c.execute(code)
	idle, reply := false, false
	return id, c.until(timeout, "idle and reply after "+code, func(m *wireMsg) bool {
		idle = idle || isIdleFor(id)(m)
		reply = reply || (m.MsgType == "execute_reply" && m.ParentMsgID == id)
		return idle && reply
	})
}

func isIdleFor(id string) func(*wireMsg) bool {
	return func(m *wireMsg) bool { return m.MsgType == "status" && m.ParentMsgID == id && statusOf(m) == "idle" }
}

func statusOf(m *wireMsg) string {
	var c struct {
		ExecutionState string `json:"execution_state"`
	}
	_ = json.Unmarshal(m.Content, &c)
	return c.ExecutionState
}

// streamText joins the stdout/stderr text of msgs answering parent.
func streamText(msgs []*wireMsg, parent string) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.MsgType == "stream" && m.ParentMsgID == parent {
			var c struct{ Text string }
			_ = json.Unmarshal(m.Content, &c)
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func find(msgs []*wireMsg, msgType, parent string) *wireMsg {
	for _, m := range msgs {
		if m.MsgType == msgType && (parent == "" || m.ParentMsgID == parent) {
			return m
		}
	}
	return nil
}

func summarize(msgs []*wireMsg) string {
	parts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		s := m.Channel + ":" + m.MsgType
		if m.MsgType == "status" {
			s += "(" + statusOf(m) + ")"
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func closeCode(err error) int {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return -1
}

func waitClosed(t testing.TB, c *wsClient, timeout time.Duration) error {
	t.Helper()
	select {
	case <-c.closed:
		return c.closeError()
	case <-time.After(timeout):
		t.Fatalf("socket still open after %v", timeout)
		return nil
	}
}

func mustStatus(t testing.TB, got, want int, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: status %d, want %d", what, got, want)
	}
}

// launchOutside starts a pyrualean kernel outside the gateway, as an agent's episode kernel is (shut
// down when the test ends).
func launchOutside(t *testing.T, ctx context.Context) *kernel.Kernel {
	t.Helper()
	spec, err := kernel.FindSpec("pyrualean")
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Launch(ctx, spec, kernel.LaunchOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Shutdown(context.Background()) })
	return k
}

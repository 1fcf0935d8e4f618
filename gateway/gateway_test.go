package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
)

var lastActivityRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

func checkModel(t *testing.T, m kernelModel, name string) {
	t.Helper()
	if !uuidRE.MatchString(m.ID) || m.Name != name || !lastActivityRE.MatchString(m.LastActivity) || m.ExecutionState == "" {
		t.Fatalf("kernel model not in Jupyter's shape: %+v", m)
	}
}

// TestHTTPSurface covers auth, errors and kernelspecs without starting a kernel.
func TestHTTPSurface(t *testing.T) {
	_, hs := serveGateway(t, Config{Token: "secret", BaseURL: "/"})
	tests := []struct {
		name, method, path, auth string
		want                     int
	}{
		{"no token", "GET", "/api/kernels", "", 401},
		{"wrong token", "GET", "/api/kernels", "token nope", 401},
		{"header token", "GET", "/api/kernels", "token secret", 200},
		{"bearer", "GET", "/api/kernels", "Bearer secret", 200},
		{"query token", "GET", "/api/kernels?token=secret", "", 200},
		{"api version", "GET", "/api", "token secret", 200},
		{"unknown path", "GET", "/tree", "token secret", 404},
		{"unknown api", "GET", "/api/contents", "token secret", 404},
		{"unknown kernel", "GET", "/api/kernels/" + uuid.NewString(), "token secret", 404},
		{"interrupt unknown", "POST", "/api/kernels/" + uuid.NewString() + "/interrupt", "token secret", 404},
		{"ws unknown kernel", "GET", "/api/kernels/" + uuid.NewString() + "/channels", "token secret", 404},
		{"wrong method", "PUT", "/api/kernels", "token secret", 405},
		{"unknown spec", "GET", "/api/kernelspecs/nope", "token secret", 404},
		{"unknown episode", "GET", "/api/episodes/nope", "token secret", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, hs.URL+tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, raw)
			}
			if tt.want >= 400 {
				var e errorBody
				if json.Unmarshal(raw, &e) != nil || e.Reason != http.StatusText(tt.want) || e.Message == "" {
					t.Fatalf("error body not {reason,message}: %s", raw)
				}
			}
		})
	}

	t.Run("kernelspecs", func(t *testing.T) {
		var specs struct {
			Default     string `json:"default"`
			Kernelspecs map[string]struct {
				Name      string            `json:"name"`
				Spec      map[string]any    `json:"spec"`
				Resources map[string]string `json:"resources"`
			} `json:"kernelspecs"`
		}
		mustStatus(t, api(t, hs, "secret", "GET", "/api/kernelspecs", nil, &specs), 200, "kernelspecs")
		if specs.Default != "pyrualean" {
			t.Fatalf("default %q, want pyrualean (set up by scripts/setup.sh)", specs.Default)
		}
		ks, ok := specs.Kernelspecs["pyrualean"]
		if !ok || ks.Name != "pyrualean" || ks.Spec["language"] != "python" || ks.Spec["display_name"] == "" {
			t.Fatalf("pyrualean spec: %+v", ks)
		}
		logo := ks.Resources["logo-64x64"]
		if logo != "/kernelspecs/pyrualean/logo-64x64.png" {
			t.Fatalf("resources %v", ks.Resources)
		}
		req, _ := http.NewRequest("GET", hs.URL+logo+"?token=secret", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		png, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(png), "\x89PNG") {
			t.Fatalf("logo: %d, %d bytes", resp.StatusCode, len(png))
		}
		mustStatus(t, api(t, hs, "secret", "GET", "/kernelspecs/pyrualean/..%2Fkernel.json", nil, nil), 404, "path escape")
	})

	t.Run("bad start requests", func(t *testing.T) {
		mustStatus(t, api(t, hs, "secret", "POST", "/api/kernels", map[string]any{"name": "nope"}, nil), 404, "unknown spec")
		mustStatus(t, api(t, hs, "secret", "POST", "/api/kernels", `{"name":"pyrualean","env":"x"}`, nil), 400, "env not an object")
		mustStatus(t, api(t, hs, "secret", "POST", "/api/kernels", `{"name":`, nil), 400, "bad json")
		mustStatus(t, api(t, hs, "secret", "POST", "/api/kernels", map[string]any{"env": map[string]any{"KERNEL_X": strings.Repeat("a", 5000)}}, nil), 400, "oversize env")
		mustStatus(t, api(t, hs, "secret", "POST", "/api/kernels", map[string]any{"kernel_id": "not-a-uuid"}, nil), 400, "bad kernel id")
	})

	t.Run("websocket auth and origin", func(t *testing.T) {
		id := uuid.NewString()
		_, resp, err := dialWS(t, wsURL(hs.URL, id, "s", ""), "s", false, nil)
		if err == nil || resp == nil || resp.StatusCode != 401 {
			t.Fatalf("unauthenticated upgrade: err=%v resp=%v", err, resp)
		}
	})
}

// TestKernelsOverWebSocket drives real kernels through the REST API and raw WebSocket clients:
// several clients, both framings, replay on reconnect, bad frames, interrupt, restart, a killed kernel.
func TestKernelsOverWebSocket(t *testing.T) {
	const tok = "tok"
	srv, hs := startGateway(t, Config{Token: tok, MaxKernels: 2, MaxMessageBytes: 1 << 20, EnvAllow: []string{"PYRUALEAN_TEST_OK"}})

	// Two kernels, started concurrently (as jupyter_server would).
	type started struct {
		m    kernelModel
		code int
		loc  string
	}
	res := make(chan started, 2)
	for range 2 {
		go func() {
			req, _ := http.NewRequest("POST", hs.URL+"/api/kernels", strings.NewReader(
				`{"name":"pyrualean","env":{"KERNEL_FOO":"bar\n\u0007","PYRUALEAN_TEST_OK":"yes","SECRET_X":"leak"}}`))
			req.Header.Set("Authorization", "token "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				res <- started{}
				return
			}
			defer resp.Body.Close()
			var m kernelModel
			_ = json.NewDecoder(resp.Body).Decode(&m)
			res <- started{m, resp.StatusCode, resp.Header.Get("Location")}
		}()
	}
	a, b := <-res, <-res
	for _, s := range []started{a, b} {
		mustStatus(t, s.code, 201, "start kernel")
		checkModel(t, s.m, "pyrualean")
		if s.loc != "/api/kernels/"+s.m.ID {
			t.Fatalf("Location %q", s.loc)
		}
	}
	k1, k2 := a.m.ID, b.m.ID
	mustStatus(t, api(t, hs, tok, "POST", "/api/kernels", map[string]any{}, nil), 403, "third kernel over --max-kernels")

	var list []kernelModel
	mustStatus(t, api(t, hs, tok, "GET", "/api/kernels", nil, &list), 200, "list")
	if len(list) != 2 {
		t.Fatalf("list: %+v", list)
	}

	sa, sb := uuid.NewString(), uuid.NewString()
	ca, _, err := dialWS(t, wsURL(hs.URL, k1, sa, tok), sa, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	cb, _, err := dialWS(t, wsURL(hs.URL, k1, sb, tok), sb, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cb.v1 {
		t.Fatal("server did not select the v1 subprotocol")
	}
	// Each new client first learns the current execution_state, in the kernel's session.
	for _, c := range []*wsClient{ca, cb} {
		first := c.until(10*time.Second, "initial status", func(m *wireMsg) bool { return m.MsgType == "status" })
		if st := statusOf(first[len(first)-1]); st != "idle" || first[len(first)-1].Session == "" {
			t.Fatalf("initial status %q session %q", st, first[len(first)-1].Session)
		}
	}

	t.Run("env filtered", func(t *testing.T) {
		id, msgs := ca.runCell(`import os; print(repr(os.environ.get("KERNEL_FOO")), os.environ.get("PYRUALEAN_TEST_OK"), os.environ.get("SECRET_X"))`, 30*time.Second)
		if got := streamText(msgs, id); got != "'bar' yes None\n" {
			t.Fatalf("kernel env: %q", got)
		}
	})

	t.Run("several clients", func(t *testing.T) {
		// A's output reaches B (IOPub to all); A's reply does not.
		id, msgs := ca.runCell("x = 20\nprint('from A')", 30*time.Second)
		if find(msgs, "execute_reply", id) == nil || streamText(msgs, id) != "from A\n" {
			t.Fatalf("A got %s", summarize(msgs))
		}
		seen := cb.until(10*time.Second, "A's idle on B", isIdleFor(id))
		if streamText(seen, id) != "from A\n" || find(seen, "execute_reply", id) != nil {
			t.Fatalf("B saw %s", summarize(seen))
		}
		idB, msgsB := cb.runCell("x + 22", 30*time.Second)
		res := find(msgsB, "execute_result", idB)
		if res == nil || !strings.Contains(string(res.Content), `"42"`) || find(msgsB, "execute_reply", idB) == nil {
			t.Fatalf("B got %s", summarize(msgsB))
		}
		seenA := ca.until(10*time.Second, "B's idle on A", isIdleFor(idB))
		if find(seenA, "execute_reply", idB) != nil {
			t.Fatal("B's reply leaked to A")
		}
		var m kernelModel
		api(t, hs, tok, "GET", "/api/kernels/"+k1, nil, &m)
		if m.Connections != 2 {
			t.Fatalf("connections %d", m.Connections)
		}
	})

	t.Run("legacy binary frame with buffers", func(t *testing.T) {
		id := uuid.NewString()
		h, _ := json.Marshal(map[string]string{"msg_id": id, "msg_type": "execute_request", "session": sa, "username": "t", "version": "5.3"})
		ca.write(&wireMsg{Channel: "shell", Header: h, ParentHeader: emptyDict, Metadata: emptyDict,
			Content: json.RawMessage(`{"code":"print('bin ok')","silent":false}`), Buffers: [][]byte{{1, 2, 3}}, MsgType: "execute_request", MsgID: id})
		msgs := ca.until(30*time.Second, "idle", isIdleFor(id))
		if streamText(msgs, id) != "bin ok\n" {
			t.Fatalf("got %s", summarize(msgs))
		}
	})

	t.Run("reconnect replays what the session missed", func(t *testing.T) {
		sc := uuid.NewString()
		cc, _, err := dialWS(t, wsURL(hs.URL, k1, sc, tok), sc, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		cc.until(10*time.Second, "initial status", func(m *wireMsg) bool { return m.MsgType == "status" })
		id := cc.execute("import time; time.sleep(1.5); print('while you were away')")
		// Leave once the kernel has started the cell, so everything after is missed while away.
		cc.until(30*time.Second, "the cell's busy", func(m *wireMsg) bool {
			return m.MsgType == "status" && m.ParentMsgID == id && statusOf(m) == "busy"
		})
		cc.ws.Close()
		ca.until(30*time.Second, "the cell's idle on A", isIdleFor(id))
		again, _, err := dialWS(t, wsURL(hs.URL, k1, sc, tok), sc, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The reply (shell) and the idle (iopub) travel on different kernel sockets, so either may come
		// first: read until both are here.
		var gotIdle, gotReply bool
		msgs := again.until(10*time.Second, "replayed idle and reply", func(m *wireMsg) bool {
			gotIdle = gotIdle || isIdleFor(id)(m)
			gotReply = gotReply || (m.MsgType == "execute_reply" && m.ParentMsgID == id)
			return gotIdle && gotReply
		})
		if streamText(msgs, id) != "while you were away\n" || find(msgs, "execute_reply", id) == nil {
			t.Fatalf("replay: %s", summarize(msgs))
		}
		again.ws.Close()
	})

	t.Run("malformed and oversize frames close only that socket", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			kind  int
			frame []byte
			code  int
		}{
			{"not json", websocket.TextMessage, []byte("{nope"), websocket.CloseInvalidFramePayloadData},
			{"no header", websocket.TextMessage, []byte(`{"channel":"shell","content":{}}`), websocket.CloseInvalidFramePayloadData},
			{"bad binary", websocket.BinaryMessage, []byte{0, 0, 0, 9, 1}, websocket.CloseInvalidFramePayloadData},
			{"oversize", websocket.TextMessage, []byte(`{"x":"` + strings.Repeat("a", 2<<20) + `"}`), websocket.CloseMessageTooBig},
		} {
			s := uuid.NewString()
			bad, _, err := dialWS(t, wsURL(hs.URL, k1, s, tok), s, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			_ = bad.ws.WriteMessage(tc.kind, tc.frame)
			if code := closeCode(waitClosed(t, bad, 10*time.Second)); code != tc.code {
				t.Fatalf("%s: close code %d, want %d", tc.name, code, tc.code)
			}
		}
		id, msgs := ca.runCell("print('still here')", 30*time.Second)
		if streamText(msgs, id) != "still here\n" {
			t.Fatalf("A after bad clients: %s", summarize(msgs))
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		id := ca.execute("import time; time.sleep(60)")
		ca.until(10*time.Second, "busy", func(m *wireMsg) bool { return m.MsgType == "execute_input" && m.ParentMsgID == id })
		// Let the cell reach time.sleep: a SIGINT landing in ipykernel's own code before the cell runs can
		// lose the execute_reply (an ipykernel race, not the gateway's).
		time.Sleep(500 * time.Millisecond)
		var m kernelModel
		api(t, hs, tok, "GET", "/api/kernels/"+k1, nil, &m)
		if m.ExecutionState != "busy" {
			t.Errorf("model while running: %q", m.ExecutionState)
		}
		mustStatus(t, api(t, hs, tok, "POST", "/api/kernels/"+k1+"/interrupt", map[string]any{}, nil), 204, "interrupt")
		msgs := ca.until(20*time.Second, "idle", isIdleFor(id))
		if find(msgs, "execute_reply", id) == nil { // the reply (shell) may trail the idle status (iopub)
			msgs = append(msgs, ca.until(10*time.Second, "reply", func(m *wireMsg) bool { return m.MsgType == "execute_reply" && m.ParentMsgID == id })...)
		}
		if e := find(msgs, "execute_reply", id); e == nil || !strings.Contains(string(e.Content), `"ename":"KeyboardInterrupt"`) {
			t.Fatalf("interrupt: %s", summarize(msgs))
		}
	})

	t.Run("restart keeps sockets", func(t *testing.T) {
		var m kernelModel
		mustStatus(t, api(t, hs, tok, "POST", "/api/kernels/"+k1+"/restart", map[string]any{}, &m), 200, "restart")
		checkModel(t, m, "pyrualean")
		ca.until(10*time.Second, "restarting", func(m *wireMsg) bool { return m.MsgType == "status" && statusOf(m) == "restarting" })
		id, msgs := ca.runCell("print(x)", 30*time.Second)
		if e := find(msgs, "error", id); e == nil || !strings.Contains(string(e.Content), "NameError") {
			t.Fatalf("after restart: %s", summarize(msgs))
		}
	})

	t.Run("kernel killed under open sockets", func(t *testing.T) {
		se := uuid.NewString()
		ce, _, err := dialWS(t, wsURL(hs.URL, k2, se, tok), se, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		ce.until(10*time.Second, "initial status", func(m *wireMsg) bool { return m.MsgType == "status" })
		mk, _ := srv.kernel(k2)
		if err := syscall.Kill(mk.handle().Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		ce.until(15*time.Second, "dead", func(m *wireMsg) bool { return m.MsgType == "status" && statusOf(m) == "dead" })
		var m kernelModel
		mustStatus(t, api(t, hs, tok, "GET", "/api/kernels/"+k2, nil, &m), 200, "dead kernel model")
		if m.ExecutionState != "dead" {
			t.Fatalf("model of killed kernel: %+v", m)
		}
		// The server and the other kernel carry on.
		id, msgs := ca.runCell("print('alive')", 30*time.Second)
		if streamText(msgs, id) != "alive\n" {
			t.Fatalf("other kernel: %s", summarize(msgs))
		}
		mustStatus(t, api(t, hs, tok, "DELETE", "/api/kernels/"+k2, nil, nil), 204, "delete dead kernel")
	})

	mustStatus(t, api(t, hs, tok, "DELETE", "/api/kernels/"+k1, nil, nil), 204, "delete")
	waitClosed(t, ca, 10*time.Second)
	mustStatus(t, api(t, hs, tok, "GET", "/api/kernels/"+k1, nil, nil), 404, "deleted kernel")
}

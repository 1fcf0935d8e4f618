package gateway

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestDeadKernelComesBack: a kernel killed with SIGKILL, or stopped by a client's shutdown_request,
// answers requests with an error reply and a dead status, and POST …/restart brings it back (with
// AutoRestart it comes back by itself), sockets staying open.
func TestDeadKernelComesBack(t *testing.T) {
	const tok = "tok"
	srv, hs := startGateway(t, Config{Token: tok})
	var km kernelModel
	mustStatus(t, api(t, hs, tok, "POST", "/api/kernels", map[string]any{"name": "pyrualean"}, &km), 201, "start")
	session := uuid.NewString()
	c, _, err := dialWS(t, wsURL(hs.URL, km.ID, session, tok), session, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	mk, _ := srv.kernel(km.ID)
	kills := []struct {
		name string
		kill func()
	}{
		{"SIGKILL", func() {
			if err := syscall.Kill(mk.handle().Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}},
		{"shutdown_request", func() { c.send("control", "shutdown_request", map[string]any{"restart": false}) }},
	}
	for _, k := range kills {
		t.Run(k.name, func(t *testing.T) {
			id, msgs := c.runCell("x = 41", 30*time.Second)
			if e := find(msgs, "execute_reply", id); e != nil && strings.Contains(string(e.Content), `"error"`) {
				t.Fatalf("setup cell: %s", summarize(msgs))
			}
			k.kill()
			c.until(20*time.Second, "dead", func(m *wireMsg) bool { return m.MsgType == "status" && statusOf(m) == "dead" })
			var m kernelModel
			mustStatus(t, api(t, hs, tok, "GET", "/api/kernels/"+km.ID, nil, &m), 200, "dead model")
			if m.ExecutionState != "dead" {
				t.Fatalf("model after %s: %+v", k.name, m)
			}
			// A request to the dead kernel is answered, not dropped.
			id = c.execute("print('into the void')")
			msgs = c.until(10*time.Second, "reply from the dead", func(m *wireMsg) bool { return m.MsgType == "execute_reply" && m.ParentMsgID == id })
			if r := find(msgs, "execute_reply", id); !strings.Contains(string(r.Content), "DeadKernelError") || !strings.Contains(string(r.Content), `"status":"error"`) {
				t.Fatalf("reply from a dead kernel: %s", r.Content)
			}
			mustStatus(t, api(t, hs, tok, "POST", "/api/kernels/"+km.ID+"/restart", map[string]any{}, &m), 200, "restart a dead kernel")
			if m.ExecutionState != "idle" {
				t.Fatalf("model after restart: %+v", m)
			}
			id, msgs = c.runCell("print(globals().get('x', 'fresh'))", 30*time.Second)
			if got := streamText(msgs, id); got != "fresh\n" {
				t.Fatalf("cell after restart printed %q: %s", got, summarize(msgs))
			}
		})
	}
}

// TestAutoRestart: with AutoRestart a killed kernel is relaunched by itself, as jupyter_server's restarter does.
func TestAutoRestart(t *testing.T) {
	const tok = "tok"
	srv, hs := startGateway(t, Config{Token: tok, AutoRestart: true})
	var km kernelModel
	mustStatus(t, api(t, hs, tok, "POST", "/api/kernels", map[string]any{"name": "pyrualean"}, &km), 201, "start")
	session := uuid.NewString()
	c, _, err := dialWS(t, wsURL(hs.URL, km.ID, session, tok), session, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.until(10*time.Second, "initial status", func(m *wireMsg) bool { return m.MsgType == "status" })
	mk, _ := srv.kernel(km.ID)
	old := mk.handle().Pid()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.until(20*time.Second, "dead", func(m *wireMsg) bool { return m.MsgType == "status" && statusOf(m) == "dead" })
	c.until(60*time.Second, "idle after the automatic restart", func(m *wireMsg) bool {
		return m.MsgType == "status" && statusOf(m) == "idle" && m.ParentMsgID == ""
	})
	if mk.handle().Pid() == old {
		t.Fatal("same process after an automatic restart")
	}
	id, msgs := c.runCell("print('back')", 30*time.Second)
	if streamText(msgs, id) != "back\n" {
		t.Fatalf("after automatic restart: %s", summarize(msgs))
	}
}

package openenv

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// testServer is a Server on an httptest listener; its Close ends the sessions first.
func testServer(t *testing.T, change func(*Config)) (*Server, string) {
	t.Helper()
	base := spec.New()
	base.Sealed = spec.SealAuto
	cfg := Config{Base: base, Out: t.TempDir(), Robots: &robotapi.Registry{}, MaxSessions: 2, IdleTimeout: time.Minute,
		MaxFrameBytes: 4096, Limits: Limits{MaxTurns: 10, MaxSteps: 12, MaxBudgetS: 300, MaxCellTimeoutS: 60}}
	if change != nil {
		change(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	return srv, "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type frame struct {
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
}

func exchange(t *testing.T, c *websocket.Conn, msg any) frame {
	t.Helper()
	var err error
	if s, ok := msg.(string); ok {
		err = c.WriteMessage(websocket.TextMessage, []byte(s))
	} else {
		err = c.WriteJSON(msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return recv(t, c, 2*time.Minute)
}

func recv(t *testing.T, c *websocket.Conn, within time.Duration) frame {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	var f frame
	if err := c.ReadJSON(&f); err != nil {
		t.Fatalf("no frame: %v", err)
	}
	return f
}

func wantError(t *testing.T, f frame, code, text string) {
	t.Helper()
	msg, _ := f.Data["message"].(string)
	if f.Type != "error" || f.Data["code"] != code || !strings.Contains(msg, text) {
		t.Fatalf("got %+v, want an error frame %s with %q", f, code, text)
	}
}

// TestProtocolErrors: every frame the server cannot act on is an error frame naming why, and the
// session (and the server) go on.
func TestProtocolErrors(t *testing.T) {
	_, url := testServer(t, nil)
	c := dial(t, url)
	for _, tc := range []struct {
		name       string
		msg        any
		code, text string
	}{
		{"not JSON", `{"type": "step", `, CodeInvalidJSON, "Invalid JSON"},
		{"unknown type", map[string]any{"type": "jump"}, CodeUnknownType, `"jump"`},
		{"step before reset", map[string]any{"type": "step", "data": map[string]any{"code": "1"}}, CodeSessionError, "send reset first"},
		{"state before reset", map[string]any{"type": "state"}, CodeSessionError, "send reset first"},
		{"oversize", `{"type": "step", "data": {"code": "` + strings.Repeat("x", 10000) + `"}}`, CodeValidation, "over this server's limit of 4096 bytes"},
		{"unknown reset key", map[string]any{"type": "reset", "data": map[string]any{"sealed": "off"}}, CodeValidation, "not a setting this server lets a client choose"},
		{"bad reset value", map[string]any{"type": "reset", "data": map[string]any{"arm": "hands"}}, CodeValidation, "want one of cells, tools, program"},
		{"nested reset value", map[string]any{"type": "reset", "data": map[string]any{"task": []int{1}}}, CodeValidation, "want a string, number or boolean"},
		{"over the turn cap", map[string]any{"type": "reset", "data": map[string]any{"max_turns": 11}}, CodeValidation, "at most 10"},
		{"over the budget cap", map[string]any{"type": "reset", "data": map[string]any{"budget_s": 301}}, CodeValidation, "at most 300"},
		{"bad episode_id", map[string]any{"type": "reset", "data": map[string]any{"episode_id": "../x"}}, CodeValidation, "episode_id"},
		{"unknown task", map[string]any{"type": "reset", "data": map[string]any{"task": "no_such_task"}}, CodeExecution, "did not start"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantError(t, exchange(t, c, tc.msg), tc.code, tc.text) })
	}
	if err := c.WriteMessage(websocket.BinaryMessage, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	wantError(t, recv(t, c, 10*time.Second), CodeInvalidJSON, "binary frame")
}

func TestCapacityAndIdle(t *testing.T) {
	srv, url := testServer(t, func(c *Config) { c.MaxSessions, c.IdleTimeout = 1, 700*time.Millisecond })
	first := dial(t, url)
	wantError(t, exchange(t, first, map[string]any{"type": "state"}), CodeSessionError, "reset first")
	second := dial(t, url) // the upgrade succeeds; the queued error frame says why, then the close
	f := recv(t, second, 10*time.Second)
	wantError(t, f, CodeCapacityReached, "at capacity: 1 sessions")
	if _, _, err := second.ReadMessage(); err == nil {
		t.Fatal("the refused session stayed open")
	}
	// the first session expires when idle: an error frame, then the close; its slot is free again
	wantError(t, recv(t, first, 10*time.Second), CodeSessionError, "session expired")
	if _, _, err := first.ReadMessage(); err == nil {
		t.Fatal("the expired session stayed open")
	}
	for deadline := time.Now().Add(5 * time.Second); srv.Sessions() > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	third := dial(t, url)
	wantError(t, exchange(t, third, map[string]any{"type": "state"}), CodeSessionError, "reset first")
}

func TestParseAction(t *testing.T) {
	for _, tc := range []struct {
		data, tool, args, err string
	}{
		{`{"code": "print(1)"}`, "python", `{"code":"print(1)"}`, ""},
		{`{"tool": "python", "arguments": {"code": "x"}}`, "python", `{"code": "x"}`, ""},
		{`{"tool": "python", "arguments": "{\"code\": \"x\"}"}`, "python", `{"code": "x"}`, ""},
		{`{"tool": "finish"}`, "finish", `{}`, ""},
		{`{"tool": "nope", "arguments": "not json"}`, "nope", `not json`, ""},
		{`{"code": "x", "tool": "python"}`, "", "", "both"},
		{`{"arguments": {}}`, "", "", "names no tool"},
		{`[1]`, "", "", "not an action object"},
		{`null`, "", "", "step needs data"},
	} {
		name, args, err := parseAction(json.RawMessage(tc.data))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.data, err, tc.err)
			}
			continue
		}
		if err != nil || name != tc.tool || string(args) != tc.args {
			t.Errorf("%s: %q %s %v, want %q %s", tc.data, name, args, err, tc.tool, tc.args)
		}
	}
}

// TestEpisode drives a real (sealed where this machine can) tabletop episode over a raw socket:
// refused calls are observations the episode goes on after, the reference solution's cells solve it,
// finish ends it with reward 1 = result.json's success, and a client that goes away mid-episode leaves
// it interrupted while the server goes on.
func TestEpisode(t *testing.T) {
	if testing.Short() {
		t.Skip("boots real episodes")
	}
	srv, url := testServer(t, nil)
	c := dial(t, url)
	f := exchange(t, c, map[string]any{"type": "reset", "data": map[string]any{"task": "put_block_in_bowl", "seed": 0,
		"images": "none", "episode_id": "solve", "model": "scripted-test"}})
	if f.Type != "observation" {
		t.Fatalf("reset: %+v", f)
	}
	obs := f.Data["observation"].(map[string]any)
	if !strings.Contains(obs["text"].(string), "put_block_in_bowl") && !strings.Contains(obs["text"].(string), "bowl") {
		t.Fatalf("reset observation is not the prompt: %.200s", obs["text"])
	}
	if tools := obs["tools"].([]any); len(tools) != 2 {
		t.Fatalf("cells arm tools: %v", tools)
	}
	for _, tc := range []struct{ action, text string }{
		{`{"tool": "jump", "arguments": {}}`, "unknown tool: jump"},
		{`{"tool": "python", "arguments": {"source": "1"}}`, "malformed arguments for python"},
		{`{"tool": "python", "arguments": "{not json"}`, "malformed arguments for python"},
	} {
		f := exchange(t, c, map[string]any{"type": "step", "data": json.RawMessage(tc.action)})
		o := f.Data["observation"].(map[string]any)
		if f.Type != "observation" || f.Data["done"] != false || o["is_error"] != true || !strings.Contains(o["text"].(string), tc.text) {
			t.Fatalf("%s: %+v", tc.action, f)
		}
	}
	cells, err := solutionCells(filepath.Join(repoRoot(t), "robotapi/solutions/tabletop/put_block_in_bowl.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range cells {
		f := exchange(t, c, map[string]any{"type": "step", "data": map[string]any{"code": code}})
		if f.Type != "observation" || f.Data["done"] != false || f.Data["reward"] != 0.0 {
			t.Fatalf("cell %q: %+v", code, f)
		}
	}
	st := exchange(t, c, map[string]any{"type": "state"})
	if st.Type != "state" || st.Data["environment_success"] != true || st.Data["status"] != "running" || st.Data["step_count"] != 6.0 {
		t.Fatalf("state: %+v", st.Data)
	}
	f = exchange(t, c, map[string]any{"type": "step", "data": map[string]any{"tool": "finish", "arguments": map[string]any{"status": "success", "summary": "done"}}})
	if f.Data["done"] != true || f.Data["reward"] != 1.0 {
		t.Fatalf("finish: %+v", f)
	}
	wantError(t, exchange(t, c, map[string]any{"type": "step", "data": map[string]any{"code": "1"}}), CodeSessionError, "send reset to start another")
	dir := filepath.Join(srv.cfg.Out, "solve")
	r := readResult(t, dir)
	if r.Status != agent.StatusCompleted || r.EnvironmentSuccess == nil || !*r.EnvironmentSuccess || r.Runtime != Runtime || r.Model != "scripted-test" {
		t.Fatalf("result.json: %+v", r)
	}
	xs, err := agent.ReadExchanges(filepath.Join(dir, agent.ExchangesFile))
	if err != nil || len(xs) != 7 || xs[0].Tool != "jump" || !xs[0].IsError || xs[6].Tool != "finish" || !xs[6].Finished {
		t.Fatalf("exchanges.jsonl: %v %+v", err, xs)
	}

	// a policy that only makes refused calls ends at the step limit, as a model that stops calling tools
	f = exchange(t, c, map[string]any{"type": "reset", "data": map[string]any{"task": "stack_blocks", "episode_id": "bad-calls", "images": "none"}})
	for i := 1; i <= 12; i++ {
		f = exchange(t, c, map[string]any{"type": "step", "data": map[string]any{"tool": "jump"}})
		if done := f.Data["done"] == true; done != (i == 12) || f.Type != "observation" {
			t.Fatalf("refused call %d: %+v", i, f)
		}
	}
	if r := readResult(t, filepath.Join(srv.cfg.Out, "bad-calls")); r.Status != agent.StatusCompleted || r.Reason != "no_finish" {
		t.Fatalf("step limit: %s %s %+v", r.Status, r.Reason, r.Error)
	}

	// a second episode in the same session, cut off by the client going away mid-cell
	f = exchange(t, c, map[string]any{"type": "reset", "data": map[string]any{"task": "stack_blocks", "episode_id": "cut", "images": "none"}})
	if f.Type != "observation" {
		t.Fatalf("second reset: %+v", f)
	}
	if err := c.WriteJSON(map[string]any{"type": "step", "data": map[string]any{"code": "import time; time.sleep(30)"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	c.Close()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := readResult(t, filepath.Join(srv.cfg.Out, "cut"))
		if r.Status == agent.StatusInterrupted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the episode of a client that went away is %q, want interrupted", r.Status)
		}
	}
	c2 := dial(t, url)
	wantError(t, exchange(t, c2, map[string]any{"type": "state"}), CodeSessionError, "reset first")
}

func readResult(t *testing.T, dir string) agent.Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r agent.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func repoRoot(t *testing.T) string {
	root, err := robotapi.Root()
	if err != nil {
		t.Skip(err)
	}
	return root
}

// solutionCells splits a percent-format script into its code cells.
func solutionCells(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cells []string
	for _, part := range strings.Split(string(b), "# %%") {
		if strings.HasPrefix(part, " [markdown]") {
			continue
		}
		if code := strings.TrimSpace(part); code != "" {
			cells = append(cells, code)
		}
	}
	return cells, nil
}

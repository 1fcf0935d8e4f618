package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pyrualean/pyrualean/gateway/jupytertest"
	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// asServer lets the gateway tests' HTTP helpers talk to a Jupyter peer.
func asServer(p *jupytertest.Server) *httptest.Server { return &httptest.Server{URL: p.URL} }

// TestJupyterServerGateway runs a real jupyter_server with --gateway-url pointing at our gateway and
// drives it through its own REST + WebSocket API: start a kernel, execute, interrupt, restart, shut down.
func TestJupyterServerGateway(t *testing.T) {
	const tok = "gw-token"
	_, hs := startGateway(t, Config{Token: tok})
	js := jupytertest.Start(t, "server", hs.URL, tok)
	jsrv := asServer(js)

	var specs struct {
		Default     string                    `json:"default"`
		Kernelspecs map[string]map[string]any `json:"kernelspecs"`
	}
	mustStatus(t, api(t, jsrv, js.Token, "GET", "/api/kernelspecs", nil, &specs), 200, "jupyter_server kernelspecs")
	// (jupyter_server adopts our "default" asynchronously, so the first answer may still say python3.)
	if specs.Kernelspecs["pyrualean"] == nil {
		t.Fatalf("jupyter_server did not adopt our kernelspecs: %+v", specs)
	}

	var m kernelModel
	mustStatus(t, api(t, jsrv, js.Token, "POST", "/api/kernels", map[string]any{"name": "pyrualean"}, &m), 201, "start via jupyter_server")
	checkModel(t, m, "pyrualean")
	var ours []kernelModel
	api(t, hs, tok, "GET", "/api/kernels", nil, &ours)
	if len(ours) != 1 || ours[0].ID != m.ID {
		t.Fatalf("our gateway lists %+v, jupyter_server started %s", ours, m.ID)
	}

	session := uuid.NewString()
	dial := func() *wsClient {
		c, resp, err := dialWS(t, wsURL(js.URL, m.ID, session, js.Token), session, false, nil)
		if err != nil {
			body := ""
			if resp != nil {
				b, _ := io.ReadAll(resp.Body)
				body = string(b)
			}
			t.Fatalf("websocket through jupyter_server: %v %s", err, body)
		}
		return c
	}
	c := dial()
	id, msgs := c.runCell("x = 6\nprint(x * 7)", 60*time.Second)
	if got := streamText(msgs, id); got != "42\n" {
		t.Fatalf("execute through jupyter_server: %q %s", got, summarize(msgs))
	}

	// Interrupt through jupyter_server's REST API.
	id = c.execute("import time; time.sleep(60)")
	c.until(30*time.Second, "execute_input", func(m *wireMsg) bool { return m.MsgType == "execute_input" && m.ParentMsgID == id })
	// Let the cell reach time.sleep: a SIGINT landing in ipykernel's own code before the cell runs can
	// lose the execute_reply (an ipykernel race, not the gateway's).
	time.Sleep(500 * time.Millisecond)
	mustStatus(t, api(t, jsrv, js.Token, "POST", "/api/kernels/"+m.ID+"/interrupt", map[string]any{}, nil), 204, "interrupt via jupyter_server")
	msgs = c.until(30*time.Second, "interrupted reply", func(m *wireMsg) bool { return m.MsgType == "execute_reply" && m.ParentMsgID == id })
	if !strings.Contains(string(msgs[len(msgs)-1].Content), "KeyboardInterrupt") {
		t.Fatalf("interrupt: %s", msgs[len(msgs)-1].Content)
	}

	// Restart: the model comes back; the namespace is fresh.
	var rm kernelModel
	mustStatus(t, api(t, jsrv, js.Token, "POST", "/api/kernels/"+m.ID+"/restart", map[string]any{}, &rm), 200, "restart via jupyter_server")
	if rm.ID != m.ID {
		t.Fatalf("restart model %+v", rm)
	}
	c.ws.Close()
	c = dial()
	id, msgs = c.runCell("print('x' in dir())", 60*time.Second)
	if got := streamText(msgs, id); got != "False\n" {
		t.Fatalf("after restart: %q %s", got, summarize(msgs))
	}

	mustStatus(t, api(t, jsrv, js.Token, "DELETE", "/api/kernels/"+m.ID, nil, nil), 204, "shutdown via jupyter_server")
	deadline := time.Now().Add(20 * time.Second)
	for {
		api(t, hs, tok, "GET", "/api/kernels", nil, &ours)
		if len(ours) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kernel still on our gateway after jupyter_server shut it down: %+v", ours)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// notebookJSON is a minimal nbformat 4.5 notebook with one code cell, for the pyrualean kernelspec.
func notebookJSON(source string) []byte {
	nb := map[string]any{
		"nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{
			"kernelspec":    map[string]any{"name": "pyrualean", "display_name": "Python (pyrualean robot)", "language": "python"},
			"language_info": map[string]any{"name": "python"},
		},
		"cells": []any{map[string]any{"id": "c1", "cell_type": "code", "metadata": map[string]any{}, "source": source,
			"outputs": []any{}, "execution_count": nil}},
	}
	raw, _ := json.Marshal(nb)
	return raw
}

// TestJupyterLabInBrowser opens JupyterLab (from PyPI, served with --gateway-url at our gateway) in
// Debian's headless Chromium through playwright-core: a notebook runs a cell on a kernel the gateway
// starts, and a second notebook attached with Attach runs on a live kernel started elsewhere (as an
// episode's is) and sees the state the "agent" left in it.
func TestJupyterLabInBrowser(t *testing.T) {
	root := nbtest.Root(t)
	if _, err := os.Stat(filepath.Join(root, "e2e", "node_modules", "playwright-core")); err != nil {
		t.Fatalf("e2e/node_modules missing: run `npm ci` in e2e/ (scripts/setup.sh does): %v", err)
	}
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatalf("Debian chromium missing (scripts/setup.sh installs it): %v", err)
	}
	const tok = "lab-gw-token"
	srv, hs := startGateway(t, Config{Token: tok})

	// The live kernel, started and driven outside the gateway like an agent's episode kernel.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	k := launchOutside(t, ctx)
	if r, err := k.Client().Execute(ctx, "agent_var = 41", kernel.ExecuteOptions{}); err != nil || r.Status != "ok" {
		t.Fatalf("agent cell: %v %+v", err, r)
	}
	liveID := srv.AddKernel(k, "pyrualean")

	// The episode as play --serve lists it, with its trace notebook on disk.
	tracePath := filepath.Join(t.TempDir(), "trace.ipynb")
	if err := os.WriteFile(tracePath, notebookJSON("print('live', agent_var + 1)"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.AddEpisode(&traceEpisode{trace: tracePath}, liveID)

	lab := jupytertest.Start(t, "lab", hs.URL, tok)
	if err := os.WriteFile(filepath.Join(lab.Root, "fresh.ipynb"), notebookJSON("print(6 * 7)"), 0o644); err != nil {
		t.Fatal(err)
	}
	// What `pyrualean attach` does: find the only live episode on the gateway, upload its trace, make the session.
	ep, err := FindEpisode(ctx, hs.URL, tok, "")
	if err != nil || ep.KernelID != liveID || ep.Trace != tracePath {
		t.Fatalf("FindEpisode: %+v %v", ep, err)
	}
	nb, err := os.ReadFile(ep.Trace)
	if err != nil {
		t.Fatal(err)
	}
	att, err := Attach(ctx, AttachOptions{ServerURL: lab.URL, ServerToken: lab.Token, KernelID: ep.KernelID,
		Path: "episodes/live.ipynb", Notebook: nb})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(att.URL, "/lab/tree/episodes/live.ipynb?token=") {
		t.Fatalf("attach URL %q", att.URL)
	}

	cases, _ := json.Marshal([]map[string]string{
		{"path": "fresh.ipynb", "expect": "42"},
		{"path": "episodes/live.ipynb", "expect": "live 42"},
	})
	cmd := exec.CommandContext(ctx, "node", "lab.mjs")
	cmd.Dir = filepath.Join(root, "e2e")
	cmd.Env = append(os.Environ(), "LAB_URL="+lab.URL, "LAB_TOKEN="+lab.Token, "CASES="+string(cases),
		"ARTIFACTS="+artifactsDir(t), "CASE_TIMEOUT_MS=150000")
	out, err := cmd.CombinedOutput()
	t.Logf("lab.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("JupyterLab in Chromium failed: %v", err)
	}
	// The fresh notebook's kernel was started through our gateway; the live one is still the agent's.
	var ks []kernelModel
	api(t, hs, tok, "GET", "/api/kernels", nil, &ks)
	if len(ks) != 2 {
		t.Fatalf("gateway kernels after the browser run: %+v", ks)
	}
}

// artifactsDir keeps failure screenshots where a developer can look ($PYRUALEAN_E2E_ARTIFACTS), else a temp dir.
func artifactsDir(t testing.TB) string {
	if d := os.Getenv("PYRUALEAN_E2E_ARTIFACTS"); d != "" {
		return d
	}
	return t.TempDir()
}

// traceEpisode is a listed episode whose trace is a real notebook file.
type traceEpisode struct{ trace string }

func (e *traceEpisode) ID() string    { return "live-episode" }
func (e *traceEpisode) Status() any   { return map[string]any{"status": "running", "trace": e.trace} }
func (e *traceEpisode) Pause() error  { return nil }
func (e *traceEpisode) Resume() error { return nil }
func (e *traceEpisode) Step() error   { return nil }

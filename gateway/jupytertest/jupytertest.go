// Package jupytertest runs a real Jupyter Server or JupyterLab from the repository's venv, pointed at a
// pyrualean gateway (--gateway-url), for tests: the gateway's own peer tests and the CLI's JupyterLab
// end-to-end tests start it the same way.
package jupytertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// Server is a running `jupyter server` or `jupyter lab`, stopped (its process group) when the test ends.
type Server struct {
	URL, Token string
	Root       string // its root_dir: notebooks it serves
	logMu      sync.Mutex
	log        strings.Builder
	stop       func(wait time.Duration) (time.Duration, error) // SIGTERM, then SIGKILL after wait
}

// Stop sends the server SIGTERM, as a person's Ctrl-C or a service manager does, and says how long it
// took to exit: an error when it had already exited (it crashed) or did not within wait (killed).
func (s *Server) Stop(wait time.Duration) (took time.Duration, err error) { return s.stop(wait) }

// Logs is what the server printed so far.
func (s *Server) Logs() string { s.logMu.Lock(); defer s.logMu.Unlock(); return s.log.String() }

func (s *Server) Write(p []byte) (int, error) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.Write(p)
}

// Start runs `jupyter <app> --gateway-url=<gatewayURL>` (app "server" or "lab") on a free loopback port
// with its own runtime, config, data and root folders, and waits until /api answers.
func Start(t testing.TB, app, gatewayURL, gatewayToken string) *Server {
	t.Helper()
	nbtest.Heavy(t, "Jupyter "+app)
	jupyter := filepath.Join(nbtest.Root(t), ".venv", "bin", "jupyter")
	if _, err := os.Stat(jupyter); err != nil {
		t.Fatalf("jupyter not installed in .venv (scripts/setup.sh): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	tmp := t.TempDir()
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Token: fmt.Sprintf("jt-%d", time.Now().UnixNano()),
		Root: filepath.Join(tmp, "root")}
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{app, "--no-browser", "--ip=127.0.0.1", fmt.Sprintf("--port=%d", port), "--ServerApp.port_retries=0",
		"--IdentityProvider.token=" + s.Token, "--ServerApp.root_dir=" + s.Root,
		"--gateway-url=" + gatewayURL, "--GatewayClient.auth_token=" + gatewayToken,
		"--GatewayClient.request_timeout=60", "--ServerApp.disable_check_xsrf=True", "--allow-root"}
	if app == "lab" {
		args = append(args, "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")
	}
	cmd := exec.Command(jupyter, args...)
	cmd.Dir = tmp // jupyter-collaboration keeps its .jupyter_ystore.db in the working directory
	cmd.Env = append(os.Environ(), "JUPYTER_RUNTIME_DIR="+filepath.Join(tmp, "runtime"),
		"JUPYTER_CONFIG_DIR="+filepath.Join(tmp, "config"), "JUPYTER_DATA_DIR="+filepath.Join(tmp, "data"),
		"JUPYTER_PLATFORM_DIRS=1", "PYTHONUNBUFFERED=1")
	cmd.Stdout, cmd.Stderr = s, s
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.stop = func(wait time.Duration) (time.Duration, error) {
		t0 := time.Now()
		select {
		case <-exited:
			return 0, fmt.Errorf("jupyter %s had already exited", app)
		default:
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
			return time.Since(t0), nil
		case <-time.After(wait):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			return time.Since(t0), fmt.Errorf("jupyter %s did not stop on SIGTERM within %v: killed", app, wait)
		}
	}
	t.Cleanup(func() {
		_, _ = s.stop(10 * time.Second) // a test that cares calls Stop itself
		if t.Failed() {
			t.Logf("jupyter %s log:\n%s", app, s.Logs())
		}
	})
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		if resp, err := http.Get(s.URL + "/api?token=" + s.Token); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		select {
		case <-exited:
			t.Fatalf("jupyter %s exited:\n%s", app, s.Logs())
		case <-time.After(250 * time.Millisecond):
		}
	}
	t.Fatalf("jupyter %s did not come up:\n%s", app, s.Logs())
	return nil
}

// Get decodes the JSON answer to an authenticated GET of path, failing the test on anything but 200.
func (s *Server) Get(t testing.TB, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+path, nil)
	req.Header.Set("Authorization", "token "+s.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(b, out) != nil {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
}

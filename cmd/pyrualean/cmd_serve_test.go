package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestServeCommand(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"--token", "x", "--no-auth"}, {"--port", "-1"}, {"extra"}} {
		var stderr bytes.Buffer
		if code := cmdServe(context.Background(), args, io.Discard, &stderr); code != 2 || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("serve %v: exit %d, stderr %q (want 2 and one line)", args, code, stderr.String())
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- cmdServe(ctx, []string{"--port", "0", "--base-url", "/gw/"}, &out, io.Discard) }()
	re := regexp.MustCompile(`serving on (http://\S+)\ntoken: (\S+)`)
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m = re.FindStringSubmatch(out.String())
	}
	if m == nil {
		cancel()
		t.Fatalf("no URL and token printed: %q", out.String())
	}
	base, token := m[1], m[2]
	if !strings.HasSuffix(base, "/gw") || len(token) < 32 {
		t.Fatalf("url %q token %q", base, token)
	}
	for _, tc := range []struct {
		auth string
		want int
	}{{"", 401}, {"token " + token, 200}} {
		req, _ := http.NewRequest("GET", base+"/api/kernels", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("auth %q: %d, want %d", tc.auth, resp.StatusCode, tc.want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exit %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on cancel")
	}
}

// TestServeChild is the gateway process of TestServeSIGKILLLeavesNoStaleFiles (main's signal handling).
func TestServeChild(t *testing.T) {
	raw := os.Getenv("PYRUALEAN_SERVE_CHILD")
	if raw == "" {
		t.Skip("run by TestServeSIGKILLLeavesNoStaleFiles")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	os.Exit(runWithSignals(args))
}

// startServeChild runs `pyrualean serve` in a child process with runtime as its JUPYTER_RUNTIME_DIR and
// returns it with its base URL.
func startServeChild(t *testing.T, runtime string) (*exec.Cmd, string) {
	t.Helper()
	nbtest.Heavy(t, "pyrualean serve with real kernels")
	args, _ := json.Marshal([]string{"serve", "--port", "0", "--no-auth"})
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeChild$")
	cmd.Env = append(os.Environ(), "PYRUALEAN_SERVE_CHILD="+string(args), "JUPYTER_RUNTIME_DIR="+runtime)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`serving on (http://\S+)`)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return cmd, m[1]
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatalf("serve printed no URL: %q", out.String())
	return nil, ""
}

func startKernelOver(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Post(base+"/api/kernels", "application/json", strings.NewReader(`{"name": "pyrualean"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("POST /api/kernels: %d", resp.StatusCode)
	}
}

func ownedConnectionFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "kernel-pyrualean-*.json"))
	return m
}

// kernelPIDOf finds the live process whose command line names the connection file.
func kernelPIDOf(connFile string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(connFile)) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

// TestServeSIGKILLLeavesNoStaleFiles: a gateway killed with SIGKILL cannot remove its kernels' connection
// files; its kernel does not outlive it for long (ipykernel watches its parent), and the next gateway
// removes the dead one's files when it starts a kernel; a gateway stopped by a signal leaves none.
func TestServeSIGKILLLeavesNoStaleFiles(t *testing.T) {
	runtime := t.TempDir()
	first, base := startServeChild(t, runtime)
	startKernelOver(t, base)
	files := ownedConnectionFiles(t, runtime)
	if len(files) != 1 || !strings.Contains(files[0], fmt.Sprintf("-%d-", first.Process.Pid)) {
		t.Fatalf("connection files %v, want one owned by the gateway (pid %d)", files, first.Process.Pid)
	}
	stale := files[0]
	orphan := kernelPIDOf(stale)
	if orphan == 0 {
		first.Process.Kill()
		first.Wait()
		t.Fatalf("no process runs with %s", stale)
	}
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the killed gateway's connection file should still be there: %v", err)
	}
	gone := false
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !gone; time.Sleep(100 * time.Millisecond) {
		gone = kernelPIDOf(stale) == 0
	}
	if !gone {
		syscall.Kill(-orphan, syscall.SIGKILL) // ours: started by this test's gateway
		t.Errorf("the killed gateway's kernel (pid %d) outlived it by 15 s", orphan)
	}

	second, base2 := startServeChild(t, runtime)
	startKernelOver(t, base2)
	files = ownedConnectionFiles(t, runtime)
	if len(files) != 1 || files[0] == stale {
		t.Errorf("after the next gateway started a kernel: %v, want only its own (the stale %s removed)", files, filepath.Base(stale))
	}
	second.Process.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v", err)
	}
	if files := ownedConnectionFiles(t, runtime); len(files) != 0 {
		t.Errorf("a gateway stopped by SIGTERM left %v", files)
	}
}

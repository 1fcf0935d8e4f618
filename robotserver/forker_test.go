package robotserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/seal"
)

// TestForkedServers starts servers from a forker and checks that each is what an exec'd server is: its
// own process group (a child of the forker, not ours), the requested limits, a judge that answers, a
// kill reported as a signal; a server the forker cannot serve (another MUJOCO_GL) is exec'd; a closed
// forker leaves its servers serving, and later launches exec.
func TestForkedServers(t *testing.T) {
	nbtest.Heavy(t, "a robot forker and servers")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root := repoRoot(t)
	env := map[string]string{"PYTHONPATH": filepath.Join(root, "robotapi", "python"), "MUJOCO_GL": "egl"}
	f, err := StartForker(ctx, ForkerOptions{Root: root, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	launch := func(env map[string]string, limits seal.Limits) *Server {
		t.Helper()
		s, err := Start(ctx, Options{Root: root, Robot: "tabletop", Task: "stack_blocks", Seed: 1, Images: "none",
			Dir: t.TempDir(), Env: env, Forker: f, Limits: limits})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := launch(env, seal.Limits{MaxFiles: 777, CPUSeconds: 999})
	if !s.Forked() {
		t.Fatal("the server was not forked")
	}
	if ppid := procField(t, s.Pid(), 1); ppid != f.Pid() {
		t.Errorf("parent %d, want the forker %d", ppid, f.Pid())
	}
	if pgid := procField(t, s.Pid(), 2); pgid != s.Pid() {
		t.Errorf("process group %d, want its own %d", pgid, s.Pid())
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", s.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`Max open files\s+777\s+777`, `Max cpu time\s+999\s+999`} {
		if !matchLine(string(limits), want) {
			t.Errorf("limits lack %q:\n%s", want, limits)
		}
	}
	if r, err := s.Report(ctx); err != nil || r.Done {
		t.Fatalf("report: %+v %v", r, err)
	}

	killed := launch(env, seal.Limits{})
	if err := syscall.Kill(killed.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-killed.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a killed server's exit was not reported")
	}
	if _, err := killed.Report(ctx); !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("a killed server's report: %v", err)
	}

	other := launch(map[string]string{"PYTHONPATH": env["PYTHONPATH"], "MUJOCO_GL": "osmesa"}, seal.Limits{})
	if other.Forked() {
		t.Error("a server with another MUJOCO_GL was forked from the forker's imports")
	}

	f.Close()
	if _, err := s.Report(ctx); err != nil {
		t.Errorf("a forked server stopped serving when its forker closed: %v", err)
	}
	if later := launch(env, seal.Limits{}); later.Forked() {
		t.Error("a launch after the forker closed was forked")
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a closed server's exit was not reported")
	}
}

// procField is field n of /proc/pid/stat after the command name (0 the state, 1 the parent, 2 the group).
func procField(t *testing.T, pid, n int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	v, err := strconv.Atoi(fields[n])
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func matchLine(text, pattern string) bool {
	return regexp.MustCompile(`(?m)^` + pattern).MatchString(text)
}

// TestDialForker: another process's forker is used only through a socket of ours in a folder no
// one else may enter; a dialed forker forks servers as its owner's does, and closing it leaves the
// forker serving its owner.
func TestDialForker(t *testing.T) {
	root := repoRoot(t)
	open := t.TempDir()
	os.Chmod(open, 0o755)
	plain := filepath.Join(open, "not-a-socket")
	os.WriteFile(plain, nil, 0o600)
	lis, err := net.Listen("unix", filepath.Join(open, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	for _, tc := range []struct{ path, why string }{
		{filepath.Join(open, "missing.sock"), "no such file"},
		{plain, "not a socket"},
		{filepath.Join(open, "s.sock"), "open to others"},
	} {
		if _, err := DialForker(ForkerOptions{Root: root}, tc.path); err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v, want %q", tc.path, err, tc.why)
		}
	}
	nbtest.Heavy(t, "a robot forker and a server")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	owner, err := StartForker(ctx, ForkerOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	f, err := DialForker(ForkerOptions{Root: root}, owner.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	if f.Pid() != 0 {
		t.Errorf("a dialed forker's pid %d", f.Pid())
	}
	f.Close() // forgets it; the owner's forker serves on
	f, _ = DialForker(ForkerOptions{Root: root}, owner.SocketPath())
	s, err := Start(ctx, Options{Root: root, Robot: "tabletop", Task: "stack_blocks", Seed: 1, Images: "none", Dir: t.TempDir(), Forker: f})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Forked() || procField(t, s.Pid(), 1) != owner.Pid() {
		t.Errorf("forked %v, parent %d, want the owner's forker %d", s.Forked(), procField(t, s.Pid(), 1), owner.Pid())
	}
}

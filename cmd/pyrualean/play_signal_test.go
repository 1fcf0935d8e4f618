package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// TestPlaySignalChild is the play process of TestPlaySIGINTDuringBoot, with main's signal handling.
func TestPlaySignalChild(t *testing.T) {
	raw := os.Getenv("PYRUALEAN_SIGNAL_CHILD")
	if raw == "" {
		t.Skip("run by TestPlaySIGINTDuringBoot")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	os.Exit(runWithSignals(args))
}

// TestPlaySIGINTDuringBoot: Ctrl-C while the robot boots records the episode as interrupted (not
// boot_error), exits 1, and leaves no kernel behind.
func TestPlaySIGINTDuringBoot(t *testing.T) {
	if os.Getenv("PYRUALEAN_SIGNAL_CHILD") != "" {
		t.Skip("child")
	}
	nbtest.Heavy(t, heavyEpisode)
	root := t.TempDir()
	out := filepath.Join(root, "run")
	script := filepath.Join(root, "cells.py")
	os.WriteFile(script, []byte("# %%\nprint(1)\n"), 0o644)
	args, _ := json.Marshal([]string{"play", "--runtime", "replay", "--from", script, "--task", "stack_blocks", "--out", out})
	cmd := exec.Command(os.Args[0], "-test.run=^TestPlaySignalChild$")
	cmd.Env = append(os.Environ(), "PYRUALEAN_SIGNAL_CHILD="+string(args))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Boot has begun once result.json says running; it is over once the kernel's pid is recorded.
	deadline := time.Now().Add(time.Minute)
	booting := false
	for !booting && time.Now().Before(deadline) {
		if r, err := readResult(out); err == nil && r.Status == agent.StatusRunning && r.KernelPID == 0 {
			booting = true
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !booting {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("never saw the boot: %s", stderr.String())
	}
	time.Sleep(300 * time.Millisecond) // into the kernel's start
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	res, rerr := readResult(out)
	if rerr != nil {
		t.Fatalf("exit %d, result.json: %v\n%s", code, rerr, stderr.String())
	}
	if res.Status == agent.StatusCompleted {
		t.Skipf("the boot finished before the signal landed (%.2f s)", res.StartupS)
	}
	if res.Status != agent.StatusInterrupted || code != exitFailed || res.PID != 0 {
		t.Fatalf("status %s (%+v), exit %d, pid %d; want interrupted, exit %d\n%s", res.Status, res.Error, code, res.PID, exitFailed, stderr.String())
	}
	// No kernel is left: its connection file was removed and no process names this run's workspace.
	if matches, _ := filepath.Glob("/proc/[0-9]*/environ"); len(matches) > 0 {
		want := []byte("PYRUALEAN_WORKSPACE=" + filepath.Join(out, "workspace") + "\x00")
		time.Sleep(500 * time.Millisecond)
		for _, m := range matches {
			if b, err := os.ReadFile(m); err == nil && bytes.Contains(b, want) {
				t.Errorf("a process of this run is still alive: %s", m)
			}
		}
	}
}

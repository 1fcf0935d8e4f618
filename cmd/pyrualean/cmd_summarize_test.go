package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent"
)

func writeRun(t *testing.T, dir string, r agent.Result) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "result.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSummarizeReadsOnlyAndStrict: summarize never writes the folders it reads (a killed play's
// "running" result stays as written and is shown as interrupted); corrupt folders are named, and
// --strict turns them into exit 1.
func TestSummarizeReadsOnlyAndStrict(t *testing.T) {
	dir := t.TempDir()
	yes := true
	writeRun(t, filepath.Join(dir, "ok"), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "tabletop", Task: "stack_blocks", Status: agent.StatusCompleted, EnvironmentSuccess: &yes})
	writeRun(t, filepath.Join(dir, "killed"), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "tabletop", Task: "put_block_in_bowl", Status: agent.StatusRunning, PID: 999999999})
	os.MkdirAll(filepath.Join(dir, "corrupt"), 0o755)
	os.WriteFile(filepath.Join(dir, "corrupt", "result.json"), []byte(`{"status": `), 0o644)
	snapshot := func() map[string]string {
		m := map[string]string{}
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				st, _ := os.Stat(p)
				m[p] = string(b) + st.ModTime().String()
			}
			return nil
		})
		return m
	}
	before := snapshot()
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{dir}, 0},
		{[]string{"--json", dir}, 0},
		{[]string{"--strict", dir}, exitFailed},
		{[]string{"--strict", filepath.Join(dir, "ok"), filepath.Join(dir, "killed")}, 0},
		{[]string{"--bogus", dir}, exitUsage},
	} {
		var stdout, stderr bytes.Buffer
		code := cmdSummarize(context.Background(), c.args, &stdout, &stderr)
		if code != c.code {
			t.Errorf("summarize %v: exit %d, want %d\n%s", c.args, code, c.code, stderr.String())
		}
		if c.code != exitUsage && !strings.Contains(stdout.String(), "interrupted") {
			t.Errorf("summarize %v: the killed play is not shown as interrupted:\n%s", c.args, stdout.String())
		}
		if strings.Contains(strings.Join(c.args, " "), "corrupt") || c.args[len(c.args)-1] == dir {
			if c.code != exitUsage && !strings.Contains(stderr.String(), "corrupt") {
				t.Errorf("summarize %v: corrupt folder not named: %s", c.args, stderr.String())
			}
		}
	}
	after := snapshot()
	if len(after) != len(before) {
		t.Errorf("summarize added or removed files: %d -> %d", len(before), len(after))
	}
	for p, v := range before {
		if after[p] != v {
			t.Errorf("summarize changed %s", p)
		}
	}
}

// TestCompareUnmatchedAndSuiteKeys: compare exits 2 naming unmatched keys (as the seed), and an
// episode asked for as --suite S --task 0 pairs with the same one asked for as --task S/0.
func TestCompareUnmatchedAndSuiteKeys(t *testing.T) {
	dir := t.TempDir()
	yes := true
	mk := func(suite, task string, seed int) agent.Result {
		return agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "libero", Suite: suite, Task: task, Seed: seed,
			Status: agent.StatusCompleted, EnvironmentSuccess: &yes, Generation: agent.Generation{Turns: 3, InputTokens: 100}}
	}
	writeRun(t, filepath.Join(dir, "left", "a"), mk("libero_spatial_swap", "0", 1))
	writeRun(t, filepath.Join(dir, "right", "a"), mk("", "libero_spatial_swap/0", 1))
	var stdout, stderr bytes.Buffer
	if code := cmdCompare(context.Background(), []string{filepath.Join(dir, "left"), filepath.Join(dir, "right")}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "jointly solved 1") {
		t.Fatalf("--suite S --task 0 vs --task S/0: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	writeRun(t, filepath.Join(dir, "right", "b"), mk("libero_spatial_swap", "1", 1))
	stdout.Reset()
	stderr.Reset()
	code := cmdCompare(context.Background(), []string{filepath.Join(dir, "left"), filepath.Join(dir, "right")}, &stdout, &stderr)
	if code != exitEpisodeError || !strings.Contains(stderr.String(), "libero/libero_spatial_swap:1/1") || !strings.Contains(stderr.String(), "unmatched on the right") {
		t.Errorf("unmatched key: exit %d, stderr %q", code, stderr.String())
	}
}

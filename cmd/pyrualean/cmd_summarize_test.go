package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runs"
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

// TestCompareUnmatchedAndSuiteKeys: compare exits 2 naming unmatched keys (as the original), and an
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

// rpentTranscript is a run record as RPent's CLI writes it (rpent/cli/main.py: {**task_desc, model,
// elapsed_s, finish, stats, messages}, json.dump with indent 2, opened for appending).
func rpentTranscript(suite string, task, seed int, finish string, in int) string {
	fin := "null"
	if finish != "" {
		fin = `{"status": "` + finish + `", "summary": "done"}`
	}
	return fmt.Sprintf(`{
  "suite": %q,
  "task": %d,
  "seed": %d,
  "model": "gpt-6-astra",
  "elapsed_s": 812.4,
  "finish": %s,
  "stats": {"turns_used": 21, "tool_calls": 20, "total_input_tokens": %d, "total_output_tokens": 5000,
            "cache_read_tokens": 100000, "cache_write_tokens": 0, "requests": 21},
  "messages": [{"role": "user", "content": "put the bowl on the plate"}]
}`, suite, task, seed, fin, in)
}

// TestSummarizeReadsRPentRuns: an RPent run folder (transcript_*.json + states.json, no result.json) is a
// row of its own (success = any step terminated, status = finish.status or no_finish), and compare
// pairs it with our episode of the same suite, task and seed.
func TestSummarizeReadsRPentRuns(t *testing.T) {
	dir := t.TempDir()
	solved := filepath.Join(dir, "rpent", "20261001_libero_spatial_swap_t7_s2")
	os.MkdirAll(filepath.Join(solved, "agentview_depth.npz"), 0o755)
	// RPent appends: a rerun into the same folder leaves two records; the last one is the run.
	writeFile(t, filepath.Join(solved, "transcript_libero_spatial_swap_t7_s2.json"),
		rpentTranscript("libero_spatial_swap", 7, 2, "failure", 1)+rpentTranscript("libero_spatial_swap", 7, 2, "success", 1230000))
	writeFile(t, filepath.Join(solved, "states.json"), `{"run_artifacts": ["episode.mp4"], "steps": [
  {"step_idx": 0, "state": {}, "terminated": false, "truncated": false, "artifacts": []},
  {"step_idx": 1, "state": {}, "terminated": true, "truncated": false, "artifacts": []}]}`)
	unfinished := filepath.Join(dir, "rpent", "20261001_libero_spatial_swap_t8_s2")
	os.MkdirAll(unfinished, 0o755)
	writeFile(t, filepath.Join(unfinished, "transcript_libero_spatial_swap_t8_s2.json"), rpentTranscript("libero_spatial_swap", 8, 2, "", 50000))
	writeFile(t, filepath.Join(unfinished, "states.json"), `{"run_artifacts": [], "steps": [{"step_idx": 0, "terminated": false}]}`)
	yes := true
	writeRun(t, filepath.Join(dir, "ours", "a"), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "libero",
		Suite: "libero_spatial_swap", Task: "7", Seed: 2, Status: agent.StatusCompleted, EnvironmentSuccess: &yes, Sealed: true,
		Generation: agent.Generation{Turns: 8, InputTokens: 273000}})

	var stdout, stderr bytes.Buffer
	if code := cmdSummarize(context.Background(), []string{"--json", "--strict", filepath.Join(dir, "rpent")}, &stdout, &stderr); code != 0 {
		t.Fatalf("summarize exit %d: %s", code, stderr.String())
	}
	var sum struct {
		Episodes int        `json:"episodes"`
		Rows     []runs.Row `json:"rows"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Episodes != 2 || len(sum.Rows) != 2 {
		t.Fatalf("rows %+v", sum.Rows)
	}
	r := sum.Rows[0]
	if r.System != "rpent:tools" || r.Robot != "libero" || r.Task != "libero_spatial_swap:7" || r.Seed != 2 || r.OK == nil || !*r.OK ||
		r.Status != "success" || r.InTok != 1230000 || r.LLMCalls != 21 || r.Steps != 2 {
		t.Errorf("solved RPent run: %+v", r)
	}
	if u := sum.Rows[1]; u.Status != "no_finish" || u.OK == nil || *u.OK {
		t.Errorf("RPent run without finish: %+v", u)
	}
	stdout.Reset()
	cmdSummarize(context.Background(), []string{filepath.Join(dir, "rpent"), filepath.Join(dir, "ours")}, &stdout, &stderr)
	if !strings.Contains(stdout.String(), "rpent:tools") || !strings.Contains(stdout.String(), "no_finish") || !strings.Contains(stdout.String(), "sealed 1/1") {
		t.Errorf("table:\n%s", stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	code := cmdCompare(context.Background(), []string{"--json", solved, filepath.Join(dir, "ours")}, &stdout, &stderr)
	var c runs.Comparison
	if err := json.Unmarshal(stdout.Bytes(), &c); code != 0 || err != nil || c.Pairs != 1 || c.JointlySolved != 1 || c.Ratios.InputTokens == nil ||
		*c.Ratios.InputTokens != 1230000.0/273000.0 {
		t.Errorf("compare RPent vs ours: exit %d %v %+v\n%s", code, err, c, stderr.String())
	}
}

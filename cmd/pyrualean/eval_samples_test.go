package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/eval"
)

// TestEvalSamplesExport: eval --samples 3 runs three rollouts of the instance (ids .../sample-N, the
// sampling seeds distinct and in result.json), resumes without rerunning them, summarize shows pass@1
// and pass@3 with the per-instance rate, and rollouts export writes one record per rollout of the
// one group (all solved: advantage 0).
func TestEvalSamplesExport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three episodes")
	}
	dir := filepath.Join(t.TempDir(), "suite")
	args := []string{"--runtime", "replay", "--tasks", "put_block_in_bowl", "--seeds", "0", "--arms", "cells", "--samples", "3",
		"--jobs", "2", "--out", dir, "--images", "none"}
	var stdout, stderr bytes.Buffer
	if code := cmdEval(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	man, err := eval.ReadManifest(dir)
	if err != nil || len(man.Order) != 3 {
		t.Fatalf("manifest: %v %v", err, man)
	}
	seeds := map[int64]bool{}
	for k, id := range man.Order {
		if !strings.HasSuffix(id, "/sample-"+string(rune('0'+k))) {
			t.Errorf("id %s", id)
		}
		res, err := readResult(filepath.Join(dir, "episodes", filepath.FromSlash(id)))
		if err != nil || res.Sample == nil || res.Sample.Index != k || res.Sample.Of != 3 {
			t.Fatalf("%s: %+v %v", id, res, err)
		}
		seeds[res.Sample.Seed] = true
	}
	if len(seeds) != 3 {
		t.Errorf("sampling seeds not distinct: %v", seeds)
	}
	if out := stdout.String(); !strings.Contains(out, "1 instances x 3 samples") || !strings.Contains(out, "pass@3 100.0") ||
		!strings.Contains(out, "3/3") {
		t.Errorf("eval's table lacks pass@k:\n%s", out)
	}
	stderr.Reset()
	if code := cmdEval(context.Background(), args, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "3 episodes, 0 to run") {
		t.Fatalf("resume: exit %d %s", code, stderr.String())
	}
	stdout.Reset()
	if code := cmdSummarize(context.Background(), []string{"--json", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("summarize exit %d: %s", code, stderr.String())
	}
	var sum struct {
		PassAtK []struct {
			K         int                     `json:"k"`
			Instances int                     `json:"instances"`
			PassK     struct{ Value float64 } `json:"pass_at_k"`
		} `json:"pass_at_k"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil || len(sum.PassAtK) != 1 || sum.PassAtK[0].K != 3 || sum.PassAtK[0].PassK.Value != 1 {
		t.Fatalf("summarize --json pass_at_k: %v %s", err, stdout.String())
	}
	html := filepath.Join(t.TempDir(), "report.html")
	if code := cmdReport(context.Background(), []string{"--html", html, "--traces=false", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("report exit %d: %s", code, stderr.String())
	}
	if page, err := os.ReadFile(html); err != nil || !strings.Contains(string(page), "Group rollouts: pyrualean:cells") ||
		!strings.Contains(string(page), "pass@3") || !strings.Contains(string(page), "3/3") {
		t.Errorf("the report lacks the group rollouts: %v", err)
	}
	out := filepath.Join(t.TempDir(), "export.jsonl")
	stdout.Reset()
	if code := cmdRollouts(context.Background(), []string{"export", dir, "--format", "chat", "--out", out}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "3 records (chat) in 1 groups, 3 solved of 3 rollouts") {
		t.Fatalf("export exit %d: %s %s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["advantage"] != 0.0 || rec["reward"] != 1.0 || rec["sampling_seed"] == nil {
			t.Errorf("record: %v %.300s", err, line)
		}
	}
	if code := cmdRollouts(context.Background(), []string{"export", dir, "--format", "parquet", "--out", out}, &stdout, &stderr); code != exitUsage {
		t.Errorf("an unknown format: exit %d", code)
	}
}

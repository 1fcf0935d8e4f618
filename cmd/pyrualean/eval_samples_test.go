package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/llm"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
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

// TestEvalSamplesLocalTokens: group rollouts with the embedded model (llama.cpp serving the test
// model) and --record-tokens, end to end: every rollout's tokens.jsonl holds the completion's token
// ids with a logprob each, as llama.cpp returned them, and each export format carries them and passes
// its own library's loader (.venv-train). The test model does not solve tasks: rewards are 0 and so
// are the advantages; the point is the token data's path from the server to the dataset.
func TestEvalSamplesLocalTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two episodes with the embedded model")
	}
	nbtest.Heavy(t, "the embedded model's server and real kernels")
	root := nbtest.Root(t)
	trainPy := filepath.Join(root, ".venv-train", "bin", "python")
	if _, err := os.Stat(trainPy); err != nil {
		t.Fatalf("the training data libraries are not installed (.venv-train: scripts/setup.d/train.sh): %v", err)
	}
	dir := filepath.Join(t.TempDir(), "suite")
	args := []string{"--runtime", "local", "--model", llm.TestModel, "--tasks", "put_block_in_bowl", "--seeds", "0",
		"--arms", "cells", "--samples", "2", "--record-tokens", "--max-turns", "1", "--openai-max-tokens", "32",
		"--images", "none", "--sealed", "off", "--jobs", "2", "--out", dir}
	var stdout, stderr bytes.Buffer
	if code := cmdEval(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	man, err := eval.ReadManifest(dir)
	if err != nil || len(man.Order) != 2 {
		t.Fatalf("manifest: %v %v", err, man)
	}
	for _, id := range man.Order {
		b, err := os.ReadFile(filepath.Join(dir, "episodes", filepath.FromSlash(id), "tokens.jsonl"))
		if err != nil {
			t.Fatalf("%s: --record-tokens wrote no token data: %v", id, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var rec struct {
				IDs      []int64   `json:"completion_ids"`
				Logprobs []float64 `json:"completion_logprobs"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil || len(rec.IDs) == 0 || len(rec.Logprobs) != len(rec.IDs) {
				t.Errorf("%s: a token record without a logprob per token id: %v %.300s", id, err, line)
			}
		}
	}
	for _, f := range []string{"chat", "trl", "verifiers"} {
		out := filepath.Join(t.TempDir(), f+".jsonl")
		stdout.Reset()
		if code := cmdRollouts(context.Background(), []string{"export", dir, "--format", f, "--out", out}, &stdout, &stderr); code != 0 ||
			!strings.Contains(stdout.String(), "2 records ("+f+") in 1 groups") {
			t.Fatalf("export %s: exit %d: %s %s", f, code, stdout.String(), stderr.String())
		}
		// trl's prompt-completion rows have no place for token data; the other two carry it.
		if b, err := os.ReadFile(out); f != "trl" && (err != nil || !strings.Contains(string(b), `logprobs":[-`)) {
			t.Errorf("%s: the export carries no logprobs: %v", f, err)
		}
		cmd := exec.Command(trainPy, filepath.Join(root, "rollouts", "validate_formats.py"), f, out)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		res, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: the format's own loader refused the export: %v\n%s", f, err, errb.String())
		}
		t.Logf("%s: %s", f, strings.TrimSpace(string(res)))
	}
}

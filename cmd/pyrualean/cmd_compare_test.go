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
	"github.com/pyrualean/pyrualean/eval"
)

// statusSuite writes an eval eval folder (manifest.json + episodes/ROBOT/SUITE/TASK/SEED/ARM/
// RUNTIME-MODEL/SETTINGS) holding both arms with every status, plus one planned episode that never
// ran. Instances (tools, cells):
//
//	stack_blocks/0  solved (10 calls, 100k in)  solved (4 calls, 30k in)
//	stack_blocks/1  solved (12 calls, 140k in)  solved (6 calls, 50k in)
//	open_drawer/0   failed (call_budget)        solved
//	open_drawer/1   planner_error               failed
//	put_block/0     timeout (outcome null)      boot_error
//	put_block/1     interrupted (killed play)   solved
func statusSuite(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "suite-x")
	yes, no := true, false
	type ep struct {
		status  string
		ok      *bool
		llm, in int
	}
	insts := []struct {
		task         string
		seed         int
		tools, cells ep
	}{
		{"stack_blocks", 0, ep{agent.StatusCompleted, &yes, 10, 100_000}, ep{agent.StatusCompleted, &yes, 4, 30_000}},
		{"stack_blocks", 1, ep{agent.StatusCompleted, &yes, 12, 140_000}, ep{agent.StatusCompleted, &yes, 6, 50_000}},
		{"open_drawer", 0, ep{agent.StatusCallBudget, &no, 40, 900_000}, ep{agent.StatusCompleted, &yes, 5, 40_000}},
		{"open_drawer", 1, ep{agent.StatusPlannerError, nil, 3, 30_000}, ep{agent.StatusCallBudget, &no, 40, 400_000}},
		{"put_block_in_bowl", 0, ep{agent.StatusTimeout, nil, 7, 80_000}, ep{agent.StatusBootError, nil, 0, 0}},
		{"put_block_in_bowl", 1, ep{agent.StatusRunning, nil, 2, 20_000}, ep{agent.StatusCompleted, &yes, 3, 20_000}},
	}
	man := eval.Manifest{Schema: eval.ManifestSchema, Episodes: map[string]*eval.EpisodeState{}}
	add := func(task string, seed int, arm string) string {
		e := eval.Episode{Robot: "tabletop", Task: task, Seed: seed, Arm: arm, Runtime: "openai", Model: "gpt-6-astra"}
		e.ID = strings.Join([]string{"tabletop", "default", task, string(rune('0' + seed)), arm, "openai-gpt-6-astra", "default"}, "/")
		man.Order = append(man.Order, e.ID)
		man.Episodes[e.ID] = &eval.EpisodeState{Episode: e, Dir: "episodes/" + e.ID}
		return filepath.Join(dir, "episodes", filepath.FromSlash(e.ID))
	}
	for _, in := range insts {
		for arm, e := range map[string]ep{"tools": in.tools, "cells": in.cells} {
			r := agent.Result{Schema: agent.ResultSchema, System: "pyrualean", Arm: arm, Robot: "tabletop", Task: in.task, Seed: in.seed,
				Model: "gpt-6-astra", Runtime: "openai", Status: e.status, EnvironmentSuccess: e.ok, ToolTurns: e.llm, Calls: e.llm, Sealed: true,
				Generation: agent.Generation{Turns: e.llm, InputTokens: e.in, OutputTokens: e.llm * 100}}
			if e.status == agent.StatusRunning {
				r.PID = 999_999_999
			}
			writeRun(t, add(in.task, in.seed, arm), r)
		}
	}
	add("stack_three", 0, "cells") // planned, never ran
	b, _ := json.MarshalIndent(man, "", "  ")
	if err := os.WriteFile(eval.ManifestPath(dir), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestComparePaperTable: compare reads an eval eval folder, counts every episode as the original
// (tools 2/6, cells 4/6: the planner_error, timeout, boot_error and interrupted episodes are failures),
// and prints the paper's table as Markdown with the figures over the jointly solved instances; the
// original's form (several paths, --left-system, --output) gives the same table.
func TestComparePaperTable(t *testing.T) {
	dir := statusSuite(t)
	run := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := cmdCompare(context.Background(), args, &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	md, stderr, code := run("--format", "md", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, md, stderr)
	}
	t.Logf("compare --format md:\n%s", md)
	for _, want := range []string{
		"**Code cells against tool calling: tools → cells, per benchmark (robot/suite)**",
		"| benchmark | n | jointly solved | success tools (%) | success cells (%) | difference (points) | LLM calls | input tokens | cost (US$) |",
		// 2/6 -> 4/6 (Wilson 9.7-70.0, 30.0-90.3), +33.3 points; jointly solved: stack_blocks 0 and 1:
		// calls (10+12)/2 -> (4+6)/2, tokens 120k -> 40k; cost at $10/$50 per M in/out (no cache;
		// output 100 tokens a call): tools (1.0+0.05 + 1.4+0.06)/2 = 1.255, cells (0.3+0.02 + 0.5+0.03)/2
		// = 0.425, ratio 2.95.
		"| tabletop | 6 | 2 | 33.3 [9.7, 70.0] | 66.7 [30.0, 90.3] | +33.3 [",
		"11.0 → 5.0 (2.20× [", "120k → 40.0k (3.00× [", "$1.25 → $0.425 (2.95× [",
		"| **All** | 6 | 2 | 33.3 [9.7, 70.0] | 66.7 [30.0, 90.3] |",
		"cells boot_error=1; tools interrupted=1 planner_error=1",
		"NOT FINAL: 3 episode(s) end in a status eval runs again", "1 never ran",
		"gpt-6-astra: 10/1/50 from embedded as of",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	// The original's form: several paths pooled, systems named; --output writes what is printed.
	out := filepath.Join(t.TempDir(), "table.md")
	eps := filepath.Join(dir, "episodes", "tabletop", "default")
	orig, stderr, code := run("--left-system", "tools", "--right-system", "pyrualean:cells", "--format", "md", "--output", out,
		filepath.Join(eps, "stack_blocks"), filepath.Join(eps, "open_drawer"), filepath.Join(eps, "put_block_in_bowl"))
	written, _ := os.ReadFile(out)
	if code != 0 || string(written) != orig {
		t.Fatalf("original form: exit %d\n%s", code, stderr)
	}
	if strings.Replace(orig, "pyrualean:cells", "cells", -1) != strings.Replace(md, ", 1 never ran", ", 0 never ran", 1) {
		t.Errorf("the original's form gives another table:\n%s\nvs\n%s", orig, md)
	}
	js, _, code := run("--json", dir)
	var c struct {
		Systems []string `json:"systems"`
		Pairing struct {
			Valid           bool `json:"valid"`
			MatchedEpisodes int  `json:"matched_episodes"`
			InputEpisodes   int  `json:"input_episodes"`
		} `json:"pairing"`
		Pairs         int `json:"pairs"`
		JointlySolved int `json:"jointly_solved"`
		Table         struct {
			Rows []struct {
				Benchmark string `json:"benchmark"`
				Left      struct{ Solved, Counted int }
				LLMCalls  struct{ Left, Right *float64 } `json:"llm_calls"`
			} `json:"rows"`
		} `json:"table"`
	}
	if err := json.Unmarshal([]byte(js), &c); err != nil || code != 0 {
		t.Fatalf("json: %v exit %d\n%s", err, code, js)
	}
	if !c.Pairing.Valid || c.Pairing.MatchedEpisodes != 6 || c.Pairing.InputEpisodes != 12 || c.Pairs != 6 || c.JointlySolved != 2 ||
		len(c.Systems) != 2 || c.Table.Rows[0].Left.Solved != 2 || c.Table.Rows[0].Left.Counted != 6 || *c.Table.Rows[0].LLMCalls.Left != 11 {
		t.Errorf("json: %+v", c)
	}
	// Two paths without system flags are one system each (the original's `compare LEFT RIGHT`).
	text, stderr, code := run(filepath.Join(eps, "stack_blocks"), filepath.Join(eps, "open_drawer"))
	if code != exitEpisodeError || !strings.Contains(stderr, "the left side holds several systems (pyrualean:cells, pyrualean:tools): name one with --left-system") {
		t.Errorf("two mixed paths: exit %d\n%s%s", code, text, stderr)
	}
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--format", "html", dir}, exitUsage, `--format "html"`},
		{[]string{"--json", "--format", "md", dir}, exitUsage, "disagree"},
		{[]string{"--left-system", "cells", "--right-system", "pyrualean", dir}, exitUsage, "both name pyrualean:cells"},
		{[]string{"--left-system", "rpent", dir}, exitFailed, `no episodes of "rpent"`},
		{[]string{"--prices", filepath.Join(dir, "missing.json"), dir}, exitUsage, "--prices"},
		{[]string{}, exitUsage, "give the run folders"},
		{[]string{filepath.Join(eps, "stack_blocks", "0", "cells")}, exitUsage, "holds only pyrualean:cells: give LEFT RIGHT paths"},
	} {
		if _, stderr, code := run(c.args...); code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("compare %v: exit %d (want %d), stderr %q (want %q)", c.args, code, c.code, stderr, c.err)
		}
	}
}

// TestSummarizePaperTable: summarize prints the same counting and, with both systems in its paths,
// the paper's table; --prices makes a model priced; CSV is plain numbers.
func TestSummarizePaperTable(t *testing.T) {
	dir := statusSuite(t)
	var stdout, stderr bytes.Buffer
	if code := cmdSummarize(context.Background(), []string{dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	text := stdout.String()
	t.Logf("summarize:\n%s", text)
	for _, want := range []string{
		"episodes 12  success 50.0% (6/12)", // every episode in the denominator
		"counted as failed: no recorded outcome 4",
		"infrastructure failures (counted as failed episodes, as the original): boot_error=1 interrupted=1 planner_error=1",
		"Code cells against tool calling: tools → cells",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("summarize lacks %q", want)
		}
	}
	prices := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(prices, []byte(`{"gpt-6-astra": {"input": 1, "cached_input": 1, "output": 0}}`), 0o644)
	stdout.Reset()
	if code := cmdSummarize(context.Background(), []string{dir, "--format", "csv", "--prices", prices}, &stdout, &stderr); code != 0 {
		t.Fatalf("csv exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	// cost at $1 per M input: tools (0.1+0.14)/2 = 0.12, cells (0.03+0.05)/2 = 0.04
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "tabletop,tools,cells,6,2,6,6,2,") || !strings.Contains(lines[1], ",0.12,0.04,3,") {
		t.Errorf("csv:\n%s", stdout.String())
	}
	// One system: its own table.
	stdout.Reset()
	cells := filepath.Join(dir, "episodes", "tabletop", "default", "stack_blocks", "0", "cells")
	if code := cmdSummarize(context.Background(), []string{"--format", "md", cells}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "**pyrualean:cells per benchmark (robot/suite)**") || !strings.Contains(stdout.String(), "| tabletop | 1 | 100.0 [20.7, 100.0] | 0 | 4.0 | 30.0k | $0.320 |") {
		t.Errorf("one system: exit %d\n%s", code, stdout.String())
	}
}

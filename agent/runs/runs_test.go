package runs

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent"
)

func writeResult(t *testing.T, dir string, r agent.Result) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSummarizeAndCompare(t *testing.T) {
	base := t.TempDir()
	yes, no := true, false
	cost := func(c float64) *float64 { return &c }
	mk := func(arm, task string, seed int, ok *bool, status string, llm, in int, c float64) agent.Result {
		return agent.Result{Schema: agent.ResultSchema, System: "pyrualean", Arm: arm, Robot: "tabletop", Task: task, Seed: seed,
			EnvironmentSuccess: ok, Status: status, ToolTurns: llm - 1, Calls: 2 * llm, PolicyWallS: 10,
			Generation: agent.Generation{Turns: llm, InputTokens: in, OutputTokens: 10}, CostUSD: cost(c)}
	}
	writeResult(t, filepath.Join(base, "cells", "a"), mk("cells", "stack", 0, &yes, agent.StatusCompleted, 4, 20000, 0.02))
	writeResult(t, filepath.Join(base, "cells", "b"), mk("cells", "drawer", 0, &yes, agent.StatusCompleted, 6, 30000, 0.03))
	writeResult(t, filepath.Join(base, "cells", "c"), mk("cells", "three", 0, &no, agent.StatusCallBudget, 10, 60000, 0.06))
	writeResult(t, filepath.Join(base, "cells", "d"), mk("cells", "four", 0, nil, agent.StatusPlannerError, 1, 100, 0.001))
	running := mk("cells", "five", 0, nil, agent.StatusRunning, 1, 100, 0)
	running.PID = 999999999 // no such process: the play was killed
	writeResult(t, filepath.Join(base, "cells", "e"), running)
	os.MkdirAll(filepath.Join(base, "cells", "corrupt"), 0o755)
	os.WriteFile(filepath.Join(base, "cells", "corrupt", "result.json"), []byte(`{"status": `), 0o644)
	writeResult(t, filepath.Join(base, "tools", "a"), mk("tools", "stack", 0, &yes, agent.StatusCompleted, 8, 50000, 0.05))
	writeResult(t, filepath.Join(base, "tools", "b"), mk("tools", "drawer", 0, &yes, agent.StatusCompleted, 12, 90000, 0.09))
	writeResult(t, filepath.Join(base, "tools", "c"), mk("tools", "three", 0, &yes, agent.StatusCompleted, 20, 150000, 0.15))

	before, _ := os.ReadFile(filepath.Join(base, "cells", "e", "result.json"))
	rows, errs := LoadRuns([]string{filepath.Join(base, "cells"), filepath.Join(base, "missing")})
	// The killed play is reported as interrupted, and its result.json is left as written: reading
	// run folders never writes them.
	if after, _ := os.ReadFile(filepath.Join(base, "cells", "e", "result.json")); !bytes.Equal(before, after) {
		t.Errorf("LoadRuns rewrote a result.json:\n%s\n->\n%s", before, after)
	}
	for _, r := range rows {
		if strings.HasSuffix(r.Path, "e") && r.Status != agent.StatusInterrupted {
			t.Errorf("killed play's row status %q, want interrupted", r.Status)
		}
	}
	if len(rows) != 5 || len(errs) != 2 {
		t.Fatalf("rows %d errs %v", len(rows), errs)
	}
	var sawCorrupt, sawMissing bool
	for _, e := range errs {
		sawCorrupt = sawCorrupt || strings.HasSuffix(e.Path, "corrupt") && strings.Contains(e.Err, "corrupt")
		sawMissing = sawMissing || strings.HasSuffix(e.Path, "missing")
	}
	if !sawCorrupt || !sawMissing {
		t.Errorf("errors not named: %v", errs)
	}
	s := Summarize(rows)
	if s.NativeSRDenominator != 3 || s.Solved != 2 || s.Statuses[agent.StatusInterrupted] != 1 || s.Statuses[agent.StatusPlannerError] != 1 {
		t.Errorf("summary %+v", s)
	}
	if s.PerSolved == nil || s.PerSolved.LLMCalls != 5 || s.PerSolved.InputTokens != 25000 {
		t.Errorf("per solved %+v", s.PerSolved)
	}
	var buf bytes.Buffer
	WriteSummaryTable(&buf, rows, s)
	if !strings.Contains(buf.String(), "pyrualean:cells") || !strings.Contains(buf.String(), "interrupted") || !strings.Contains(buf.String(), "66.7% (2/3)") {
		t.Errorf("table:\n%s", buf.String())
	}

	left, _ := LoadRuns([]string{filepath.Join(base, "tools")})
	c := Compare(left, rows)
	if c.Pairs != 3 || c.JointlySolved != 2 || len(c.UnmatchedRight) != 2 || len(c.Duplicates) != 0 {
		t.Fatalf("compare %+v", c)
	}
	if c.Ratios.InputTokens == nil || *c.Ratios.InputTokens != 70000.0/25000.0 || *c.Ratios.LLMCalls != 2 {
		t.Errorf("ratios %+v", c.Ratios)
	}
	if c.Delta.CostUSD == nil || *c.Delta.CostUSD > -0.044 || *c.Delta.CostUSD < -0.046 {
		t.Errorf("delta %+v", c.Delta)
	}
	dup := Compare(append(left, left[0]), rows)
	if len(dup.Duplicates) != 1 {
		t.Errorf("duplicates %v", dup.Duplicates)
	}
}

func TestTaskKey(t *testing.T) {
	for _, c := range []struct{ suite, task, want string }{
		{"", "stack_blocks", "stack_blocks"},
		{"libero_spatial_swap", "7", "libero_spatial_swap:7"},
		{"", "libero_spatial_swap/7", "libero_spatial_swap:7"},                    // --task S/7
		{"libero_spatial_swap", "libero_spatial_swap/7", "libero_spatial_swap:7"}, // both
		{"libero_goal", "libero_spatial_swap/7", "libero_goal:libero_spatial_swap/7"},
	} {
		if got := TaskKey(c.suite, c.task); got != c.want {
			t.Errorf("TaskKey(%q, %q) = %q, want %q", c.suite, c.task, got, c.want)
		}
	}
}

// A person's robot work in a live episode is summarised apart from the agent's.
func TestSummarizeKeepsPeopleApart(t *testing.T) {
	base := t.TempDir()
	yes := true
	writeResult(t, filepath.Join(base, "live"), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "tabletop", Task: "stack",
		EnvironmentSuccess: &yes, Status: agent.StatusCompleted, Calls: 3, StatefulCalls: 1, EnvSteps: 40,
		HumanCells: 2, HumanCalls: 2, HumanStatefulCalls: 1, HumanEnvSteps: 8})
	writeResult(t, filepath.Join(base, "alone"), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "tabletop", Task: "stack",
		Seed: 1, EnvironmentSuccess: &yes, Status: agent.StatusCompleted, Calls: 5, StatefulCalls: 3, EnvSteps: 60})
	rows, errs := LoadRuns([]string{base})
	if len(errs) != 0 || len(rows) != 2 {
		t.Fatalf("rows %v errs %v", rows, errs)
	}
	s := Summarize(rows)
	if s.MeanStatefulCalls != 2 || s.MeanEnvSteps != 50 || s.WithPeople != 1 || s.HumanStatefulCalls != 1 || s.HumanEnvSteps != 8 || s.HumanCells != 2 {
		t.Errorf("summary %+v", s)
	}
	var buf bytes.Buffer
	WriteSummaryTable(&buf, rows, s)
	if !strings.Contains(buf.String(), "people: 1 episode(s) with people's cells: 2 cells, 2 calls (1 stateful), 8 env steps") {
		t.Errorf("table:\n%s", buf.String())
	}
}

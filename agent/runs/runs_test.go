package runs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/prices"
	"github.com/pyrualean/pyrualean/seal"
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

// ep is one episode as the test writes it.
type ep struct {
	status         string
	ok             *bool
	llm, turns     int
	in, cached, ou int
	model          string
}

var yes, no = func() (*bool, *bool) { t, f := true, false; return &t, &f }()

// Episode shapes: the statuses the issue names, each as play writes it.
func solved(llm, in, cached, out int) ep {
	return ep{status: agent.StatusCompleted, ok: yes, llm: llm, turns: llm - 1, in: in, cached: cached, ou: out}
}

var (
	failed       = ep{status: agent.StatusCallBudget, ok: no, llm: 40, turns: 40, in: 900_000}
	plannerError = ep{status: agent.StatusPlannerError, llm: 3, turns: 2, in: 30_000} // outcome null
	timeout      = ep{status: agent.StatusTimeout, llm: 7, turns: 6, in: 80_000}      // timed out before any cell ended: null
	bootError    = ep{status: agent.StatusBootError}                                  // null, nothing ran
	interrupted  = ep{status: agent.StatusRunning, llm: 2, turns: 1, in: 20_000}      // a killed play: "running" on disk, pid gone
	nullOutcome  = ep{status: agent.StatusError, llm: 5, turns: 4, in: 50_000}        // a crash mid-episode, outcome null
	errNoAction  = ep{status: agent.StatusError, llm: 1, turns: 0, in: 10_000}        // an error before any policy action
	unpricedOK   = ep{status: agent.StatusCompleted, ok: yes, llm: 8, turns: 7, in: 100_000, ou: 2_000, model: "qwen2.5-coder-1.5b"}
	astra        = "gpt-6-astra"
)

// instance is one (robot, suite:task, seed) both systems ran.
type instance struct {
	suite, task  string
	seed         int
	tools, cells ep
}

func writeSystems(t *testing.T, base string, insts []instance) {
	t.Helper()
	for _, in := range insts {
		robot := "tabletop"
		if in.suite != "" {
			robot = "libero"
		}
		for arm, e := range map[string]ep{"tools": in.tools, "cells": in.cells} {
			model := e.model
			if model == "" {
				model = astra
			}
			r := agent.Result{Schema: agent.ResultSchema, System: "pyrualean", Arm: arm, Robot: robot, Suite: in.suite, Task: in.task,
				Seed: in.seed, Model: model, Status: e.status, EnvironmentSuccess: e.ok, ToolTurns: e.turns, Calls: e.turns, Sealed: true,
				Generation: agent.Generation{Turns: e.llm, InputTokens: e.in, CachedInputTokens: e.cached, OutputTokens: e.ou}}
			if e.status == agent.StatusRunning {
				r.PID = 999_999_999 // no such process: the play was killed
			}
			writeResult(t, filepath.Join(base, arm, robot, in.suite, in.task, string(rune('0'+in.seed))), r)
		}
	}
}

// The "done when": run folders with every status for two systems; summarize's and
// compare's figures are checked against values worked out by hand from the original's rules
// (every episode in the denominator, null outcome = failure; calls, tokens and cost as means over
// the jointly solved instances).
func TestCountingAsTheOriginal(t *testing.T) {
	base := t.TempDir()
	insts := []instance{
		// tabletop
		{"", "stack_blocks", 0, solved(10, 100_000, 40_000, 2_000), solved(4, 30_000, 10_000, 1_000)}, // 1 joint
		{"", "stack_blocks", 1, solved(12, 140_000, 60_000, 3_000), solved(6, 50_000, 20_000, 1_500)}, // 2 joint
		{"", "open_drawer", 0, failed, solved(5, 40_000, 0, 1_000)},                                   // 3
		{"", "open_drawer", 1, plannerError, failed},                                                  // 4
		{"", "put_block_in_bowl", 0, timeout, bootError},                                              // 5
		{"", "put_block_in_bowl", 1, interrupted, solved(3, 20_000, 0, 500)},                          // 6
		{"", "stack_three", 0, solved(9, 90_000, 0, 1_000), nullOutcome},                              // 7
		{"", "stack_three", 1, errNoAction, interrupted},                                              // 8
		// libero/libero_spatial_swap
		{"libero_spatial_swap", "0", 0, solved(20, 400_000, 0, 5_000), unpricedOK}, // 9 joint, the cells side has no price
		{"libero_spatial_swap", "1", 0, failed, solved(7, 70_000, 0, 1_000)},       // 10
	}
	writeSystems(t, base, insts)
	rows, errs := LoadRuns([]string{base})
	if len(errs) != 0 || len(rows) != 20 {
		t.Fatalf("rows %d errs %v", len(rows), errs)
	}
	tab, err := prices.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	PriceRows(rows, tab)

	// summarize, all 20 episodes pooled (as the original's summarize --json): no unknown outcome,
	// nothing running, so the denominator is every episode.
	s := Summarize(rows)
	// solved: tools 1,2,7,9 + cells 1,2,3,6,9,10 = 10
	if s.Episodes != 20 || s.NativeSRDenominator != 20 || s.Solved != 10 || s.NativeSR == nil || *s.NativeSR != 0.5 || s.UnknownOutcomeEpisodes != 0 {
		t.Errorf("summary: episodes %d denominator %d solved %d sr %v unknown %d", s.Episodes, s.NativeSRDenominator, s.Solved, s.NativeSR, s.UnknownOutcomeEpisodes)
	}
	// null outcome read as failure: tools 4 (planner_error), 5 (timeout), 6 (interrupted), 8; cells 5 (boot), 7, 8
	if s.NullOutcome != 7 {
		t.Errorf("null outcomes %d, want 7", s.NullOutcome)
	}
	wantInfra := map[string]int{agent.StatusPlannerError: 1, agent.StatusBootError: 1, agent.StatusInterrupted: 2, InfraErrorBeforeAction: 1}
	if !equalCounts(s.Infra, wantInfra) {
		t.Errorf("infra %v, want %v", s.Infra, wantInfra)
	}

	// compare tools -> cells (one path holding both systems, split by arm)
	left, right, both := SplitSystems(rows, DefaultLeftSystem, DefaultRightSystem)
	if len(left) != 10 || len(right) != 10 || len(both) != 0 {
		t.Fatalf("split %d %d %d", len(left), len(right), len(both))
	}
	c := Compare(left, right)
	if c.Pairs != 10 || c.JointlySolved != 3 || *c.LeftSR != 0.4 || *c.RightSR != 0.6 {
		t.Errorf("comparison: pairs %d joint %d sr %v -> %v", c.Pairs, c.JointlySolved, *c.LeftSR, *c.RightSR)
	}
	// jointly solved 1, 2, 9: LLM calls (10+12+20)/3 -> (4+6+8)/3
	near(t, "mean llm calls left", c.Left.LLMCalls, 14)
	near(t, "mean llm calls right", c.Right.LLMCalls, 6)
	near(t, "mean input tokens left", c.Left.InputTokens, (100_000+140_000+400_000)/3.0)
	near(t, "mean input tokens right", c.Right.InputTokens, 60_000)
	if c.Left.CostUSD == nil || c.Right.CostUSD != nil {
		t.Errorf("cost: left %v right %v (the cells side of 9 has no price: unknown, not $0)", c.Left.CostUSD, c.Right.CostUSD)
	}

	table := BuildTable(PairRows(left, right), "tools", "cells", TableOptions{Prices: tab, Retryable: func(r Row) bool {
		return r.Status == agent.StatusBootError || r.Status == agent.StatusPlannerError || r.Status == agent.StatusInterrupted
	}})
	want := []struct {
		bench             string
		n, joint          int
		lSolved, lCounted int
		rSolved, rCounted int
		lInfra, rInfra    int
		diff              float64
		lCalls, rCalls    float64
		lTok, rTok        float64
		lCost, rCost      float64 // -1: unknown
		unpriced          int
	}{
		// libero, instances 9-10: tools 1 of 2, cells 2 of 2; the one jointly solved has no cells price.
		{"libero/libero_spatial_swap", 2, 1, 1, 2, 2, 2, 0, 0, (2 - 1) / 2.0, 20, 8, 400_000, 100_000, -1, -1, 1},
		// tabletop, instances 1-8. Success: tools 1,2,7 of 8; cells 1,2,3,6 of 8. Infra: tools
		// planner_error 4, interrupted 6, error before any action 8; cells boot_error 5, interrupted 8.
		// Cost at gpt-6-astra's $10 / $1 cached / $50 per M: tools #1 0.6+0.04+0.1, #2 0.8+0.06+0.15;
		// cells #1 0.2+0.01+0.05, #2 0.3+0.02+0.075.
		{"tabletop", 8, 2, 3, 8, 4, 8, 3, 2, (4 - 3) / 8.0, 11, 5, 120_000, 40_000, (0.74 + 1.01) / 2, (0.26 + 0.395) / 2, 0},
		{"All", 10, 3, 4, 10, 6, 10, 3, 2, (6 - 4) / 10.0, 14, 6, 640_000 / 3.0, 60_000, -1, -1, 1},
	}
	if len(table.Rows) != len(want) {
		t.Fatalf("table rows %+v", table.Rows)
	}
	for i, w := range want {
		r := table.Rows[i]
		if r.Benchmark != w.bench || r.Instances != w.n || r.JointlySolved != w.joint ||
			r.Left.Solved != w.lSolved || r.Left.Counted != w.lCounted || r.Right.Solved != w.rSolved || r.Right.Counted != w.rCounted ||
			r.Left.Infra != w.lInfra || r.Right.Infra != w.rInfra {
			t.Errorf("row %d: %+v\nwant %+v", i, r, w)
			continue
		}
		near(t, w.bench+" success diff", r.SuccessDiff.Value, w.diff)
		near(t, w.bench+" left success", r.Left.Success.Value, float64(w.lSolved)/float64(w.lCounted))
		near(t, w.bench+" llm calls left", *r.LLMCalls.Left, w.lCalls)
		near(t, w.bench+" llm calls right", *r.LLMCalls.Right, w.rCalls)
		near(t, w.bench+" llm calls ratio", r.LLMCalls.Ratio.Value, w.lCalls/w.rCalls)
		near(t, w.bench+" tokens left", *r.InputTokens.Left, w.lTok)
		near(t, w.bench+" tokens right", *r.InputTokens.Right, w.rTok)
		if w.lCost < 0 {
			if r.Cost.Left != nil || r.Cost.Right != nil || r.Cost.Ratio != nil || r.Cost.Unpriced != w.unpriced {
				t.Errorf("%s cost: %+v, want unknown with %d unpriced", w.bench, r.Cost, w.unpriced)
			}
		} else {
			near(t, w.bench+" cost left", *r.Cost.Left, w.lCost)
			near(t, w.bench+" cost right", *r.Cost.Right, w.rCost)
			near(t, w.bench+" cost ratio", r.Cost.Ratio.Value, w.lCost/w.rCost)
		}
		for _, iv := range []*Interval{r.SuccessDiff, r.LLMCalls.Ratio, r.InputTokens.Ratio, r.Left.Success, r.Right.Success} {
			if iv.Lo > iv.Value || iv.Value > iv.Hi {
				t.Errorf("%s: interval %+v does not hold its value", w.bench, iv)
			}
		}
	}
	// Wilson 95% of 3 in 8 (tabletop, tools) and 6 in 10 (from the score formula by hand: 13.7-69.4%, 31.3-83.2%).
	near(t, "wilson 3/8 lo", table.Rows[1].Left.Success.Lo, 0.136844)
	near(t, "wilson 3/8 hi", table.Rows[1].Left.Success.Hi, 0.694258)
	near(t, "wilson 6/10 lo", table.Rows[2].Right.Success.Lo, 0.312674)
	// eval would rerun planner_error 4, interrupted 6 (tools); boot_error 5, interrupted 8 (cells)
	if table.NotFinal.Retryable != 4 || table.NotFinal.Running != 0 || len(table.Infra) != 5 {
		t.Errorf("not final %+v, infra %+v", table.NotFinal, table.Infra)
	}
	// The same rows give the same intervals (seeded bootstrap).
	again := BuildTable(PairRows(left, right), "tools", "cells", TableOptions{})
	if *again.Rows[2].LLMCalls.Ratio != *table.Rows[2].LLMCalls.Ratio || *again.Rows[2].SuccessDiff != *table.Rows[2].SuccessDiff {
		t.Errorf("bootstrap not reproducible: %+v vs %+v", again.Rows[2].LLMCalls.Ratio, table.Rows[2].LLMCalls.Ratio)
	}

	var md bytes.Buffer
	if err := WriteTable(&md, table, FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| benchmark | n | jointly solved | success tools (%) | success cells (%) |", "| tabletop | 8 | 2 | 37.5 [13.7, 69.4] | 50.0 [21.5, 78.5] |",
		"| **All** | 10 | 3 |", "11.0 → 5.0 (2.20×", "120k → 40.0k", "$0.875 → $0.328", "unknown (1 of 1 without a price)",
		"NOT FINAL: 4 episode(s)", "qwen2.5-coder-1.5b: unknown (served locally", "gpt-6-astra: 10/1/50 from embedded"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("markdown lacks %q:\n%s", s, md.String())
		}
	}
}

// An RPent run without states.json has an unknown outcome: outside the denominator, counted; an
// episode still running is outside it too, and makes the table not final.
func TestUnknownAndRunningOutcomes(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "rpent", "run1")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "transcript_libero_spatial_swap_t0_s0.json"), []byte(`{"suite": "libero_spatial_swap", "task": 0, "seed": 0,
		"model": "gpt-6-astra", "finish": {"status": "success"}, "stats": {"requests": 9, "total_input_tokens": 300000}}`), 0o644)
	writeResult(t, filepath.Join(base, "cells", "a"), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "libero", Suite: "libero_spatial_swap",
		Task: "0", Status: agent.StatusCompleted, EnvironmentSuccess: yes, Model: astra, Generation: agent.Generation{Turns: 3, InputTokens: 40_000}})
	writeResult(t, filepath.Join(base, "cells", "b"), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "libero", Suite: "libero_spatial_swap",
		Task: "1", Status: agent.StatusRunning, PID: os.Getpid(), Model: astra}) // this process: alive, still running
	rows, errs := LoadRuns([]string{base})
	if len(errs) != 0 || len(rows) != 3 {
		t.Fatalf("rows %v errs %v", rows, errs)
	}
	s := Summarize(rows)
	if s.UnknownOutcomeEpisodes != 1 || s.Running != 1 || s.NativeSRDenominator != 1 || s.Solved != 1 || s.NullOutcome != 0 {
		t.Errorf("summary %+v", s)
	}
	l, r, _ := SplitSystems(rows, "rpent", "cells")
	tab := BuildTable(PairRows(l, r), "rpent", "cells", TableOptions{})
	all := tab.Rows[len(tab.Rows)-1]
	if all.Instances != 1 || all.Left.Unknown != 1 || all.Left.Counted != 0 || all.Left.Success != nil || all.SuccessDiff != nil || all.JointlySolved != 0 {
		t.Errorf("rpent unknown: %+v", all)
	}
	if tab.UnmatchedRight != 1 || tab.NotFinal.Running != 0 {
		t.Errorf("the running cells episode has no rpent twin: %+v", tab)
	}
	st := BuildSystemTable("cells", r, TableOptions{})
	if st.NotFinal.Running != 1 || st.Rows[len(st.Rows)-1].Counted != 1 {
		t.Errorf("system table: %+v", st)
	}
	var text bytes.Buffer
	WriteSystemTable(&text, st, FormatText)
	if !strings.Contains(text.String(), "NOT FINAL: 0 episode(s) end in a status eval runs again (boot_error, planner_error, interrupted: run the same eval command again), 1 still running") {
		t.Errorf("system table text:\n%s", text.String())
	}
}

// A eval folder's attempts/ hold earlier attempts of episodes that ran again: never counted.
func TestSuiteAttemptsAreNotEpisodes(t *testing.T) {
	base := t.TempDir()
	os.WriteFile(filepath.Join(base, "manifest.json"), []byte(`{}`), 0o644)
	id := filepath.Join("tabletop", "default", "stack_blocks", "0", "cells", "replay", "default")
	writeResult(t, filepath.Join(base, "episodes", id), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "tabletop", Task: "stack_blocks",
		Status: agent.StatusCompleted, EnvironmentSuccess: yes})
	writeResult(t, filepath.Join(base, "attempts", id, "1"), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "tabletop", Task: "stack_blocks",
		Status: agent.StatusBootError})
	rows, errs := LoadRuns([]string{base})
	if len(errs) != 0 || len(rows) != 1 || rows[0].Status != agent.StatusCompleted {
		t.Errorf("rows %+v errs %v", rows, errs)
	}
}

// Costs: a price file over the recorded cost over the shipped table; no LLM call costs $0 at any
// price; an unpriced model is unknown, never $0.
func TestPriceRows(t *testing.T) {
	rec := 0.5
	tab, _ := prices.Embedded()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.json"), []byte(`{"mine": {"input": 1, "output": 2}}`), 0o644)
	user, err := prices.Read(filepath.Join(dir, "p.json"))
	if err != nil {
		t.Fatal(err)
	}
	withUser := tab.Merge(user)
	for _, c := range []struct {
		name   string
		row    Row
		tab    *prices.Table
		want   float64 // -1: unknown
		source string
	}{
		{"shipped price", Row{Model: astra, LLMCalls: 1, InTok: 1_000_000, Cached: 0, OutTok: 0}, tab, 10, CostPrices},
		{"recorded over shipped", Row{Model: astra, LLMCalls: 1, InTok: 1_000_000, Cost: &rec, CostSource: CostRecorded}, tab, 0.5, CostRecorded},
		{"user file over recorded", Row{Model: "mine", LLMCalls: 1, InTok: 1_000_000, OutTok: 1_000_000, Cost: &rec, CostSource: CostRecorded}, withUser, 3, CostPrices},
		{"no LLM calls", Row{Model: "replay"}, tab, 0, CostNoLLM},
		{"local model", Row{Model: "qwen2.5-coder-1.5b", LLMCalls: 3, InTok: 9000}, tab, -1, CostUnknownAs + "served locally"},
		{"not in the table", Row{Model: "mystery", LLMCalls: 3, InTok: 9000}, tab, -1, CostUnknownAs + "not in the price table"},
		{"no table", Row{Model: astra, LLMCalls: 3, InTok: 9000}, nil, -1, CostUnknownAs},
	} {
		rows := []Row{c.row}
		PriceRows(rows, c.tab)
		got := rows[0]
		if !strings.HasPrefix(got.CostSource, c.source) || (c.want < 0) != (got.Cost == nil) || (got.Cost != nil && math.Abs(*got.Cost-c.want) > 1e-9) {
			t.Errorf("%s: cost %v source %q, want %v %q", c.name, got.Cost, got.CostSource, c.want, c.source)
		}
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

func TestMatchSystem(t *testing.T) {
	cells := Row{System: "pyrualean:cells", Model: astra}
	rpent := Row{System: "rpent:tools", Model: astra}
	for _, c := range []struct {
		spec string
		row  Row
		want bool
	}{
		{"cells", cells, true}, {"pyrualean", cells, true}, {"pyrualean:cells", cells, true}, {"tools", cells, false},
		{"tools", rpent, true}, {"rpent", rpent, true}, {"pyrualean", rpent, false},
		{"cells@gpt-6-astra", cells, true}, {"cells@other", cells, false},
	} {
		if got := MatchSystem(c.spec, c.row); got != c.want {
			t.Errorf("MatchSystem(%q, %s) = %v", c.spec, c.row.System, got)
		}
	}
}

// A person's robot work in a live episode is summarised apart from the agent's.
func TestSummarizeKeepsPeopleApart(t *testing.T) {
	base := t.TempDir()
	writeResult(t, filepath.Join(base, "live"), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "tabletop", Task: "stack",
		EnvironmentSuccess: yes, Status: agent.StatusCompleted, Calls: 3, StatefulCalls: 1, EnvSteps: 40,
		HumanCells: 2, HumanCalls: 2, HumanStatefulCalls: 1, HumanEnvSteps: 8})
	writeResult(t, filepath.Join(base, "alone"), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "tabletop", Task: "stack",
		Seed: 1, EnvironmentSuccess: yes, Status: agent.StatusCompleted, Calls: 5, StatefulCalls: 3, EnvSteps: 60})
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

// Reading run folders never writes them; missing and corrupt folders are named.
func TestLoadRunsReadsOnly(t *testing.T) {
	base := t.TempDir()
	writeResult(t, filepath.Join(base, "e"), agent.Result{Schema: agent.ResultSchema, Arm: "cells", Robot: "tabletop", Task: "five",
		Status: agent.StatusRunning, PID: 999_999_999})
	os.MkdirAll(filepath.Join(base, "corrupt"), 0o755)
	os.WriteFile(filepath.Join(base, "corrupt", "result.json"), []byte(`{"status": `), 0o644)
	before, _ := os.ReadFile(filepath.Join(base, "e", "result.json"))
	rows, errs := LoadRuns([]string{base, filepath.Join(base, "missing")})
	if after, _ := os.ReadFile(filepath.Join(base, "e", "result.json")); !bytes.Equal(before, after) {
		t.Errorf("LoadRuns rewrote a result.json")
	}
	if len(rows) != 1 || rows[0].Status != agent.StatusInterrupted || rows[0].OK == nil || *rows[0].OK || !rows[0].NullOutcome {
		t.Errorf("killed play: %+v", rows)
	}
	var sawCorrupt, sawMissing bool
	for _, e := range errs {
		sawCorrupt = sawCorrupt || strings.HasSuffix(e.Path, "corrupt") && strings.Contains(e.Err, "corrupt")
		sawMissing = sawMissing || strings.HasSuffix(e.Path, "missing")
	}
	if len(errs) != 2 || !sawCorrupt || !sawMissing {
		t.Errorf("errors not named: %v", errs)
	}
}

// The other formats carry the same table: CSV as plain numbers, LaTeX escaped.
func TestTableFormats(t *testing.T) {
	base := t.TempDir()
	writeSystems(t, base, []instance{
		{"", "stack_blocks", 0, solved(10, 100_000, 40_000, 2_000), solved(4, 30_000, 10_000, 1_000)},
		{"", "stack_blocks", 1, failed, solved(6, 50_000, 20_000, 1_500)},
	})
	rows, _ := LoadRuns([]string{base})
	tab, _ := prices.Embedded()
	PriceRows(rows, tab)
	l, r, _ := SplitSystems(rows, "tools", "cells")
	table := BuildTable(PairRows(l, r), "tools", "cells", TableOptions{Prices: tab})
	for format, wants := range map[string][]string{
		FormatCSV: {"benchmark,left_system,right_system,instances,jointly_solved,left_episodes", "\ntabletop,tools,cells,2,1,2,2,1,0.5,",
			",10,4,2.5,2.5,2.5,0,"}, // LLM calls 10 -> 4, ratio 2.5 (one pair: the interval is the point)
		FormatLaTeX: {`\begin{tabular}{lrrllllll}`, `success tools (\%)`, `10.0 $\rightarrow$ 4.0 (2.50$\times$ [2.50, 2.50])`, `\$0.740 $\rightarrow$ \$0.260`, `\midrule` + "\nAll &"},
		FormatText:  {"Code cells against tool calling: tools → cells", "All        2               1"},
		FormatJSON:  {`"left": "tools"`, `"jointly_solved": 1`},
	} {
		var b bytes.Buffer
		if err := WriteTable(&b, table, format); err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s lacks %q:\n%s", format, w, b.String())
			}
		}
	}
	if err := WriteTable(&bytes.Buffer{}, table, "html"); err == nil {
		t.Error("unknown format: no error")
	}
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Privileged primitives and perception (the simulator's ground truth) are counted per episode, with the
// primitive sets the episodes ran with.
func TestSummarizeCountsPrivileged(t *testing.T) {
	base := t.TempDir()
	for i, r := range []agent.Result{
		{Primitives: "full", PrivilegedCalls: 2},
		{Primitives: "full", Perception: PerceptionSimulatorMasks},
		{Primitives: "paper", Perception: "sam3"},
		{Primitives: "paper"},
	} {
		r.Schema, r.Arm, r.Robot, r.Task, r.Seed, r.Status, r.EnvironmentSuccess = agent.ResultSchema, "cells", "libero", "t", i, agent.StatusCompleted, no
		writeResult(t, filepath.Join(base, fmt.Sprint(i)), r)
	}
	rows, errs := LoadRuns([]string{base})
	if len(errs) != 0 || len(rows) != 4 {
		t.Fatalf("rows %v errs %v", rows, errs)
	}
	s := Summarize(rows)
	if s.Privileged != 2 || !equalCounts(s.PrimitiveSets, map[string]int{"full": 2, "paper": 2}) {
		t.Errorf("privileged %d, sets %v; want 2 and full=2 paper=2", s.Privileged, s.PrimitiveSets)
	}
	var buf bytes.Buffer
	WriteSummaryTable(&buf, rows, s)
	if !strings.Contains(buf.String(), "privileged: 2 episode(s)") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// A running episode whose kernel has not started yet is neither sealed nor unsealed; a finished
// episode without a sealed kernel is counted as unsealed.
func TestSummarizeSealing(t *testing.T) {
	base := t.TempDir()
	sealed := &agent.SealInfo{Mode: "auto", Info: seal.Info{Sealed: true}}
	for i, r := range []agent.Result{
		{Status: agent.StatusCompleted, Sealed: true, Seal: sealed},
		{Status: agent.StatusCompleted, Seal: &agent.SealInfo{Mode: "off"}},
		{Status: agent.StatusRunning, PID: os.Getpid()},
		{Status: agent.StatusRunning, PID: os.Getpid(), Sealed: true, Seal: sealed},
	} {
		r.Schema, r.Arm, r.Robot, r.Task, r.Seed = agent.ResultSchema, "cells", "tabletop", "t", i
		writeResult(t, filepath.Join(base, fmt.Sprint(i)), r)
	}
	rows, errs := LoadRuns([]string{base})
	if len(errs) != 0 || len(rows) != 4 {
		t.Fatalf("rows %v errs %v", rows, errs)
	}
	s := Summarize(rows)
	var buf bytes.Buffer
	WriteSummaryTable(&buf, rows, s)
	if s.Unsealed != 1 || !strings.Contains(buf.String(), "sealed 2/4  (NOT SEALED: 1;") ||
		!strings.Contains(buf.String(), "(kernel not started yet: 1)") {
		t.Errorf("unsealed %d, table:\n%s", s.Unsealed, buf.String())
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/agent/runs"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/llm"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/robotapi"
)

func TestPlayBadFlags(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "") // no endpoint: the local runtime is implied
	cases := [][]string{
		{"--runtime", "local", "--model", "no-such-local-model"},
		{"--runtime", "local", "--model", "gpt-4o"},
		{"--arm", "programs"},
		{"--max-programs", "1"}, // needs --arm program
		{"--arm", "program", "--max-programs", "-1"},
		{"--runtime", "codexx"},
		{"--images", "always"},
		{"--feedback", "verbose"},
		{"--primitives", "some"},
		{"--openai-tool-choice", "maybe"},
		{"--openai-temperature", "hot"},
		{"--openai-temperature", "3"},
		{"--openai-extra-body", "[1,2]"},
		{"--openai-extra-body", "{bad"},
		{"--max-turns", "-1"},
		{"--budget-s", "-5"},
		{"--seed", "-1"},
		{"--runtime", "replay"},
		{"--from", "x.py"},
		{"--base-url", "ftp://x"},
		{"--price-input", "1"},
		{"--env-endpoint", "http://127.0.0.1:9"},                         // tabletop runs in the kernel
		{"--robot", "robotwin", "--env-endpoint", "127.0.0.1:9"},         // no scheme
		{"--vla-endpoint", "ws://127.0.0.1:9", "--primitives", "no-vla"}, // VLA hidden
		{"--serve-linger", "1m"},                                         // keeps --serve's gateway: needs --serve
		{"--serve", "127.0.0.1:0", "--serve-linger", "-1s"},              // negative
		{"--serve", "127.0.0.1:0", "--serve-linger", "a while"},          // not a duration
		{"--nope"},
		{"stray"},
	}
	for _, args := range cases {
		var out, errb bytes.Buffer
		code := cmdPlay(context.Background(), args, &out, &errb)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (usage)", args, code, exitUsage)
		}
		if out.Len() != 0 {
			t.Errorf("%v: wrote stdout %q", args, out.String())
		}
		if !strings.Contains(errb.String(), "pyrualean play:") && !strings.Contains(errb.String(), "flag provided but not defined") {
			t.Errorf("%v: stderr %q", args, errb.String())
		}
	}
}

// TestPlayRuntimeDefault: with no --runtime, an endpoint (--base-url or $OPENAI_BASE_URL) means the
// openai runtime and none means the embedded local model; a runtime named explicitly is kept as is.
func TestPlayRuntimeDefault(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "test-key") // the CLI runtimes refuse to start without their key
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	solution := filepath.Join(root, robotapi.SolutionPath("tabletop", "stack_blocks"))
	cases := []struct {
		name, env        string
		args             []string
		runtime, baseURL string // baseURL: what the openai runtime would call ("" for other runtimes)
		model            string // the spec's model before a local server names its model
	}{
		{"nothing given", "", nil, "local", "", ""},
		{"local model named", "", []string{"--model", llm.TestModel}, "local", "", llm.TestModel},
		{"base-url flag", "", []string{"--base-url", "http://127.0.0.1:30000/v1"}, "openai", "http://127.0.0.1:30000/v1", "gpt-6-astra"},
		{"base url from the environment", "http://10.0.0.2:8000/v1", nil, "openai", "http://10.0.0.2:8000/v1", "gpt-6-astra"},
		{"flag wins over the environment", "http://10.0.0.2:8000/v1", []string{"--base-url", "http://127.0.0.1:1/v1", "--model", "m"}, "openai", "http://127.0.0.1:1/v1", "m"},
		{"explicit openai, no endpoint", "", []string{"--runtime", "openai"}, "openai", "https://api.openai.com/v1", "gpt-6-astra"},
		{"explicit local despite an endpoint", "http://10.0.0.2:8000/v1", []string{"--runtime", "local"}, "local", "", ""},
		{"explicit replay", "http://10.0.0.2:8000/v1", []string{"--runtime", "replay", "--from", solution}, "replay", "", "replay"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("OPENAI_BASE_URL", c.env)
			t.Setenv("PYRUALEAN_MODEL", "")
			var stderr bytes.Buffer
			s, err := parsePlay(context.Background(), c.args, &stderr, time.Now())
			if err != nil {
				t.Fatalf("parsePlay(context.Background(), %v): %v", c.args, err)
			}
			if s.episode.Policy.Runtime != c.runtime {
				t.Errorf("runtime %q, want %q", s.episode.Policy.Runtime, c.runtime)
			}
			if oc, err := runtimes.OpenAIConfigFor(runtimes.SettingsFor(s.episode, runtimes.Wiring{})); c.runtime == "openai" && (err != nil || oc.BaseURL != c.baseURL) {
				t.Errorf("base URL %q (%v), want %q", oc.BaseURL, err, c.baseURL)
			}
			if s.episode.Policy.Model != c.model {
				t.Errorf("model %q, want %q", s.episode.Policy.Model, c.model)
			}
			if c.runtime == "local" && runtimes.SettingsFor(s.episode, runtimes.Wiring{}).Model != c.model {
				t.Errorf("local model %q, want %q", runtimes.SettingsFor(s.episode, runtimes.Wiring{}).Model, c.model)
			}
		})
	}
	// A model that is not an embedded one, with no endpoint: the original runs it through Codex.
	t.Setenv("OPENAI_BASE_URL", "")
	if s, err := parsePlay(context.Background(), []string{"--model", "gpt-4o"}, io.Discard, time.Now()); err != nil || s.episode.Policy.Runtime != "codex" {
		t.Errorf("--model gpt-4o with no endpoint: %v", err)
	}
}

// heavyEpisode is what a test that plays an episode needs (nbtest.Heavy skips it under -short).
const heavyEpisode = "an episode: a kernel and the simulator"

func playJSON(t *testing.T, out string) playLine {
	t.Helper()
	var pl playLine
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &pl); err != nil {
		t.Fatalf("play stdout %q: %v", out, err)
	}
	return pl
}

// TestPlayReplaySummarizeCompare runs a reference solution with the replay runtime, then summarizes
// and compares the run folders, as a user would.
func TestPlayReplaySummarizeCompare(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "runs", "solved")
	var stdout, stderr bytes.Buffer
	code := cmdPlay(context.Background(), []string{"--runtime", "replay", "--from", filepath.Join(root, robotapi.SolutionPath("tabletop", "stack_blocks")),
		"--task", "stack_blocks", "--out", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("play exit %d: %s", code, stderr.String())
	}
	pl := playJSON(t, stdout.String())
	if pl.Status != agent.StatusCompleted || pl.EnvironmentSuccess == nil || !*pl.EnvironmentSuccess || pl.Trace != filepath.Join(out, "trace.ipynb") {
		t.Fatalf("play line %+v", pl)
	}
	for _, f := range []string{"result.json", "prompt.txt", "turns.jsonl", "calls.jsonl", "trace.ipynb", "card.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("run folder lacks %s", f)
		}
	}
	// tool_turns.json: the original's rows, one per tool call (finish too), numbered from 0, beside turns.jsonl.
	var toolTurns []map[string]any
	if b, err := os.ReadFile(filepath.Join(out, agent.ToolTurnsFile)); err != nil || json.Unmarshal(b, &toolTurns) != nil || len(toolTurns) != pl.ToolTurns {
		t.Errorf("tool_turns.json: %d rows (%v), want %d", len(toolTurns), err, pl.ToolTurns)
	} else {
		for _, k := range []string{"index", "tool", "elapsed_s", "ok", "moved", "env_steps", "terminated", "sandbox_flags"} {
			if _, ok := toolTurns[0][k]; !ok {
				t.Errorf("tool_turns.json row lacks %q: %v", k, toolTurns[0])
			}
		}
		if n := len(toolTurns); n < 2 || toolTurns[n-1]["tool"] != "finish" || toolTurns[n-2]["tool"] != "python" || toolTurns[n-2]["terminated"] != true ||
			toolTurns[0]["index"] != 0.0 || toolTurns[n-1]["index"] != float64(n-1) {
			t.Errorf("tool_turns.json rows %v", toolTurns)
		}
	}
	// The trace replays: its agent cells and its finish, in a fresh episode.
	again := filepath.Join(dir, "runs", "again")
	stdout.Reset()
	if code := cmdPlay(context.Background(), []string{"--runtime", "replay", "--from", pl.Trace, "--task", "stack_blocks", "--out", again}, &stdout, &stderr); code != 0 {
		t.Fatalf("replay of the trace: exit %d: %s", code, stderr.String())
	}
	if pl2 := playJSON(t, stdout.String()); pl2.EnvironmentSuccess == nil || !*pl2.EnvironmentSuccess || pl2.ToolTurns != pl.ToolTurns || pl2.Finish == nil || pl2.Finish.Summary != pl.Finish.Summary {
		t.Errorf("replayed trace: %+v, first run %+v", pl2, pl)
	}
	os.RemoveAll(again)
	os.MkdirAll(filepath.Join(dir, "runs", "broken"), 0o755)
	os.WriteFile(filepath.Join(dir, "runs", "broken", "result.json"), []byte("{"), 0o644)

	stdout.Reset()
	stderr.Reset()
	if code := cmdSummarize(context.Background(), []string{"--json", filepath.Join(dir, "runs"), filepath.Join(dir, "nope")}, &stdout, &stderr); code != 0 {
		t.Fatalf("summarize exit %d: %s", code, stderr.String())
	}
	// The original's keys at the top level ("episodes" a count), our rows beside them.
	var sum struct {
		runs.Summary
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Episodes != 1 || len(sum.Rows) != 1 || sum.Rows[0]["ok"] != true || sum.Rows[0]["system"] != "pyrualean:cells" || sum.Solved != 1 ||
		sum.NativeSR == nil || *sum.NativeSR != 1 {
		t.Errorf("summarize: %+v", sum)
	}
	var top map[string]any
	json.Unmarshal(stdout.Bytes(), &top)
	for _, k := range []string{"episodes", "native_sr", "native_sr_denominator", "unknown_outcome_episodes", "statuses", "mean_calls",
		"mean_stateful_calls", "mean_env_steps", "mean_turns", "mean_wall_time_s", "mean_input_tokens", "mean_output_tokens"} {
		if _, ok := top[k]; !ok {
			t.Errorf("summarize --json lacks the original's key %q", k)
		}
	}
	for _, col := range []string{"system", "task", "seed", "ok", "status", "turns", "calls", "steps", "wall_s", "in_tok", "cached", "out_tok", "cost"} {
		if _, ok := sum.Rows[0][col]; !ok {
			t.Errorf("summarize --json row lacks %q", col)
		}
	}
	if !strings.Contains(stderr.String(), "broken") || !strings.Contains(stderr.String(), "nope") {
		t.Errorf("bad folders not named: %s", stderr.String())
	}
	stdout.Reset()
	if code := cmdCompare(context.Background(), []string{out, out}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "jointly solved 1") {
		t.Errorf("compare exit %d: %s", code, stdout.String())
	}
	if code := cmdCompare(context.Background(), []string{out}, &stdout, &stderr); code != exitUsage {
		t.Errorf("compare with one path: exit %d, want %d (usage)", code, exitUsage)
	}
	if code := cmdSummarize(context.Background(), nil, &stdout, &stderr); code != exitUsage {
		t.Errorf("summarize without paths: exit %d, want %d (usage)", code, exitUsage)
	}
}

// TestPlayOpenAIFlags checks that the openai flags reach the wire through the production client.
func TestPlayOpenAIFlags(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	srv := openaitest.New(
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "python", Arguments: `{"code": "robo.state()"}`}}}},
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "finish", Arguments: `{"status": "failure", "summary": "flags"}`}}}},
	)
	defer srv.Close()
	t.Setenv("PYRUALEAN_TEST_KEY", "sk-test")
	out := filepath.Join(t.TempDir(), "run")
	var stdout, stderr bytes.Buffer
	code := cmdPlay(context.Background(), []string{"--base-url", srv.BaseURL(), "--api-key-env", "PYRUALEAN_TEST_KEY", "--model", "m1",
		"--openai-max-tokens", "64", "--openai-tool-choice", "required", "--openai-temperature", "0",
		"--openai-extra-body", `{"top_p": 0.5, "chat_template_kwargs": {"enable_thinking": false}}`,
		"--task", "stack_blocks", "--out", out, "--feedback", "pure", "--price-input", "2", "--price-output", "8"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("play exit %d: %s", code, stderr.String())
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	b := reqs[0].Body
	for k, want := range map[string]string{"model": "m1", "tool_choice": "required", "max_tokens": "64", "temperature": "0", "top_p": "0.5"} {
		if got := strings.Trim(string(mustJSON(b[k])), `"`); got != want {
			t.Errorf("%s on the wire = %s, want %s", k, got, want)
		}
	}
	res, err := readResult(out)
	if err != nil || res.CostUSD == nil || *res.CostUSD <= 0 || res.Model != "m1" {
		t.Errorf("result cost %v model %q (%v)", res.CostUSD, res.Model, err)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestPlayCancelled: a play whose context ends (SIGINT/SIGTERM) leaves an interrupted result.
func TestPlayCancelled(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := openaitest.New(
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "python", Arguments: `{"code": "a = 1"}`}}}},
		openaitest.Step{Func: func(openaitest.Request) openaitest.Reply {
			cancel()
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "python", Arguments: `{"code": "b = 2"}`}}}
		}},
	)
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "run")
	var stdout, stderr bytes.Buffer
	code := cmdPlay(ctx, []string{"--base-url", srv.BaseURL(), "--model", "scripted", "--task", "stack_blocks", "--out", out}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	res, err := readResult(out)
	if err != nil || res.Status != agent.StatusInterrupted || res.ToolTurns != 1 {
		t.Fatalf("result %+v (%v)", res, err)
	}
}

// TestPlaySIGKILL: a play killed outright leaves result.json "running" with a dead pid, which
// summarize reports as interrupted, with every finished turn on disk.
func TestPlaySIGKILL(t *testing.T) {
	if raw := os.Getenv("PYRUALEAN_AGENT_PLAY_CHILD"); raw != "" {
		var args []string
		json.Unmarshal([]byte(raw), &args)
		os.Exit(run(context.Background(), args, os.Stdout, os.Stderr))
	}
	nbtest.Heavy(t, heavyEpisode)
	srv := openaitest.New(
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "python", Arguments: `{"code": "print('first')"}`}}}},
		openaitest.Step{Delay: time.Minute}, // the model "thinks" until play is killed
	)
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "run")
	args, _ := json.Marshal([]string{"play", "--base-url", srv.BaseURL(), "--model", "scripted", "--task", "stack_blocks", "--out", out})
	cmd := exec.Command(os.Args[0], "-test.run=^TestPlaySIGKILL$")
	cmd.Env = append(os.Environ(), "PYRUALEAN_AGENT_PLAY_CHILD="+string(args))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	var res *agent.Result
	for time.Now().Before(deadline) {
		if r, err := readResult(out); err == nil && r.ToolTurns == 1 && len(srv.Requests()) == 2 {
			res = r
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if res == nil {
		t.Fatalf("play never finished its first cell; stderr:\n%s", stderr.String())
	}
	// End the orphaned kernel (its own process group), after checking the pid is still that kernel:
	// its environment names this run's workspace.
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", res.KernelPID))
	if res.KernelPID > 0 && bytes.Contains(env, []byte("PYRUALEAN_WORKSPACE="+filepath.Join(out, "workspace")+"\x00")) {
		syscall.Kill(-res.KernelPID, syscall.SIGKILL)
	}
	rows, errs := runs.LoadRuns([]string{out})
	if len(errs) != 0 || len(rows) != 1 || rows[0].Status != agent.StatusInterrupted || rows[0].Turns != 1 || rows[0].LLMCalls != 1 {
		t.Fatalf("rows %+v errs %v", rows, errs)
	}
	// Reading never writes (issue 20): result.json still says running; summarize reports interrupted.
	if r, err := readResult(out); err != nil || r.Status != agent.StatusRunning {
		t.Errorf("result.json after LoadRuns: %v (%v), want it left as running", r.Status, err)
	}
	b, _ := os.ReadFile(filepath.Join(out, "turns.jsonl"))
	if strings.Count(string(b), "\n") != 1 {
		t.Errorf("turns.jsonl: %q", b)
	}
}

// TestPlayResponsesOnlyModel: go-openai refuses chat tool calls for models that need the Responses
// API; play says so at once instead of retrying.
func TestPlayResponsesOnlyModel(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	srv := openaitest.New()
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "run")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := cmdPlay(context.Background(), []string{"--base-url", srv.BaseURL(), "--model", "gpt-6-astra", "--task", "stack_blocks", "--out", out}, &stdout, &stderr)
	res, err := readResult(out)
	if code != 1 || err != nil || res.Status != agent.StatusPlannerError || res.PlannerAttempts != 1 || len(srv.Requests()) != 0 {
		t.Fatalf("exit %d status %v attempts %v requests %d (%v)", code, res.Status, res.PlannerAttempts, len(srv.Requests()), err)
	}
	if !strings.Contains(res.Error.Message, "Responses API") || time.Since(start) > 20*time.Second {
		t.Errorf("error %q after %v", res.Error.Message, time.Since(start))
	}
}

func TestLiveSpecName(t *testing.T) {
	for id, want := range map[string]string{"run": "pyrualean-episode-run", "Run 7/Cells": "pyrualean-episode-run-7-cells",
		"a_b.c-d": "pyrualean-episode-a_b.c-d"} {
		if got := liveSpecName(id); got != want {
			t.Errorf("liveSpecName(%q) = %q, want %q", id, got, want)
		}
	}
}

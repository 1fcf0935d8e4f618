package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// stackProgram solves tabletop stack_blocks inside run(robo).
const stackProgram = `def run(robo):
    grasp = robo.pick("red_block")
    assert grasp.success, grasp
    base = robo.segment("blue block")
    x, y, top = base.top_xyz
    robo.move_to([x, y, top + 0.10])
    robo.move_to([x, y, top + 0.025], step_clip=0.01)
    robo.release()
    for _ in range(5):
        robo.move_to([x, y, top + 0.12])
`

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func parseRunLine(t *testing.T, stdout string) runLine {
	t.Helper()
	var r runLine
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &r) != nil {
		t.Fatalf("stdout is not one JSON line: %q", stdout)
	}
	return r
}

// checkSolvedRun: the program solved the task, its run folder is a normal one.
func checkSolvedRun(t *testing.T, r runLine, out string) {
	t.Helper()
	if r.Status != "completed" || r.Reason != "finished" || r.EnvironmentSuccess == nil || !*r.EnvironmentSuccess ||
		r.Calls == 0 || r.EnvSteps == 0 || r.RunDir != out {
		t.Fatalf("run line %+v", r)
	}
	res, err := readResult(out)
	if err != nil || res.Arm != "program" || res.ToolTurns != 1 || res.MaxTurns != nil && *res.MaxTurns != 0 {
		t.Fatalf("result.json %+v (%v)", res, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "workspace", "program_01.py")); err != nil || !strings.Contains(string(b), "def run(robo)") {
		t.Errorf("workspace/program_01.py: %v %q", err, b)
	}
	prompt, _ := os.ReadFile(filepath.Join(out, "prompt.txt"))
	if !strings.Contains(string(prompt), "EXACTLY ONCE") {
		t.Errorf("prompt.txt is not the single-program one")
	}
	nbtest.Validate(t, filepath.Join(out, "trace.ipynb"))
}

func TestCmdRunPolicy(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.py")
	if err := os.WriteFile(policy, []byte(stackProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{
		{"run", "--task", "stack_blocks"},                               // no --policy
		{"run", "--policy", filepath.Join(dir, "nope.py")},              // unreadable
		{"run", "--policy", policy, "--arm", "tools"},                   // run is the program arm
		{"run", "--policy", policy, "--max-programs", "2"},              // one program
		{"run", "--policy", policy, "--images", "always"},               // play's checks apply
		{"prompt", "--max-programs", "1"},                               // needs --arm program
		{"card", "--out", dir},                                          // scratch folder only
		{"generate", "--base-url", "ftp://x", "--task", "stack_blocks"}, // not http
	} {
		if code, stdout, stderr := runCLI(t, bad...); code != exitUsage || stdout != "" || !strings.Contains(stderr, "pyrualean "+bad[0]+":") && !strings.Contains(stderr, "flag") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error", bad, code, stdout, stderr)
		}
	}
	nbtest.Heavy(t, heavyEpisode)
	out := filepath.Join(dir, "run")
	code, stdout, stderr := runCLI(t, "run", "--policy", policy, "--task", "stack_blocks", "--out", out)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	checkSolvedRun(t, parseRunLine(t, stdout), out)

	// A program that raises still runs and reports its ending (exit 0: the program ran).
	if err := os.WriteFile(policy, []byte("def run(robo):\n    raise ValueError('no plan')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, "run", "--policy", policy, "--task", "stack_blocks", "--out", filepath.Join(dir, "run2"))
	if r := parseRunLine(t, stdout); code != 0 || r.Reason != "error" || r.EnvironmentSuccess != nil && *r.EnvironmentSuccess {
		t.Fatalf("failing program: exit %d %+v\n%s", code, r, stderr)
	}
}

// TestCmdGenerate: one LLM call through the production client to the scripted server; the largest
// fenced python block of the reply becomes policy.py and runs.
func TestCmdGenerate(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	reply := "Here is a first idea:\n```python\ndef run(robo):\n    pass\n```\nand the real one:\n```python\n" + stackProgram + "```\n" +
		"```json\n{\"not\": \"python, and longer than anything else in this reply, which it must not be taken for at all\"}\n```\n"
	srv := openaitest.New(openaitest.Step{Reply: openaitest.Reply{Content: reply}})
	defer srv.Close()
	t.Setenv("PYRUALEAN_TEST_KEY", "sk-test")
	out := filepath.Join(t.TempDir(), "gen")
	code, stdout, stderr := runCLI(t, "generate", "--base-url", srv.BaseURL(), "--api-key-env", "PYRUALEAN_TEST_KEY", "--model", "m1",
		"--task", "stack_blocks", "--out", out)
	if code != 0 {
		t.Fatalf("generate: exit %d\n%s", code, stderr)
	}
	r := parseRunLine(t, stdout)
	checkSolvedRun(t, r, out)
	if b, err := os.ReadFile(filepath.Join(out, "policy.py")); err != nil || string(b) != stackProgram || r.Policy != filepath.Join(out, "policy.py") {
		t.Errorf("policy.py %q (%v), line %+v", b, err, r)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d LLM calls, want 1", len(reqs))
	}
	if _, hasTools := reqs[0].Body["tools"]; hasTools || !strings.Contains(string(reqs[0].Raw), "single-shot") {
		t.Errorf("the request is not the single-shot one: %.300s", reqs[0].Raw)
	}
	if res, _ := readResult(out); res == nil || res.Generation.Turns != 1 || res.Generation.InputTokens == 0 || res.Model != "m1" {
		t.Errorf("accounting: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "turns.jsonl")); strings.Count(string(b), "\n") != 1 {
		t.Errorf("turns.jsonl: %q", b)
	}
}

// TestCmdPromptCard: prompt and card print what the agent would get, with no model.
func TestCmdPromptCard(t *testing.T) {
	nbtest.Heavy(t, "the robot's simulator (prompt and card boot it)")
	// A play command line, model and runtime flags included, previews as it is.
	code, stdout, stderr := runCLI(t, "prompt", "--arm", "program", "--max-programs", "1", "--task", "stack_blocks",
		"--runtime", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--openai-max-tokens", "8")
	if code != 0 || !strings.Contains(stdout, "EXACTLY ONCE") || !strings.Contains(stdout, "# API reference") || !strings.Contains(stdout, "stack") {
		t.Fatalf("prompt: exit %d\n%.800s\n%s", code, stdout, stderr)
	}
	code, cells, stderr := runCLI(t, "prompt", "--task", "stack_blocks", "--runtime", "openai")
	if code != 0 || !strings.Contains(cells, "ONE tool, `python(code)`") {
		t.Fatalf("prompt (cells): exit %d\n%.500s\n%s", code, cells, stderr)
	}
	// No runtime named: the one play would choose (the embedded model), so its compact prompt.
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("PYRUALEAN_RUNTIME", "")
	code, compact, stderr := runCLI(t, "prompt", "--task", "stack_blocks")
	if code != 0 || !strings.Contains(compact, "Call the tool `python(code)`") {
		t.Fatalf("prompt (compact): exit %d\n%.500s\n%s", code, compact, stderr)
	}
	code, stdout, stderr = runCLI(t, "card", "--task", "stack_blocks", "--seed", "3")
	var card map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &card) != nil {
		t.Fatalf("card: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if card["task"] != "stack_blocks" || card["task_language"] == nil || card["seed"] != 3.0 {
		t.Errorf("card: %v", card)
	}
}

// TestPlayProgramArm: play --arm program drives the program arm through the OpenAI runtime like any
// arm (the tools offered, the single-program budget, finish), and its trace replays in that arm.
func TestPlayProgramArm(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	code, _ := json.Marshal(map[string]string{"code": stackProgram})
	srv := openaitest.New(
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "run_program", Arguments: string(code)}}}},
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "run_program", Arguments: `{"code": "def run(robo):\n    pass\n"}`}}}},
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "finish", Arguments: `{"status": "success", "summary": "stacked"}`}}}},
	)
	defer srv.Close()
	t.Setenv("PYRUALEAN_TEST_KEY", "sk-test")
	out := filepath.Join(t.TempDir(), "run")
	rc, stdout, stderr := runCLI(t, "play", "--arm", "program", "--max-programs", "1", "--base-url", srv.BaseURL(), "--api-key-env", "PYRUALEAN_TEST_KEY",
		"--model", "m1", "--task", "stack_blocks", "--out", out)
	if rc != 0 {
		t.Fatalf("play: exit %d\n%s", rc, stderr)
	}
	var line playLine
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &line); err != nil || line.Arm != "program" || line.Status != "completed" ||
		line.EnvironmentSuccess == nil || !*line.EnvironmentSuccess || line.ToolTurns != 3 {
		t.Fatalf("play line %q (%v)", stdout, err)
	}
	reqs := srv.Requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var tools []string
	for _, tl := range reqs[0].Body["tools"].([]any) {
		tools = append(tools, tl.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	if strings.Join(tools, ",") != "run_program,finish" {
		t.Errorf("tools offered: %v", tools)
	}
	// The second program was refused: the model read the budget error.
	if msgs := reqs[2].Messages(); !strings.Contains(mustString(msgs[len(msgs)-1]["content"]), "program budget exhausted (1)") {
		t.Errorf("second program's result: %v", msgs[len(msgs)-1])
	}
	// The trace replays in the program arm with no model.
	out2 := filepath.Join(t.TempDir(), "replayed")
	rc, stdout, stderr = runCLI(t, "play", "--arm", "program", "--runtime", "replay", "--from", filepath.Join(out, "trace.ipynb"), "--task", "stack_blocks", "--out", out2)
	if rc != 0 || !strings.Contains(stdout, `"environment_success":true`) {
		t.Fatalf("replay in the program arm: exit %d\n%s\n%s", rc, stdout, stderr)
	}
}

func mustString(v any) string {
	s, _ := v.(string)
	return s
}

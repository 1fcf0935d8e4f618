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
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/robotapi"
)

// Reference cells for tabletop stack_blocks (robotapi/solutions/tabletop/stack_blocks.py).
const (
	parityPick  = "grasp = robo.pick(\"red_block\")\nassert grasp.success, grasp\n"
	parityPlace = "base = robo.segment(\"blue block\")\nx, y, top = base.top_xyz\nrobo.move_to([x, y, top + 0.10])\n" +
		"robo.move_to([x, y, top + 0.025], step_clip=0.01)\nrobo.release()\n"
)

func pyStep(code string) openaitest.Step {
	b, _ := json.Marshal(map[string]string{"code": code})
	return openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "python", Arguments: string(b)}}}}
}

func finishStep(args string) openaitest.Step {
	return openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "finish", Arguments: args}}}}
}

// toolReply is the text of the newest tool message in a request (a tool call's result, as the model saw it).
func toolReply(t *testing.T, r openaitest.Request) string {
	t.Helper()
	msgs := r.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i]["role"] == "tool" {
			s, _ := msgs[i]["content"].(string)
			return s
		}
	}
	t.Fatalf("request without a tool message")
	return ""
}

// cellFeedback decodes a python call's feedback (the JSON before any image note).
func cellFeedback(t *testing.T, text string) map[string]any {
	t.Helper()
	var fb map[string]any
	if err := json.Unmarshal([]byte(strings.Split(text, "\n[")[0]), &fb); err != nil {
		t.Fatalf("feedback %q: %v", text, err)
	}
	return fb
}

// TestPlaySeedParityEpisodes runs seed-parity cases through the real CLI (play with the openai runtime
// against the scripted endpoint), one episode each:
//   - issue 14 #1: the workspace is <out>/workspace whether --out is the default (relative, runs/...),
//     relative or absolute: the agent writes a file, imports a helper module it wrote in an earlier
//     cell, and reads its guides;
//   - #2: a planner failing after the task predicate fired leaves a success (exit 0, PlannerError kept);
//   - #14: a motion after the predicate fired says episode_finished, and finish still follows (counted);
//   - #4: an episode error exits 2, as the original's;
//   - issue 20 #4: malformed finish arguments go back to the model as errors, like bad python arguments.
func TestPlaySeedParityEpisodes(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYRUALEAN_ROOT", root) // the tests run away from the repository
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("PYRUALEAN_RUNTIME", "")
	workspaceSteps := func() []openaitest.Step {
		return []openaitest.Step{
			pyStep("open('notes.txt', 'w').write('hi')\nopen('helper.py', 'w').write('def answer():\\n    return 42\\n')"),
			pyStep("import helper\nprint(helper.answer(), open('notes.txt').read(), len(open('guides/hybrid_guide.md').read()) > 0)"),
			finishStep(`{"status": "failure", "summary": "checked the workspace"}`),
		}
	}
	checkWorkspace := func(t *testing.T, srv *openaitest.Server, runDir string) {
		fb := cellFeedback(t, toolReply(t, srv.Requests()[2]))
		if fb["stdout"] != "42 hi True\n" || fb["exception"] != nil {
			t.Errorf("cell feedback %v, want stdout \"42 hi True\" and no exception", fb)
		}
		ws := filepath.Join(runDir, "workspace")
		for _, f := range []string{"notes.txt", "helper.py", "guides/hybrid_guide.md"} {
			if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
				t.Errorf("workspace lacks %s: %v", f, err)
			}
		}
		if _, err := os.Stat(filepath.Join(ws, "runs")); err == nil {
			t.Errorf("the workspace nests a second run folder under %s", ws)
		}
	}
	cases := []struct {
		name  string
		out   func(dir string) string // "" = play's default
		steps []openaitest.Step
		code  int
		check func(t *testing.T, srv *openaitest.Server, res *agent.Result, runDir string)
	}{
		{"workspace under the default --out", func(string) string { return "" }, workspaceSteps(), 0,
			func(t *testing.T, srv *openaitest.Server, res *agent.Result, runDir string) {
				checkWorkspace(t, srv, runDir)
			}},
		{"workspace under a relative --out", func(string) string { return filepath.Join("runs", "ep") }, workspaceSteps(), 0,
			func(t *testing.T, srv *openaitest.Server, res *agent.Result, runDir string) {
				checkWorkspace(t, srv, runDir)
			}},
		{"workspace under an absolute --out", func(dir string) string { return filepath.Join(dir, "abs", "ep") }, workspaceSteps(), 0,
			func(t *testing.T, srv *openaitest.Server, res *agent.Result, runDir string) {
				checkWorkspace(t, srv, runDir)
			}},
		// After the two cells the script is exhausted: the endpoint answers 400, a planner error.
		{"planner error after success", nil, []openaitest.Step{pyStep(parityPick), pyStep(parityPlace)}, 0,
			func(t *testing.T, srv *openaitest.Server, res *agent.Result, runDir string) {
				if res.EnvironmentSuccess == nil || !*res.EnvironmentSuccess || res.Status != agent.StatusCompleted || res.Reason != "terminated" ||
					res.Error == nil || res.Error.Type != "PlannerError" {
					t.Errorf("success %v status %s reason %s error %+v; want a success, completed/terminated, the PlannerError kept",
						res.EnvironmentSuccess, res.Status, res.Reason, res.Error)
				}
			}},
		{"finish after episode_finished", nil, []openaitest.Step{pyStep(parityPick),
			pyStep(parityPlace + "robo.move_to([0.5, 0.0, 0.3])\nprint('not reached')\n"),
			finishStep(`{"status": "success", "summary": "stacked"}`)}, 0,
			func(t *testing.T, srv *openaitest.Server, res *agent.Result, runDir string) {
				reqs := srv.Requests()
				if len(reqs) != 3 {
					t.Fatalf("%d requests, want 3: the model calls finish after episode_finished", len(reqs))
				}
				if fb := cellFeedback(t, toolReply(t, reqs[2])); fb["episode_finished"] != "terminated" || strings.Contains(fb["stdout"].(string), "not reached") {
					t.Errorf("feedback %v, want episode_finished terminated", fb)
				}
				if res.Finish == nil || res.Finish.Status != "success" || !res.Finish.EnvironmentTerminated || res.AfterSuccess == nil || res.AfterSuccess.LLMCalls != 1 {
					t.Errorf("finish %+v after_success %+v", res.Finish, res.AfterSuccess)
				}
			}},
		{"malformed finish goes back to the model", nil, []openaitest.Step{
			finishStep(`{"status": "maybe", "summary": 1}`), finishStep(`{"status": "success"}`), finishStep(`{"status": "stuck", "summary": "no"`),
			pyStep("print('still running')"), finishStep(`{"status": "failure", "summary": "gave up"}`)}, 0,
			func(t *testing.T, srv *openaitest.Server, res *agent.Result, runDir string) {
				reqs := srv.Requests()
				if len(reqs) != 5 {
					t.Fatalf("%d requests, want 5 (every malformed finish answered)", len(reqs))
				}
				for i, want := range []string{"malformed arguments for finish", "malformed arguments for finish", "invalid JSON"} {
					if got := toolReply(t, reqs[i+1]); !strings.Contains(got, want) || !strings.Contains(got, `"error"`) {
						t.Errorf("reply %d = %s, want an error with %q", i+1, got, want)
					}
				}
				if res.Finish == nil || res.Finish.Status != "failure" || res.Finish.Summary != "gave up" || res.ToolTurns != 5 {
					t.Errorf("finish %+v tool turns %d, want the well-formed finish, every call counted (5)", res.Finish, res.ToolTurns)
				}
			}},
		// #4: an episode error exits 2, as the original (usage errors stay 64): a cell that swallows the
		// interrupt forces a kernel restart, which loses the robot.
		{"episode error exits 2", nil, []openaitest.Step{
			pyStep("import time\nwhile True:\n    try:\n        time.sleep(0.2)\n    except KeyboardInterrupt:\n        print('ignored', flush=True)"),
			finishStep(`{"status": "failure", "summary": "x"}`)}, exitEpisodeError,
			func(t *testing.T, srv *openaitest.Server, res *agent.Result, runDir string) {
				if res.Status != agent.StatusError || res.Error == nil || res.Error.Type != "KernelRestarted" {
					t.Errorf("status %s error %+v, want error / KernelRestarted", res.Status, res.Error)
				}
			}},
	}
	extraArgs := map[string][]string{"episode error exits 2": {"--cell-timeout-s", "2"}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			srv := openaitest.New(c.steps...)
			defer srv.Close()
			args := []string{"--base-url", srv.BaseURL(), "--model", "scripted", "--task", "stack_blocks", "--guides", "--images", "none"}
			out := filepath.Join(dir, "run")
			if c.out != nil {
				out = c.out(dir)
			}
			if out != "" {
				args = append(args, "--out", out)
			}
			args = append(args, extraArgs[c.name]...)
			var stdout, stderr bytes.Buffer
			code := cmdPlay(context.Background(), args, &stdout, &stderr)
			if code != c.code {
				t.Fatalf("play exit %d, want %d: %s", code, c.code, stderr.String())
			}
			runDir := filepath.Dir(playJSON(t, stdout.String()).Trace)
			if !filepath.IsAbs(runDir) {
				runDir = filepath.Join(dir, runDir)
			}
			res, err := readResult(runDir)
			if err != nil {
				t.Fatalf("result.json in %s: %v", runDir, err)
			}
			c.check(t, srv, res, runDir)
		})
	}
}

// TestPlayUnsealedSaysSo: where bubblewrap cannot run (here: not on PATH), play --sealed auto still plays,
// says EPISODE NOT SEALED on stderr, records sealed: false and why in result.json, and summarize shows it;
// --sealed on refuses to start (boot_error, exit 2, naming the cause).
func TestPlayUnsealedSaysSo(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	cells := filepath.Join(t.TempDir(), "cells.py")
	writeFile(t, cells, "# %%\nprint(robo.move_to([0.5, 0.0, 0.3]).reached)\n")
	t.Setenv("PATH", t.TempDir()) // no bwrap (the kernel and the robot server run by absolute paths)
	t.Setenv("PYRUALEAN_ROOT", root)
	out := filepath.Join(t.TempDir(), "auto")
	var stdout, stderr bytes.Buffer
	if code := cmdPlay(context.Background(), []string{"--runtime", "replay", "--from", cells, "--task", "stack_blocks", "--sealed", "auto",
		"--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("play --sealed auto: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "EPISODE NOT SEALED") {
		t.Errorf("stderr does not say the episode is not sealed:\n%s", stderr.String())
	}
	res, err := readResult(out)
	if err != nil || res.Sealed || res.Seal == nil || res.Seal.Sealed || !strings.Contains(res.Seal.Reason, "bwrap") || res.EnvSteps == 0 {
		t.Fatalf("result.json: sealed %v seal %+v steps %d (%v)", res.Sealed, res.Seal, res.EnvSteps, err)
	}
	var b []byte
	if b, err = os.ReadFile(filepath.Join(out, "result.json")); err != nil || !strings.Contains(string(b), `"sealed": false`) {
		t.Errorf("result.json lacks \"sealed\": false: %v", err)
	}
	stdout.Reset()
	if code := cmdSummarize(context.Background(), []string{out}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "sealed 0/1  (NOT SEALED: 1") {
		t.Errorf("summarize exit %d:\n%s", code, stdout.String())
	}
	stdout.Reset()
	var sum struct {
		Unsealed int `json:"unsealed"`
		Rows     []struct {
			Sealed bool `json:"sealed"`
		} `json:"rows"`
	}
	cmdSummarize(context.Background(), []string{"--json", out}, &stdout, &stderr)
	if json.Unmarshal(stdout.Bytes(), &sum) != nil || sum.Unsealed != 1 || len(sum.Rows) != 1 || sum.Rows[0].Sealed {
		t.Errorf("summarize --json: %s", stdout.String())
	}

	on := filepath.Join(t.TempDir(), "on")
	stderr.Reset()
	code := cmdPlay(context.Background(), []string{"--runtime", "replay", "--from", cells, "--task", "stack_blocks", "--sealed", "on", "--out", on}, &stdout, &stderr)
	r, err := readResult(on)
	if code != exitEpisodeError || err != nil || r.Status != agent.StatusBootError || r.Sealed || r.Error == nil || !strings.Contains(r.Error.Message, "bwrap") {
		t.Errorf("play --sealed on without bwrap: exit %d, result %+v (%v)\n%s", code, r, err, stderr.String())
	}
}

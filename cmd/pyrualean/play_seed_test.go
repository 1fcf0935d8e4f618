package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/agent/runs"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// TestPlaySeedFlags: the original's command line parses as the original means it. A suite implies its robot
// (asked of the robot package's registry), --task SUITE/INDEX is the same episode as --suite SUITE
// --task INDEX, and --libero-type pro / --sam3-endpoint are accepted and reach make().
func TestPlaySeedFlags(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("PYRUALEAN_RUNTIME", "")
	seed := []string{"--arm", "cells", "--suite", "libero_spatial_swap", "--task", "7", "--seed", "2", "--model", "gpt-6-astra",
		"--runtime", "openai", "--libero-type", "pro", "--sam3-endpoint", "http://127.0.0.1:9"}
	s, err := parsePlay(context.Background(), seed, io.Discard, time.Now())
	if err != nil {
		t.Fatalf("the original's command line: %v", err)
	}
	e := s.episode
	if e.Robot != "libero" || e.Suite != "libero_spatial_swap" || e.Task != "7" || e.Seed != 2 || e.RobotOptions["sam3_endpoint"] != "http://127.0.0.1:9" || s.episode.Policy.Runtime != "openai" {
		t.Fatalf("episode %+v runtime %s", e, s.episode.Policy.Runtime)
	}
	code := robotapi.SetupCode(robotapi.SetupOptions{Robot: e.Robot, Suite: e.Suite, Task: e.Task, Options: e.RobotOptions})
	if !strings.Contains(code, `sam3_endpoint="http://127.0.0.1:9"`) || !strings.Contains(code, `libero_type="pro"`) || !strings.Contains(code, `make("libero"`) {
		t.Errorf("setup cell %s", code)
	}
	slash, err := parsePlay(context.Background(), []string{"--task", "libero_spatial_swap/7", "--seed", "2", "--runtime", "openai"}, io.Discard, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if slash.episode.Robot != "libero" || runs.TaskKey(slash.episode.Suite, slash.episode.Task) != runs.TaskKey(e.Suite, e.Task) {
		t.Errorf("--task S/7: robot %s, key %s; --suite S --task 7: key %s", slash.episode.Robot,
			runs.TaskKey(slash.episode.Suite, slash.episode.Task), runs.TaskKey(e.Suite, e.Task))
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--suite", "no_such_suite", "--runtime", "openai"}, "--robot"},
		{[]string{"--libero-type", "pro", "--runtime", "openai"}, "robots that take it: libero"},
		{[]string{"--sam3-endpoint", "http://127.0.0.1:9", "--runtime", "openai"}, "robots that take it: libero"},
		{[]string{"--suite", "libero_goal", "--task", "libero_spatial_swap/7", "--runtime", "openai"}, "drop one"},
		{[]string{"--runtime", "replay"}, "--from"},
	} {
		var stdout, stderr bytes.Buffer
		if code := cmdPlay(context.Background(), c.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %q", c.args, code, stderr.String(), exitUsage, c.want)
		}
	}
}

// TestPlayEnvironmentSettings: the original's PYRUALEAN_* settings, and a bad one named as such.
func TestPlayEnvironmentSettings(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("PYRUALEAN_RUNTIME", "openai")
	t.Setenv("PYRUALEAN_PRIMITIVES", "no-vla")
	t.Setenv("PYRUALEAN_CODEX_HOME", "/tmp/my-codex-home")
	s, err := parsePlay(context.Background(), nil, io.Discard, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if s.episode.Policy.Runtime != "openai" || s.episode.Primitives != spec.PrimitivesNoVLA || runtimes.SettingsFor(s.episode, runtimes.Wiring{}).CodexHome != "/tmp/my-codex-home" {
		t.Errorf("runtime %s primitives %s codex home %s", s.episode.Policy.Runtime, s.episode.Primitives, runtimes.SettingsFor(s.episode, runtimes.Wiring{}).CodexHome)
	}
	if s, err := parsePlay(context.Background(), []string{"--runtime", "local", "--primitives", "full"}, io.Discard, time.Now()); err != nil || s.episode.Policy.Runtime != "local" || s.episode.Primitives != "full" {
		t.Errorf("flags over the environment: %+v %v", s, err)
	}
	for env, want := range map[string]string{"PYRUALEAN_RUNTIME": "$PYRUALEAN_RUNTIME", "PYRUALEAN_PRIMITIVES": "$PYRUALEAN_PRIMITIVES"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "bogus")
			var stdout, stderr bytes.Buffer
			if code := cmdPlay(context.Background(), nil, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), want) {
				t.Errorf("exit %d, stderr %q", code, stderr.String())
			}
		})
	}
}

// TestPlayCodexSeedDefaults: Codex runs with the original's reasoning effort (xhigh) unless --reasoning
// says otherwise, recorded in result.json; other runtimes send none unless asked.
func TestPlayCodexSeedDefaults(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "test-key") // the CLI runtimes refuse to start without their key
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("PYRUALEAN_RUNTIME", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--runtime", "codex"}, "xhigh"},
		{[]string{"--runtime", "codex", "--reasoning", "high"}, "high"},
		{[]string{"--runtime", "claude"}, ""},
		{[]string{"--runtime", "openai"}, ""},
	} {
		s, err := parsePlay(context.Background(), c.args, io.Discard, time.Now())
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if runtimes.SettingsFor(s.episode, runtimes.Wiring{}).Reasoning != c.want || s.episode.Policy.Reasoning != c.want {
			t.Errorf("%v: reasoning sent %q, recorded %q; want %q", c.args, runtimes.SettingsFor(s.episode, runtimes.Wiring{}).Reasoning, s.episode.Policy.Reasoning, c.want)
		}
	}
}

// TestPlaySeedCommandRuns runs the original's LIBERO command line for real, up to the model: LIBERO boots
// in the kernel (a suite implies its robot). The original's model speaks only the Responses API, so the
// openai runtime ends with a planner_error naming the fix (--runtime codex); a chat model answers.
// The answered run moves the arm with --images on-motion: the feedback attaches the original's on-motion
// images (agentview_high.png and wrist_high.png at 1024 px, issue 14 #12), and without --sam3-endpoint
// the episode records its privileged perception (perception: simulator-masks in card.json,
// result.json and summarize, #13).
func TestPlaySeedCommandRuns(t *testing.T) {
	nbtest.Heavy(t, "LIBERO episodes")
	srv := openaitest.New(
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "python",
			Arguments: `{"code": "s = robo.state()\nrobo.move_to([s.eef_pos[0], s.eef_pos[1], s.eef_pos[2] + 0.02])"}`}}}},
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "finish", Arguments: `{"status": "failure", "summary": "seed command"}`}}}})
	defer srv.Close()
	for _, c := range []struct {
		model, status string
		code          int
	}{
		{"gpt-6-astra", agent.StatusPlannerError, exitFailed},
		{"scripted", agent.StatusCompleted, 0},
	} {
		out := filepath.Join(t.TempDir(), "run")
		var stdout, stderr bytes.Buffer
		code := cmdPlay(context.Background(), []string{"--arm", "cells", "--suite", "libero_spatial_swap", "--task", "7", "--seed", "2",
			"--model", c.model, "--libero-type", "pro", "--base-url", srv.BaseURL(), "--images", "on-motion", "--out", out}, &stdout, &stderr)
		res, err := readResult(out)
		if err != nil {
			t.Fatalf("exit %d, no result.json (%v): %s", code, err, stderr.String())
		}
		if res.Status == agent.StatusBootError {
			if code != exitEpisodeError {
				t.Errorf("boot_error exit %d, want %d", code, exitEpisodeError)
			}
			t.Skipf("LIBERO does not boot here: %+v", res.Error)
		}
		if code != c.code || res.Robot != "libero" || res.Suite != "libero_spatial_swap" || res.Task != "7" || res.Seed != 2 || res.Status != c.status {
			t.Fatalf("%s: exit %d, result robot %s suite %s task %s seed %d status %s (%+v): %s", c.model, code, res.Robot, res.Suite, res.Task, res.Seed, res.Status, res.Error, stderr.String())
		}
		if c.status == agent.StatusPlannerError && !strings.Contains(res.Error.Message, "--runtime codex") {
			t.Errorf("planner error does not name the fix: %s", res.Error.Message)
		}
		if b, err := os.ReadFile(filepath.Join(out, "trace.ipynb")); err != nil || !strings.Contains(string(b), `make(\"libero\"`) {
			t.Errorf("trace setup cell: %v", err)
		}
		// #13: no --sam3-endpoint, so segment() reads the simulator's masks; the run says so everywhere.
		var card struct {
			Facts map[string]any `json:"facts"`
		}
		if b, err := os.ReadFile(filepath.Join(out, "card.json")); err != nil || json.Unmarshal(b, &card) != nil || card.Facts["perception"] != "simulator-masks" {
			t.Errorf("card.json facts perception: %v (%v)", card.Facts["perception"], err)
		}
		if res.Perception != "simulator-masks" {
			t.Errorf("result.json perception %q, want simulator-masks", res.Perception)
		}
		var sum bytes.Buffer
		if cmdSummarize(context.Background(), []string{out}, &sum, io.Discard); !strings.Contains(sum.String(), "perception simulator-masks=1") {
			t.Errorf("summarize does not show the perception:\n%s", sum.String())
		}
	}
	// #12: the motion's feedback attaches the original's on-motion images at the original's resolution.
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	msgs := reqs[1].Messages()
	var toolText string
	var sizes []string
	for i, m := range msgs {
		if m["role"] != "tool" {
			continue
		}
		toolText, _ = m["content"].(string)
		sizes = nil
		if i+1 < len(msgs) && msgs[i+1]["role"] == "user" {
			parts, _ := msgs[i+1]["content"].([]any)
			for _, p := range parts {
				iu, _ := p.(map[string]any)["image_url"].(map[string]any) // text parts have none
				url, _ := iu["url"].(string)
				if b64, ok := strings.CutPrefix(url, "data:image/png;base64,"); ok {
					raw, _ := base64.StdEncoding.DecodeString(b64)
					if cfg, err := png.DecodeConfig(bytes.NewReader(raw)); err == nil {
						sizes = append(sizes, fmt.Sprintf("%dx%d", cfg.Width, cfg.Height))
					}
				}
			}
		}
	}
	var cell struct {
		Images    []string `json:"images"`
		Exception string   `json:"exception"`
	}
	json.Unmarshal([]byte(strings.Split(toolText, "\n[")[0]), &cell)
	if strings.Join(cell.Images, ",") != "agentview_high.png,wrist_high.png" || strings.Join(sizes, ",") != "1024x1024,1024x1024" {
		t.Errorf("on-motion images %v sizes %v (exception %q), want agentview_high.png and wrist_high.png at 1024x1024", cell.Images, sizes, cell.Exception)
	}
}

// TestPlayLiberoTypeRefused: --libero-type reaches make(); the LIBERO robot (the one home of what each
// type runs) refuses standard for a LIBERO-PRO suite, and the boot_error names the fix (exit 2, as the original).
func TestPlayLiberoTypeRefused(t *testing.T) {
	nbtest.Heavy(t, "a real IPython kernel (the robot refuses in it)")
	out := filepath.Join(t.TempDir(), "run")
	var stdout, stderr bytes.Buffer
	code := cmdPlay(context.Background(), []string{"--suite", "libero_spatial_swap", "--task", "7", "--libero-type", "standard",
		"--runtime", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", out}, &stdout, &stderr)
	res, err := readResult(out)
	if err != nil {
		t.Fatalf("exit %d, no result.json (%v): %s", code, err, stderr.String())
	}
	if code != exitEpisodeError || res.Status != agent.StatusBootError || res.Error == nil || !strings.Contains(res.Error.Message, "--libero-type pro") {
		t.Errorf("exit %d status %s error %+v", code, res.Status, res.Error)
	}
}

package agent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/notebooks"
)

// Malformed finish arguments go back to the model as an error, like bad python arguments; the
// episode goes on until a well-formed finish.
func TestMalformedFinishArguments(t *testing.T) {
	srv := openaitest.New(
		call(openaitest.ToolCall{Name: "finish", Arguments: `{"status": "maybe", "summary": 1}`}),
		call(openaitest.ToolCall{Name: "finish", Arguments: `{"status": "maybe", "summary": "x"}`}),
		call(openaitest.ToolCall{Name: "finish", Arguments: `{"status": "success"}`}),
		call(openaitest.ToolCall{Name: "finish", Arguments: `{"status": "stuck", "summary": "no"`}),
		call(py("print('still running')")),
		call(finish("failure", "gave up")),
	)
	defer srv.Close()
	cfg := episodeConfig(t, nil)
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
	if res.Status != agent.StatusCompleted || res.Finish == nil || res.Finish.Status != "failure" || res.Finish.Summary != "gave up" {
		t.Fatalf("status %s finish %+v, want completed with the well-formed finish", res.Status, res.Finish)
	}
	reqs := srv.Requests()
	if len(reqs) != 6 {
		t.Fatalf("requests %d, want 6 (every malformed finish answered)", len(reqs))
	}
	for i, want := range []string{"malformed arguments for finish", `is not one of success, failure, stuck`,
		"malformed arguments for finish", "invalid JSON"} {
		if got := lastToolText(t, reqs[i+1]); !strings.Contains(got, want) || !strings.Contains(got, `"error"`) {
			t.Errorf("reply %d = %s, want an error with %q", i+1, got, want)
		}
	}
	if res.ToolTurns != 6 {
		t.Errorf("tool_turns = %d, want 6 (every call, the refused finishes too, as the original)", res.ToolTurns)
	}
	finishes := 0
	for _, c := range readTrace(t, cfg.Out).Cells {
		if notebooks.CellMetaOf(c).Finish != nil {
			finishes++
		}
	}
	if finishes != 1 {
		t.Errorf("trace has %d finish cells, want 1", finishes)
	}
}

// The robot's workspace is <out>/workspace whether --out is relative or absolute: files the agent
// writes land there and the guides are readable.
func TestWorkspaceUnderRelativeAndAbsoluteOut(t *testing.T) {
	cases := []struct {
		name string
		out  func(dir string) string
	}{
		{"relative", func(string) string { return filepath.Join("runs", "ep") }},
		{"absolute", func(dir string) string { return filepath.Join(dir, "runs", "ep") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			code := "open('notes.txt', 'w').write('hi')\nprint(open('notes.txt').read(), len(open('guides/hybrid_guide.md').read()) > 0)"
			srv := openaitest.New(call(py(code)), call(finish("failure", "checked the workspace")))
			defer srv.Close()
			// Away from the repository: the robot's references are found through PYRUALEAN_ROOT.
			t.Setenv("PYRUALEAN_ROOT", root(t))
			t.Chdir(dir)
			cfg := episodeConfig(t, func(cfg *testEpisode) { cfg.Out = c.out(dir); cfg.Guides = true })
			res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
			var fb map[string]any
			if err := json.Unmarshal([]byte(strings.Split(lastToolText(t, srv.Requests()[1]), "\n[")[0]), &fb); err != nil {
				t.Fatal(err)
			}
			if fb["stdout"] != "hi True\n" || fb["exception"] != nil {
				t.Errorf("cell feedback %v, want stdout \"hi True\" and no exception", fb)
			}
			ws := filepath.Join(dir, "runs", "ep", "workspace")
			if b, err := os.ReadFile(filepath.Join(ws, "notes.txt")); err != nil || string(b) != "hi" {
				t.Errorf("notes.txt in %s: %q %v", ws, b, err)
			}
			if _, err := os.Stat(filepath.Join(ws, "runs")); err == nil {
				t.Errorf("the workspace nests a second run folder under %s", ws)
			}
			if res.Status != agent.StatusCompleted {
				t.Errorf("status %s (%+v)", res.Status, res.Error)
			}
			st, err := os.Stat(filepath.Join(dir, "runs", "ep", "result.json"))
			if err != nil || st.Mode().Perm() != 0o644 {
				t.Errorf("result.json mode %v (%v), want 0644 like trace.ipynb", st.Mode().Perm(), err)
			}
			checkResultTypes(t, filepath.Join(dir, "runs", "ep", "result.json"))
		})
	}
}

// A planner that fails after the task predicate fired leaves a success: the environment's verdict
// decides, the error field says what else happened.
func TestPlannerErrorAfterSuccess(t *testing.T) {
	srv := openaitest.New(
		call(py(pickRed)),
		call(py(placeBlue)),
		openaitest.Step{Status: 500},
		openaitest.Step{Status: 500},
	)
	defer srv.Close()
	cfg := episodeConfig(t, nil)
	res, _ := playEpisode(t, cfg, openaiConfig(srv, func(c *runtimes.OpenAIConfig) { c.HTTPAttempts = 2 }), nil)
	if res.EnvironmentSuccess == nil || !*res.EnvironmentSuccess {
		t.Fatalf("environment_success %v, want true", res.EnvironmentSuccess)
	}
	if res.Status != agent.StatusCompleted || res.Reason != "terminated" || res.Error == nil || res.Error.Type != "PlannerError" {
		t.Errorf("status %s reason %s error %+v, want completed/terminated with the PlannerError kept", res.Status, res.Reason, res.Error)
	}
	if res.AfterSuccess == nil || res.AfterSuccess.LLMCalls != 1 {
		t.Errorf("after_success %+v, want the one failed LLM call", res.AfterSuccess)
	}
}

// A motion after the predicate fired mid-cell raises EpisodeFinished: the feedback says
// episode_finished, and the model still gets to call finish (its cost is counted).
func TestFinishAfterPredicateFiredMidCell(t *testing.T) {
	srv := openaitest.New(
		call(py(pickRed)),
		call(py(placeBlue+"robo.move_to([0.5, 0.0, 0.3])\nprint('not reached')\n")),
		call(finish("success", "stacked")),
	)
	defer srv.Close()
	cfg := episodeConfig(t, nil)
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("requests %d, want 3: the model calls finish after episode_finished", len(reqs))
	}
	var fb map[string]any
	if err := json.Unmarshal([]byte(strings.Split(lastToolText(t, reqs[2]), "\n[")[0]), &fb); err != nil {
		t.Fatal(err)
	}
	if fb["episode_finished"] != "terminated" || strings.Contains(fb["stdout"].(string), "not reached") {
		t.Errorf("feedback %v, want episode_finished terminated", fb)
	}
	if res.Status != agent.StatusCompleted || res.Finish == nil || res.Finish.Status != "success" || !res.Finish.EnvironmentTerminated {
		t.Errorf("status %s finish %+v", res.Status, res.Finish)
	}
	if res.EnvironmentSuccess == nil || !*res.EnvironmentSuccess {
		t.Errorf("environment_success %v", res.EnvironmentSuccess)
	}
	if res.AfterSuccess == nil || res.AfterSuccess.LLMCalls != 1 {
		t.Errorf("after_success %+v, want the finish call", res.AfterSuccess)
	}
}

// checkResultTypes reads result.json as the original's loader does (untyped JSON) and checks the types
// it expects: host an object, notes a list, guides a record with each file's sha256 (false without
// guides), max_programs present (null: no limit), max_episode_steps a number.
func checkResultTypes(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if h, ok := r["host"].(map[string]any); !ok || h["hostname"] == nil {
		t.Errorf("host: %#v, want an object with the hostname", r["host"])
	}
	if _, ok := r["notes"].([]any); !ok {
		t.Errorf("notes: %#v, want a list", r["notes"])
	}
	if g, ok := r["guides"].(map[string]any); !ok {
		t.Errorf("guides: %#v, want a record", r["guides"])
	} else if files, ok := g["files"].(map[string]any); !ok || len(files) == 0 || g["paper"] != false {
		t.Errorf("guides: %#v, want files and paper false", g)
	} else {
		for name, sum := range files {
			if s, _ := sum.(string); len(s) != 64 {
				t.Errorf("guides.files[%s] = %#v, want a sha256", name, sum)
			}
		}
	}
	if v, ok := r["max_programs"]; !ok || v != nil {
		t.Errorf("max_programs: %#v (present %v), want null for the cells arm", v, ok)
	}
	if n, ok := r["max_episode_steps"].(float64); !ok || n <= 0 {
		t.Errorf("max_episode_steps: %#v, want a number", r["max_episode_steps"])
	}
}

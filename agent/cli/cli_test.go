package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/cli"
	"github.com/pyrualean/pyrualean/agent/cli/scripted"
)

// These tests run the real CLIs (installed by scripts/setup.sh into agent/cli/node) against real
// episodes (a pyrualean kernel with the tabletop robot), with only the model scripted: a local server
// speaking the OpenAI Responses API (Codex) or the Anthropic Messages API (Claude Code).

// solutionCells reads the tabletop reference solution as code cells ("# %%" blocks, markdown skipped).
func solutionCells(t *testing.T, task string) []string {
	t.Helper()
	root, err := agent.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "robotapi", "solutions", "tabletop", task+".py"))
	if err != nil {
		t.Fatal(err)
	}
	var cells []string
	for _, block := range strings.Split("\n"+string(b), "\n# %%") {
		header, body, _ := strings.Cut(block, "\n")
		if strings.Contains(header, "[markdown]") || strings.TrimSpace(body) == "" {
			continue
		}
		cells = append(cells, strings.TrimSpace(body))
	}
	if len(cells) == 0 {
		t.Fatalf("no cells in the %s solution", task)
	}
	return cells
}

type outcome struct {
	res    *agent.Result
	runErr error
	model  *scripted.Server
	dir    string
	info   cli.Info
	wall   time.Duration
}

// play runs one episode with runtime against a scripted model.
func play(t *testing.T, runtime string, ecfg agent.EpisodeConfig, steps []scripted.Step, ccfg cli.Config) outcome {
	t.Helper()
	var model *scripted.Server
	if runtime == "codex" {
		model = scripted.NewResponses(steps)
		ccfg.BaseURL = model.URL + "/v1"
	} else {
		model = scripted.NewMessages(steps)
		ccfg.BaseURL = model.URL
	}
	defer model.Close()
	t.Setenv("PYRUALEAN_TEST_MODEL_KEY", "sk-scripted")
	ccfg.APIKeyEnv = "PYRUALEAN_TEST_MODEL_KEY"
	ccfg.Model = "scripted-model"
	ccfg.ReasoningEffort = "high"
	ccfg.PlannerRetryWait = time.Second
	ccfg.KillGrace = 3 * time.Second
	ccfg.FinishGrace = 20 * time.Second

	ecfg.Robot, ecfg.Task, ecfg.Runtime, ecfg.Model = "tabletop", "stack_blocks", runtime, ccfg.Model
	ecfg.Out = filepath.Join(t.TempDir(), runtime)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ep, err := agent.StartEpisode(ctx, ecfg)
	if err != nil {
		t.Fatalf("StartEpisode: %v", err)
	}
	start := time.Now()
	runErr := cli.Run(ctx, runtime, ep, ccfg)
	wall := time.Since(start)
	res, err := ep.Finish(ctx, "", runErr)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	o := outcome{res: res, runErr: runErr, model: model, dir: ecfg.Out, wall: wall}
	b, err := os.ReadFile(filepath.Join(o.dir, cli.CLIFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &o.info); err != nil {
		t.Fatal(err)
	}
	for _, r := range model.Requests() {
		t.Logf("model request %s step=%d results=%d", r.Path, r.Step, len(r.Results))
	}
	t.Logf("%s: %s in %s: status=%s reason=%s err=%v generation=%+v cli=%+v", runtime, ecfg.Task, wall.Round(time.Millisecond),
		res.Status, res.Reason, runErr, res.Generation, o.info)
	return o
}

func lastResults(m *scripted.Server) []scripted.ToolResult {
	reqs := m.ScriptedRequests()
	if len(reqs) == 0 {
		return nil
	}
	return reqs[len(reqs)-1].Results
}

var runtimes = []struct {
	name    string
	version string
	events  string
}{
	{"codex", "0.155.1", cli.CodexEvents},
	{"claude", "(Claude Code)", cli.ClaudeEvents},
}

func TestSolvedEpisode(t *testing.T) {
	cells := solutionCells(t, "stack_blocks")
	var steps []scripted.Step
	for _, c := range cells {
		steps = append(steps, scripted.Step{Tool: "python", Args: map[string]any{"code": c}})
	}
	steps = append(steps,
		scripted.Step{Tool: "finish", Args: map[string]any{"status": "success", "summary": "stacked"}},
		scripted.Step{Text: "The red block is on the blue block."})
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			o := play(t, rt.name, agent.EpisodeConfig{Arm: agent.ArmCells, MaxTurns: 10}, steps, cli.Config{})
			if o.runErr != nil {
				t.Fatalf("run: %v", o.runErr)
			}
			if o.res.Status != agent.StatusCompleted || o.res.EnvironmentSuccess == nil || !*o.res.EnvironmentSuccess {
				t.Errorf("status %s, success %v: want completed and solved", o.res.Status, o.res.EnvironmentSuccess)
			}
			if o.res.Finish == nil || o.res.Finish.Status != "success" {
				t.Errorf("finish = %+v", o.res.Finish)
			}
			// Every scripted reply is one model request; the usage the server reported is summed.
			n := len(steps)
			g := o.res.Generation
			if g.Turns != n || g.ToolCalls != n-1 {
				t.Errorf("turns %d tool calls %d, want %d and %d", g.Turns, g.ToolCalls, n, n-1)
			}
			if g.InputTokens != 1000*n || g.CachedInputTokens != 200*n || g.OutputTokens != 50*n {
				t.Errorf("tokens in %d cached %d out %d, want %d %d %d", g.InputTokens, g.CachedInputTokens, g.OutputTokens, 1000*n, 200*n, 50*n)
			}
			if rt.name == "codex" && g.ReasoningOutputTokens != 20*n {
				t.Errorf("reasoning tokens %d, want %d", g.ReasoningOutputTokens, 20*n)
			}
			// What reached the model: each cell's feedback, the robot's camera images after motion.
			results := lastResults(o.model)
			if len(results) != n-1 {
				t.Fatalf("the model saw %d tool results, want %d", len(results), n-1)
			}
			imgs := 0
			for i, r := range results {
				if r.IsError {
					t.Errorf("result %d is an error: %.300s", i, r.Text)
				}
				imgs += r.Images
			}
			if !strings.Contains(results[0].Text, `"cell": 1`) {
				t.Errorf("first result text: %.300s", results[0].Text)
			}
			if imgs == 0 {
				t.Error("no camera image reached the model")
			}
			if !strings.Contains(o.info.Version, rt.version) || o.info.ExitCode == nil || *o.info.ExitCode != 0 || o.info.ToolCalls != n-1 {
				t.Errorf("cli info %+v", o.info)
			}
			for _, f := range []string{rt.events, o.info.Stderr, cli.LastMessage, "trace.ipynb", "result.json"} {
				if st, err := os.Stat(filepath.Join(o.dir, f)); err != nil || (f == rt.events && st.Size() == 0) {
					t.Errorf("run folder file %s: %v", f, err)
				}
			}
		})
	}
}

func TestCallBudgetExhausted(t *testing.T) {
	steps := []scripted.Step{
		{Tool: "python", Args: map[string]any{"code": "print(robo.state())"}},
		{Tool: "python", Args: map[string]any{"code": "print('one more')"}},
		{Tool: "finish", Args: map[string]any{"status": "failure", "summary": "out of calls"}},
		{Text: "I ran out of calls."},
	}
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			o := play(t, rt.name, agent.EpisodeConfig{Arm: agent.ArmCells, MaxTurns: 1}, steps, cli.Config{MaxTurns: 1})
			if o.runErr != nil {
				t.Fatalf("run: %v", o.runErr)
			}
			if o.res.Status != agent.StatusCallBudget {
				t.Errorf("status %s, want %s", o.res.Status, agent.StatusCallBudget)
			}
			results := lastResults(o.model)
			if len(results) != 3 {
				t.Fatalf("the model saw %d tool results, want 3", len(results))
			}
			refused := results[1]
			if !strings.Contains(refused.Text, "budget exhausted") {
				t.Errorf("the refused call's result: %.300s", refused.Text)
			}
			if rt.name == "claude" && !refused.IsError {
				t.Error("the refused call was not flagged is_error")
			}
		})
	}
}

func TestTimeBudgetKill(t *testing.T) {
	steps := []scripted.Step{
		{Tool: "python", Args: map[string]any{"code": "import time\nfor i in range(600):\n    time.sleep(0.1)"}},
		{Tool: "finish", Args: map[string]any{"status": "failure", "summary": "never reached"}},
	}
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			budget := 8 * time.Second
			o := play(t, rt.name, agent.EpisodeConfig{Arm: agent.ArmCells, MaxTurns: 5}, steps, cli.Config{Budget: budget})
			if !errors.Is(o.runErr, agent.ErrBudgetExceeded) {
				t.Errorf("run error %v, want one wrapping agent.ErrBudgetExceeded", o.runErr)
			}
			if o.res.Status != agent.StatusTimeout {
				t.Errorf("status %s, want %s", o.res.Status, agent.StatusTimeout)
			}
			if o.info.Killed != "budget" {
				t.Errorf("cli info %+v: want killed=budget", o.info)
			}
			// The request that was answered is accounted for although the CLI never wrote a summary.
			if g := o.res.Generation; g.Turns != 1 || g.InputTokens != 1000 || g.OutputTokens != 50 {
				t.Errorf("generation %+v: want the one answered request", g)
			}
			if o.wall > budget+30*time.Second {
				t.Errorf("the run took %s with a budget of %s", o.wall, budget)
			}
		})
	}
}

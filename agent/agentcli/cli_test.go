package agentcli_test

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
	"github.com/pyrualean/pyrualean/agent/agentcli"
	"github.com/pyrualean/pyrualean/agent/agentcli/scripted"
	"github.com/pyrualean/pyrualean/spec"
	"github.com/pyrualean/pyrualean/spec/spectest"
)

// These tests run the real CLIs (installed by scripts/setup.sh into agent/agentcli/node) against real
// episodes (a pyrualean kernel with the tabletop robot), with only the model scripted: a local server
// speaking the OpenAI Responses API (Codex) or the Anthropic Messages API (Claude Code).

func TestMain(m *testing.M) {
	os.Setenv("PYRUALEAN_TEST_MODEL_KEY", "sk-scripted")
	os.Exit(m.Run())
}

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
	promptImages int
	res          *agent.Result
	runErr       error
	model        *scripted.Server
	dir          string
	info         agentcli.Info
	wall         time.Duration
}

// play runs one episode with runtime against a scripted model.
func play(t *testing.T, runtime string, mod func(*spec.Episode), steps []scripted.Step, ccfg agentcli.Config) outcome {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a CLI on a real episode (kernel, MuJoCo): not in the fast tier")
	}
	var model *scripted.Server
	base := ccfg.BaseURL // a test may point the CLI elsewhere
	if runtime == "codex" {
		model = scripted.NewResponses(steps)
		ccfg.BaseURL = model.URL + "/v1"
	} else {
		model = scripted.NewMessages(steps)
		ccfg.BaseURL = model.URL
	}
	if base != "" {
		ccfg.BaseURL = base
	}
	defer model.Close()
	ccfg.APIKeyEnv = "PYRUALEAN_TEST_MODEL_KEY" // set in TestMain (subtests run in parallel)
	ccfg.Model = "scripted-model"
	ccfg.ReasoningEffort = "high"
	ccfg.PlannerRetryWait = time.Second
	ccfg.KillGrace = 3 * time.Second
	if ccfg.FinishGrace == 0 {
		ccfg.FinishGrace = 20 * time.Second
	}

	ecfg := spectest.Tabletop(t, func(s *spec.Episode) {
		mod(s)
		s.Policy.Runtime, s.Policy.Model = runtime, ccfg.Model
		if s.Out == "" { // a test whose script names run-folder paths sets it
			s.Out = filepath.Join(t.TempDir(), runtime)
		}
		if keep := os.Getenv("PYRUALEAN_TEST_KEEP"); keep != "" { // keep run folders for debugging
			s.Out = filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_"))
			os.RemoveAll(s.Out)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ep, err := agent.StartEpisode(ctx, ecfg, agent.Host{})
	if err != nil {
		t.Fatalf("StartEpisode: %v", err)
	}
	promptImages := len(ep.Prompt().Images)
	start := time.Now()
	run := agentcli.RunCodex
	if runtime == "claude" {
		run = agentcli.RunClaude
	}
	runErr := run(ctx, ep, ccfg)
	wall := time.Since(start)
	res, err := ep.Finish(ctx, "", runErr)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	o := outcome{promptImages: promptImages, res: res, runErr: runErr, model: model, dir: ecfg.Out, wall: wall}
	b, err := os.ReadFile(filepath.Join(o.dir, agentcli.CLIFile))
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
	name      string
	version   string
	events    string
	imageMark string // how an image looks in a request body
}{
	{"codex", "0.155.1", agentcli.CodexEvents, `"type":"input_image"`},
	{"claude", "(Claude Code)", agentcli.ClaudeEvents, `"type":"image"`},
}

// harmless are CLI built-ins that cannot act outside the episode: Codex's MCP resource readers (we
// serve no resources) and its question tool (nobody answers in exec mode), Claude Code's placeholder.
var harmless = map[string]bool{"list_mcp_resources": true, "list_mcp_resource_templates": true,
	"read_mcp_resource": true, "request_user_input": true, "DeferredToolPlaceholder": true,
	// Claude Code's read-only tools, which the original gives it; confined to the workspace (TestClaudeReadsOnlyTheWorkspace)
	"Read": true, "Glob": true, "Grep": true}

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
			t.Parallel() // the CLIs mostly wait: run codex and claude side by side
			o := play(t, rt.name, func(s *spec.Episode) { s.Arm = spec.ArmCells; s.MaxCalls = 10 }, steps, agentcli.Config{})
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
			// Claude Code prices the run itself (total_cost_usd); Codex reports no cost.
			if rt.name == "claude" && (o.res.CostUSD == nil || *o.res.CostUSD <= 0 || o.info.CostUSD == nil) {
				t.Errorf("cost %v (cli %v): want Claude Code's total_cost_usd", o.res.CostUSD, o.info.CostUSD)
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
			// The model is offered our tools and nothing that acts outside the episode.
			first := o.model.ScriptedRequests()[0]
			for _, tool := range first.Tools {
				if !strings.HasPrefix(tool, "mcp__pyrualean") && !harmless[tool] {
					t.Errorf("the model is offered %q (all: %v)", tool, first.Tools)
				}
			}
			// The prompt's card images and the reasoning effort reach the model.
			if o.promptImages > 0 && !strings.Contains(string(first.Body), rt.imageMark) {
				t.Errorf("the first request lacks the %d prompt image(s)", o.promptImages)
			}
			if !strings.Contains(string(first.Body), `"effort":"high"`) {
				t.Error("the reasoning effort did not reach the model")
			}
			if !strings.Contains(o.info.Version, rt.version) || o.info.ExitCode == nil || *o.info.ExitCode != 0 || o.info.ToolCalls != n-1 {
				t.Errorf("cli info %+v", o.info)
			}
			for _, f := range []string{rt.events, o.info.Stderr, agentcli.LastMessage, "trace.ipynb", "result.json"} {
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
			t.Parallel() // the CLIs mostly wait: run codex and claude side by side
			o := play(t, rt.name, func(s *spec.Episode) { s.Arm = spec.ArmCells; s.MaxCalls = 1 }, steps, agentcli.Config{MaxTurns: 1})
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
			t.Parallel() // the CLIs mostly wait: run codex and claude side by side
			budget := 8 * time.Second
			o := play(t, rt.name, func(s *spec.Episode) { s.Arm = spec.ArmCells; s.MaxCalls = 5 }, steps, agentcli.Config{Budget: budget})
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

// TestPlannerFailures: a provider failure before the first tool call restarts the CLI (seed: the
// planner is retried); after a tool call it ends the episode as planner_error.
func TestPlannerFailures(t *testing.T) {
	tests := []struct {
		name     string
		steps    func() []scripted.Step // the CLIs retry nothing themselves (Retries -1)
		status   string
		attempts int
		turns    int // model requests, the failed one included
	}{
		{"retried before the first tool call", func() []scripted.Step {
			return []scripted.Step{
				{Fail: 500},
				{Tool: "python", Args: map[string]any{"code": "print('hello')"}},
				{Tool: "finish", Args: map[string]any{"status": "failure", "summary": "retried"}},
				{Text: "done"},
			}
		}, agent.StatusCompleted, 2, 4},
		{"planner error after a tool call", func() []scripted.Step {
			return []scripted.Step{
				{Tool: "python", Args: map[string]any{"code": "print('hello')"}},
				{Fail: 500},
			}
		}, agent.StatusPlannerError, 1, 2},
	}
	for _, rt := range runtimes {
		for _, tc := range tests {
			t.Run(rt.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				o := play(t, rt.name, func(s *spec.Episode) { s.Arm = spec.ArmCells; s.MaxCalls = 5 }, tc.steps(), agentcli.Config{Retries: -1})
				if o.res.Status != tc.status || o.res.PlannerAttempts != tc.attempts || o.info.Attempts != tc.attempts {
					t.Errorf("status %s, planner attempts %d (cli %d); want %s and %d", o.res.Status, o.res.PlannerAttempts, o.info.Attempts, tc.status, tc.attempts)
				}
				if g := o.res.Generation; g.Turns != tc.turns || g.Errors != 1 {
					t.Errorf("turns %d errors %d, want %d and 1", g.Turns, g.Errors, tc.turns)
				}
				if tc.status == agent.StatusPlannerError && !errors.Is(o.runErr, agent.ErrPlanner) {
					t.Errorf("run error %v, want one wrapping agent.ErrPlanner", o.runErr)
				}
			})
		}
	}
}

// TestCodexCancelledToolCall: Codex gives up on a call that outlasts its tool timeout. The cell still
// runs to the end and lands in the trace; the next call waits for it (calls are serialised) and sees
// its effect. (The runtime sets the tool timeout beyond the budget, so this only happens when forced.)
func TestCodexCancelledToolCall(t *testing.T) {
	steps := []scripted.Step{
		{Tool: "python", Args: map[string]any{"code": "import time\ntime.sleep(4.5)\nslow_cell_done = 'yes'"}},
		{Tool: "python", Args: map[string]any{"code": "print('slow cell done:', slow_cell_done)"}},
		{Tool: "finish", Args: map[string]any{"status": "failure", "summary": "checked"}},
		{Text: "done"},
	}
	o := play(t, "codex", func(s *spec.Episode) { s.Arm = spec.ArmCells; s.MaxCalls = 5 }, steps,
		agentcli.Config{ExtraArgs: []string{"-c", "mcp_servers.pyrualean.tool_timeout_sec=3"}})
	if o.runErr != nil || o.res.Status != agent.StatusCompleted {
		t.Fatalf("status %s, err %v", o.res.Status, o.runErr)
	}
	results := lastResults(o.model)
	if len(results) != 3 {
		t.Fatalf("the model saw %d tool results, want 3", len(results))
	}
	if strings.Contains(results[0].Text, "slow_cell_done") || !strings.Contains(strings.ToLower(results[0].Text), "time") {
		t.Errorf("the timed-out call's result: %.300s", results[0].Text)
	}
	if !strings.Contains(results[1].Text, "slow cell done: yes") {
		t.Errorf("the next call did not see the slow cell's effect: %.300s", results[1].Text)
	}
	if o.info.Cancelled != 1 {
		t.Errorf("cli info %+v: want one cancelled call", o.info)
	}
	trace, err := os.ReadFile(filepath.Join(o.dir, "trace.ipynb"))
	if err != nil || !strings.Contains(string(trace), "slow_cell_done = 'yes'") {
		t.Errorf("the slow cell is not in the trace (%v)", err)
	}
}

// TestToolsArm: the tools arm offers one MCP tool per primitive (no python) through both CLIs.
func TestToolsArm(t *testing.T) {
	steps := []scripted.Step{
		{Tool: "state", Args: map[string]any{}},
		{Tool: "show", Args: map[string]any{"camera": "agentview"}},
		{Tool: "finish", Args: map[string]any{"status": "failure", "summary": "looked around"}},
		{Text: "done"},
	}
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			t.Parallel() // the CLIs mostly wait: run codex and claude side by side
			o := play(t, rt.name, func(s *spec.Episode) { s.Arm = spec.ArmTools; s.Images = spec.ImagesOnDemand; s.MaxCalls = 5 }, steps, agentcli.Config{})
			if o.runErr != nil || o.res.Status != agent.StatusCompleted || o.res.Finish == nil {
				t.Fatalf("status %s finish %+v err %v", o.res.Status, o.res.Finish, o.runErr)
			}
			offered := strings.Join(o.model.ScriptedRequests()[0].Tools, " ")
			for _, want := range []string{"mcp__pyrualean__move_to", "mcp__pyrualean__pick", "mcp__pyrualean__finish"} {
				if !strings.Contains(offered, want) {
					t.Errorf("the model is not offered %s: %s", want, offered)
				}
			}
			if strings.Contains(offered, "mcp__pyrualean__python") {
				t.Error("the tools arm offers python")
			}
			results := lastResults(o.model)
			if len(results) != 3 || results[1].Images != 1 || results[0].IsError || !strings.Contains(results[0].Text, "eef") {
				t.Errorf("tool results %+v", results)
			}
		})
	}
}

// TestEndedAfterFinish: a CLI that keeps going after finish (here its model hangs) is ended after the
// grace period; the episode is complete.
func TestEndedAfterFinish(t *testing.T) {
	steps := []scripted.Step{
		{Tool: "finish", Args: map[string]any{"status": "failure", "summary": "giving up"}},
		{Text: "never arrives", Delay: 2 * time.Minute},
	}
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			t.Parallel() // the CLIs mostly wait: run codex and claude side by side
			o := play(t, rt.name, func(s *spec.Episode) { s.Arm = spec.ArmCells; s.MaxCalls = 5 }, steps, agentcli.Config{FinishGrace: 2 * time.Second})
			if o.runErr != nil || o.res.Status != agent.StatusCompleted || o.info.Killed != "after_finish" {
				t.Errorf("status %s err %v cli %+v: want completed, killed after_finish", o.res.Status, o.runErr, o.info)
			}
			if o.wall > time.Minute {
				t.Errorf("the run took %s", o.wall)
			}
		})
	}
}

// TestUnreachableModel: a model server that refuses connections fails every planner attempt; the
// episode ends as planner_error instead of hanging.
func TestUnreachableModel(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			t.Parallel() // the CLIs mostly wait: run codex and claude side by side
			o := play(t, rt.name, func(s *spec.Episode) { s.Arm = spec.ArmCells; s.MaxCalls = 5 }, nil,
				agentcli.Config{BaseURL: "http://127.0.0.1:1/v1", Retries: -1, PlannerAttempts: 2})
			if !errors.Is(o.runErr, agent.ErrPlanner) || o.res.Status != agent.StatusPlannerError || o.info.Attempts != 2 {
				t.Errorf("status %s err %v attempts %d: want planner_error after 2 attempts", o.res.Status, o.runErr, o.info.Attempts)
			}
			if o.wall > time.Minute {
				t.Errorf("the run took %s", o.wall)
			}
		})
	}
}

// TestClaudeReadsOnlyTheWorkspace: Claude Code has the original's Read, Glob and Grep, so it can read the
// guides its prompt points to (workspace/guides); a file outside the workspace is refused, and its
// contents reach neither the model nor the run folder.
func TestClaudeReadsOnlyTheWorkspace(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "outside.txt")
	const secretText = "outside-the-workspace-4f1c9e"
	if err := os.WriteFile(secret, []byte(secretText), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "claude")
	guide := filepath.Join(out, "workspace", "guides", "hybrid_guide.md")
	steps := []scripted.Step{
		{Tool: "Read", Args: map[string]any{"file_path": guide}},
		{Tool: "Glob", Args: map[string]any{"pattern": "guides/*.md"}},
		{Tool: "Read", Args: map[string]any{"file_path": secret}},
		{Tool: "finish", Args: map[string]any{"status": "failure", "summary": "read the guides"}},
		{Text: "done"},
	}
	o := play(t, "claude", func(s *spec.Episode) { s.Arm = spec.ArmCells; s.MaxCalls = 5; s.Guides = true; s.Out = out }, steps, agentcli.Config{})
	if o.runErr != nil {
		t.Fatalf("run: %v", o.runErr)
	}
	want, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	firstLine := strings.SplitN(strings.TrimSpace(string(want)), "\n", 2)[0]
	results := lastResults(o.model)
	if len(results) != 4 { // the three reads, then finish
		t.Fatalf("the model saw %d tool results, want 4: %+v", len(results), results)
	}
	if results[0].IsError || !strings.Contains(results[0].Text, firstLine) {
		t.Errorf("Read of the guide: error %v, text %.300s; want it to contain %q", results[0].IsError, results[0].Text, firstLine)
	}
	if !strings.Contains(results[1].Text, "hybrid_guide.md") {
		t.Errorf("Glob guides/*.md: %.300s", results[1].Text)
	}
	if strings.Contains(results[2].Text, secretText) {
		t.Errorf("a file outside the workspace was read: %.300s", results[2].Text)
	}
	t.Logf("outside read answered: error=%v %.200s", results[2].IsError, results[2].Text)
	for _, r := range o.model.Requests() {
		if strings.Contains(string(r.Body), secretText) {
			t.Errorf("the outside file reached the model (%s)", r.Path)
		}
	}
	filepath.Walk(o.dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), secretText) {
				t.Errorf("the outside file's text is in %s", p)
			}
		}
		return nil
	})
	if o.res.Finish == nil || o.res.Finish.Status != "failure" {
		t.Errorf("finish %+v", o.res.Finish)
	}
}

// TestCodexHomeGiven: a CODEX_HOME given (PYRUALEAN_CODEX_HOME, e.g. the user's login) is the one Codex
// runs with: its session rollout lands there, not in the run folder (which keeps only the prompt images).
func TestCodexHomeGiven(t *testing.T) {
	home := t.TempDir()
	steps := []scripted.Step{
		{Tool: "finish", Args: map[string]any{"status": "failure", "summary": "home"}},
		{Text: "done"},
	}
	o := play(t, "codex", func(s *spec.Episode) { s.Arm = spec.ArmCells; s.MaxCalls = 3 }, steps, agentcli.Config{Home: home})
	if o.runErr != nil || o.res.Finish == nil {
		t.Fatalf("run: %v finish %+v", o.runErr, o.res.Finish)
	}
	var rollouts []string
	filepath.Walk(filepath.Join(home, "sessions"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(fi.Name(), "rollout-") {
			rollouts = append(rollouts, p)
		}
		return nil
	})
	if len(rollouts) != 1 {
		t.Errorf("rollouts under the given CODEX_HOME: %v, want 1", rollouts)
	}
	if _, err := os.Stat(filepath.Join(o.dir, agentcli.CodexHome, "sessions")); err == nil {
		t.Errorf("the session went to the run folder's %s, not the given home", agentcli.CodexHome)
	}
}

package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/agent/runs"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/gateway"
	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/prices"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
	"github.com/pyrualean/pyrualean/spec/spectest"
)

// A live episode plugs into the gateway's /api/episodes.
var (
	_ gateway.EpisodeController = (*agent.Controller)(nil)
	_ gateway.EpisodeDiscarder  = (*agent.Controller)(nil)
)

// Reference cells for tabletop stack_blocks (robotapi/solutions/tabletop/stack_blocks.py).
const (
	pickRed   = "grasp = robo.pick(\"red_block\")\nassert grasp.success, grasp\n"
	placeBlue = "base = robo.segment(\"blue block\")\nx, y, top = base.top_xyz\nrobo.move_to([x, y, top + 0.10])\nrobo.move_to([x, y, top + 0.025], step_clip=0.01)\nrobo.release()\n"
)

func py(code string) openaitest.ToolCall {
	b, _ := json.Marshal(map[string]string{"code": code})
	return openaitest.ToolCall{Name: "python", Arguments: string(b)}
}

func finish(status, summary string) openaitest.ToolCall {
	b, _ := json.Marshal(map[string]string{"status": status, "summary": summary})
	return openaitest.ToolCall{Name: "finish", Arguments: string(b)}
}

func call(tcs ...openaitest.ToolCall) openaitest.Step {
	return openaitest.Step{Reply: openaitest.Reply{ToolCalls: tcs}}
}

// root is the repository; a test that asks for it boots real episodes (kernels, MuJoCo), which the
// fast tier (go test -short) skips.
func root(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a real episode (kernel, MuJoCo): not in the fast tier")
	}
	r, err := agent.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// testEpisode is an episode a test starts: its spec and this process's host settings.
type testEpisode struct {
	spec.Episode
	host agent.Host
}

// episodeConfig is a validated tabletop episode (spectest.Tabletop) with mod's changes.
func episodeConfig(t *testing.T, mod func(*testEpisode)) testEpisode {
	t.Helper()
	c := testEpisode{Episode: spectest.Tabletop(t, nil), host: agent.Host{Root: root(t)}}
	if mod != nil {
		mod(&c)
	}
	if err := c.Validate(context.Background(), &robotapi.Registry{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c testEpisode) start(ctx context.Context) (*agent.Episode, error) {
	return agent.StartEpisode(ctx, c.Episode, c.host)
}

func openaiConfig(srv *openaitest.Server, mod func(*runtimes.OpenAIConfig)) runtimes.OpenAIConfig {
	c := runtimes.OpenAIConfig{
		BaseURL: srv.BaseURL(), APIKey: "test-key", Model: "scripted",
		Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, PlannerRetryWait: 5 * time.Millisecond,
	}
	if mod != nil {
		mod(&c)
	}
	return c
}

// playEpisode runs one whole episode against the scripted server, the way `pyrualean play` does.
func playEpisode(t *testing.T, cfg testEpisode, oc runtimes.OpenAIConfig, during func(*agent.Episode)) (*agent.Result, *agent.Episode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ep, err := cfg.start(ctx)
	if err != nil {
		t.Fatalf("StartEpisode: %v", err)
	}
	t.Cleanup(func() { ep.Finish(context.Background(), "", nil) })
	if during != nil {
		during(ep)
	}
	pctx, pcancel := ep.Context(ctx)
	runErr := runtimes.RunOpenAI(pctx, ep, oc)
	if runErr != nil && pctx.Err() != nil {
		if cause := context.Cause(pctx); cause != nil {
			runErr = cause
		}
	}
	pcancel()
	res, err := ep.Finish(ctx, "", runErr)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return res, ep
}

func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: bad line %q: %v", path, sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func readTrace(t *testing.T, dir string) *notebooks.Notebook {
	t.Helper()
	nb, err := notebooks.ReadFile(filepath.Join(dir, "trace.ipynb"))
	if err != nil {
		t.Fatalf("trace: %v", err)
	}
	return nb
}

func cellsBy(nb *notebooks.Notebook, author string) []notebooks.Cell {
	var out []notebooks.Cell
	for _, c := range nb.Cells {
		if m, ok := c.Metadata["pyrualean"].(map[string]any); ok && m["author"] == author && c.CellType == notebooks.CellCode {
			out = append(out, c)
		}
	}
	return out
}

// toolMessages returns the tool messages of a request, in order.
func toolMessages(r openaitest.Request) []map[string]any {
	var out []map[string]any
	for _, m := range r.Messages() {
		if m["role"] == "tool" {
			out = append(out, m)
		}
	}
	return out
}

func lastToolText(t *testing.T, r openaitest.Request) string {
	t.Helper()
	tms := toolMessages(r)
	if len(tms) == 0 {
		t.Fatalf("request has no tool message")
	}
	s, _ := tms[len(tms)-1]["content"].(string)
	return s
}

// imagesAfterLastTool returns the image parts of the user message that follows the last tool message.
func imagesAfterLastTool(r openaitest.Request) (int, bool) {
	msgs := r.Messages()
	last := -1
	for i, m := range msgs {
		if m["role"] == "tool" {
			last = i
		}
	}
	if last < 0 || last+1 >= len(msgs) || msgs[last+1]["role"] != "user" {
		return 0, false
	}
	parts, _ := msgs[last+1]["content"].([]any)
	n := 0
	for _, p := range parts {
		if pm, _ := p.(map[string]any); pm["type"] == "image_url" {
			n++
		}
	}
	return n, true
}

func TestSolvedEpisodeThroughGoOpenAI(t *testing.T) {
	srv := openaitest.New(
		openaitest.Step{Reply: openaitest.Reply{Reasoning: "pick first", ReasoningKey: "reasoning", ToolCalls: []openaitest.ToolCall{py(pickRed)}}},
		openaitest.Step{Reply: openaitest.Reply{Reasoning: "then place", TopLevelReasoningTokens: true, ToolCalls: []openaitest.ToolCall{py(placeBlue)}}},
		call(finish("success", "stacked")),
	)
	defer srv.Close()
	temp := 0.0
	cfg := episodeConfig(t, func(c *testEpisode) {
		c.Policy.Prices = &prices.Table{Models: map[string]prices.Price{"scripted": {Input: 1, CachedInput: 0.1, Output: 4}}}
		c.MaxCalls = 10
	})
	res, _ := playEpisode(t, cfg, openaiConfig(srv, func(c *runtimes.OpenAIConfig) {
		c.Temperature = &temp
		c.ExtraBody = map[string]any{"top_k": 20, "chat_template_kwargs": map[string]any{"enable_thinking": false}, "reasoning_effort": "high"}
		c.Prices = cfg.Policy.Prices
	}), nil)
	// The reasoning effort is sent with every request and recorded per LLM call.
	if turns, err := agent.ReadTurns(filepath.Join(cfg.Out, "turns.jsonl")); err != nil || len(turns) != 3 || turns[0].ReasoningEffort != "high" {
		t.Errorf("turns.jsonl: %+v (%v); want 3 turns with effort high", turns, err)
	}
	// What the body asked of the sampler is recorded per call and in result.json.
	if turns, _ := agent.ReadTurns(filepath.Join(cfg.Out, "turns.jsonl")); len(turns) == 0 || turns[0].Sampling == nil ||
		turns[0].Sampling.Temperature == nil || *turns[0].Sampling.Temperature != 0 {
		t.Errorf("turns.jsonl sampling: %+v, want temperature 0", turns)
	}
	if sp := res.Generation.Sampling; sp == nil || sp.Temperature == nil || *sp.Temperature != 0 || sp.Seed != nil {
		t.Errorf("result.json generation.sampling %+v, want temperature 0 and no seed", sp)
	}
	if srv.Requests()[0].Body["reasoning_effort"] != "high" {
		t.Errorf("request body lacks reasoning_effort: %v", srv.Requests()[0].Body)
	}

	if res.Status != agent.StatusCompleted || res.EnvironmentSuccess == nil || !*res.EnvironmentSuccess {
		t.Fatalf("status %s success %v, want completed/true (error %+v)", res.Status, res.EnvironmentSuccess, res.Error)
	}
	if res.Finish == nil || res.Finish.Status != "success" || res.ToolTurns != 3 { // two cells and finish: every call counts, as the original
		t.Errorf("finish %+v tool_turns %d", res.Finish, res.ToolTurns)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || res.Generation.Turns != 3 {
		t.Fatalf("requests %d, generation.turns %d, want 3", len(reqs), res.Generation.Turns)
	}
	// Extra body, temperature 0 (go-openai alone would drop it) and tools on the wire.
	for _, r := range reqs {
		if string(r.Body["temperature"].(json.Number)) != "0" {
			t.Errorf("temperature on the wire = %v, want 0", r.Body["temperature"])
		}
		if string(r.Body["top_k"].(json.Number)) != "20" {
			t.Errorf("top_k = %v", r.Body["top_k"])
		}
		if ctk, _ := r.Body["chat_template_kwargs"].(map[string]any); ctk["enable_thinking"] != false {
			t.Errorf("chat_template_kwargs = %v", r.Body["chat_template_kwargs"])
		}
		if tools, _ := r.Body["tools"].([]any); len(tools) != 2 {
			t.Errorf("tools = %d, want python + finish", len(tools))
		}
	}
	// First user message: prompt text plus the task card's images.
	first := reqs[0].Messages()[0]
	parts, _ := first["content"].([]any)
	if first["role"] != "user" || len(parts) < 3 {
		t.Fatalf("first message = %v", first["role"])
	}
	if txt, _ := parts[0].(map[string]any)["text"].(string); !strings.Contains(txt, "# How you control the robot") || !strings.Contains(txt, "stack the red block on the blue block") {
		t.Errorf("prompt text lacks the contract or the task")
	}
	// on-motion: the pick moved the robot, so its images follow the tool message in a user message.
	fb := lastToolText(t, reqs[1])
	var cell map[string]any
	if err := json.Unmarshal([]byte(strings.Split(fb, "\n[")[0]), &cell); err != nil {
		t.Fatalf("feedback is not JSON: %v\n%s", err, fb)
	}
	for _, k := range []string{"cell", "stdout", "stderr", "elapsed_s", "images", "primitive_calls", "moved", "env_steps", "state", "episode_done"} {
		if _, ok := cell[k]; !ok {
			t.Errorf("rich feedback lacks %q: %s", k, fb)
		}
	}
	if n, ok := imagesAfterLastTool(reqs[1]); !ok || n != 2 {
		t.Errorf("images after the pick's tool message = %d (%v), want 2 in a user message", n, ok)
	}
	// Accounting: turns.jsonl has one line per LLM call; usage from the raw response.
	turns := readJSONL(t, filepath.Join(cfg.Out, "turns.jsonl"))
	if len(turns) != 3 {
		t.Fatalf("turns.jsonl has %d lines", len(turns))
	}
	if turns[0]["reasoning"] != "pick first" {
		t.Errorf("reasoning from the `reasoning` key = %v", turns[0]["reasoning"])
	}
	u1, _ := turns[1]["usage"].(map[string]any)
	if u1["reasoning_output_tokens"].(float64) == 0 || u1["cached_input_tokens"].(float64) == 0 {
		t.Errorf("turn 2 usage %v: want top-level reasoning tokens and cached tokens", u1)
	}
	var in float64
	for _, tr := range turns {
		in += tr["usage"].(map[string]any)["input_tokens"].(float64)
	}
	if int(in) != res.Generation.InputTokens || res.Generation.CachedInputTokens == 0 || res.CostUSD == nil || *res.CostUSD <= 0 {
		t.Errorf("generation %+v cost %v (sum of turns %v)", res.Generation, res.CostUSD, in)
	}
	// Trace: setup cell, two agent cells with their outputs, the finish.
	nb := readTrace(t, cfg.Out)
	if got := len(cellsBy(nb, "agent")); got != 2 {
		t.Errorf("trace has %d agent cells", got)
	}
	if st := nb.Metadata["pyrualean"].(map[string]any)["status"]; st != agent.StatusCompleted {
		t.Errorf("trace status %v", st)
	}
	checkTraceMeta(t, nb, res, map[string]any{"max_turns": "10", "budget_s": nil, "max_env_steps": "10000", "cell_timeout_s": "60"})
	// Ledger copied into the run folder.
	if calls := readJSONL(t, filepath.Join(cfg.Out, "calls.jsonl")); len(calls) < 3 || calls[0]["tool"] != "pick" {
		t.Errorf("calls.jsonl = %v", calls)
	}
	if res.StatefulCalls == 0 {
		t.Errorf("stateful_calls = 0")
	}
}

// checkTraceMeta checks the trace's notebook metadata against the episode's result: success, budgets
// (numbers as written, null for unlimited), token totals, versions, language_info numbers kept exact,
// and the sandbox flag on every agent and tool cell.
func checkTraceMeta(t *testing.T, nb *notebooks.Notebook, res *agent.Result, budgets map[string]any) {
	t.Helper()
	ep := nb.Metadata["pyrualean"].(map[string]any)
	success, ok := ep["success"]
	switch {
	case !ok:
		t.Errorf("metadata.pyrualean has no success")
	case res.EnvironmentSuccess == nil && success != nil,
		res.EnvironmentSuccess != nil && success != *res.EnvironmentSuccess:
		t.Errorf("metadata.pyrualean.success = %v, result.json %v", success, res.EnvironmentSuccess)
	}
	if !reflect.DeepEqual(ep["environment_success"], success) {
		t.Errorf("environment_success %v != success %v", ep["environment_success"], success)
	}
	got := map[string]any{}
	if b, ok := ep["budgets"].(map[string]any); ok {
		for k, v := range b {
			if n, isNum := v.(json.Number); isNum {
				f, _ := n.Float64()
				v = strconv.FormatFloat(f, 'f', -1, 64)
			}
			got[k] = v
		}
	}
	if !reflect.DeepEqual(got, budgets) {
		t.Errorf("metadata.pyrualean.budgets = %v, want %v", ep["budgets"], budgets)
	}
	for key, want := range map[string]int{"input_tokens": res.Generation.InputTokens, "output_tokens": res.Generation.OutputTokens,
		"cached_input_tokens": res.Generation.CachedInputTokens, "llm_calls": res.Generation.Turns, "total_tokens": res.Generation.TotalTokens} {
		if n, _ := ep[key].(json.Number); string(n) != strconv.Itoa(want) {
			t.Errorf("metadata.pyrualean.%s = %v, want %d", key, ep[key], want)
		}
	}
	v, _ := ep["versions"].(map[string]any)
	for _, k := range []string{"pyrualean", "go", "python", "ipython", "ipykernel", "mujoco", "numpy"} {
		if s, _ := v[k].(string); s == "" {
			t.Errorf("metadata.pyrualean.versions lacks %s: %v", k, v)
		}
	}
	// ipykernel sends codemirror_mode.version as the integer 3; it must not come back as 3.0.
	li, _ := nb.Metadata["language_info"].(map[string]any)
	cm, _ := li["codemirror_mode"].(map[string]any)
	if n, _ := cm["version"].(json.Number); n != "3" {
		t.Errorf("language_info.codemirror_mode.version = %#v, want the integer 3", cm["version"])
	}
	for _, c := range nb.Cells {
		m, _ := c.Metadata["pyrualean"].(map[string]any)
		if c.CellType != notebooks.CellCode || (m["author"] != "agent" && m["author"] != "tool") {
			continue
		}
		if m["sandbox"] != true {
			t.Errorf("%s cell %q: metadata.pyrualean.sandbox = %v, want true", m["author"], c.Source, m["sandbox"])
		}
	}
}

func TestFailedEpisodeAndMalformedArguments(t *testing.T) {
	srv := openaitest.New(
		call(openaitest.ToolCall{Name: "python", Arguments: `{"code": "print(1)"`}),
		call(openaitest.ToolCall{Name: "python", Arguments: `{"source": "print(1)"}`}),
		call(openaitest.ToolCall{Name: "teleport", Arguments: `{}`}),
		call(py("print('\\x1b[31mred\\x1b[0m')\n1/0")),
		call(finish("failure", "gave up"), py("print('after finish')")), // parallel calls: nothing runs after finish
	)
	defer srv.Close()
	cfg := episodeConfig(t, func(c *testEpisode) { c.Feedback = spec.FeedbackPure })
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
	if res.Status != agent.StatusCompleted || (res.EnvironmentSuccess != nil && *res.EnvironmentSuccess) || res.Finish.Status != "failure" {
		t.Fatalf("status %s success %v finish %+v", res.Status, res.EnvironmentSuccess, res.Finish)
	}
	reqs := srv.Requests()
	for i, want := range []string{"malformed arguments for python", "malformed arguments for python", "unknown tool: teleport"} {
		if got := lastToolText(t, reqs[i+1]); !strings.Contains(got, want) {
			t.Errorf("reply %d = %s, want %q", i+1, got, want)
		}
	}
	if res.ToolTurns != 6 { // every call is a row, refused ones too (the original's tool_turns)
		t.Errorf("tool_turns = %d: every call counts", res.ToolTurns)
	}
	fb := lastToolText(t, reqs[4])
	var cell map[string]any
	if err := json.Unmarshal([]byte(fb), &cell); err != nil {
		t.Fatal(err)
	}
	exc, _ := cell["exception"].(string)
	if !strings.Contains(exc, "ZeroDivisionError") || strings.Contains(exc, "\x1b[") {
		t.Errorf("exception %q: want ZeroDivisionError without ANSI", exc)
	}
	if cell["stdout"] != "red\n" {
		t.Errorf("stdout %q: want ANSI stripped", cell["stdout"])
	}
	keys := map[string]bool{}
	for k := range cell {
		keys[k] = true
	}
	for _, k := range []string{"primitive_calls", "state", "moved", "images"} {
		if keys[k] {
			t.Errorf("pure feedback has %q", k)
		}
	}
	// Unsolved: success is false or null in the trace, as in result.json; budgets say unlimited turns.
	checkTraceMeta(t, readTrace(t, cfg.Out), res, map[string]any{"max_turns": nil, "budget_s": nil, "max_env_steps": "10000", "cell_timeout_s": "60"})
}

func TestCallBudgetExhausted(t *testing.T) {
	srv := openaitest.New(
		call(py("x = 1")),
		call(py("x += 1")),
		call(py("x += 1")),
		call(finish("failure", "out of calls")),
	)
	defer srv.Close()
	cfg := episodeConfig(t, func(c *testEpisode) { c.MaxCalls = 2; c.Guides = true })
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
	prompt, _ := os.ReadFile(filepath.Join(cfg.Out, "prompt.txt"))
	for _, want := range []string{"# How you control the robot", "# API reference", "robo.move_to", "# Task", "`hybrid_guide.md`", "calls in an episode is limited"} {
		if !strings.Contains(string(prompt), want) {
			t.Errorf("prompt.txt lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.Out, "workspace", "guides", "hybrid_guide.md")); err != nil {
		t.Errorf("guides not copied to the workspace: %v", err)
	}
	if res.Status != agent.StatusCallBudget || res.ToolTurns != 4 { // 2 cells, the refused third, finish
		t.Fatalf("status %s tool_turns %d, want call_budget/4", res.Status, res.ToolTurns)
	}
	if len(srv.Requests()) != 4 {
		t.Fatalf("requests %d", len(srv.Requests()))
	}
	if got := lastToolText(t, srv.Requests()[3]); !strings.Contains(got, "call budget exhausted") {
		t.Errorf("third python call answered %s", got)
	}
}

func TestWallClockBudget(t *testing.T) {
	srv := openaitest.New(call(py("import time\nprint('start', flush=True)\ntime.sleep(60)")))
	defer srv.Close()
	cfg := episodeConfig(t, func(c *testEpisode) { c.BudgetS = 4 })
	start := time.Now()
	res, ep := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
	if res.Status != agent.StatusTimeout {
		t.Fatalf("status %s, want timeout (%+v)", res.Status, res.Error)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("took %v", el)
	}
	_ = ep
	nb := readTrace(t, cfg.Out)
	agentCells := cellsBy(nb, "agent")
	if len(agentCells) != 1 {
		t.Fatalf("trace has %d agent cells, want the interrupted one", len(agentCells))
	}
	if out := agentCells[0].Outputs; len(out) == 0 || !strings.Contains(out[0].Text, "start") {
		t.Errorf("partial output lost: %+v", out)
	}
}

func TestKernelKilledMidEpisode(t *testing.T) {
	var pid int
	srv := openaitest.New(
		call(py("a = 41")),
		openaitest.Step{Func: func(openaitest.Request) openaitest.Reply {
			syscall.Kill(pid, syscall.SIGKILL)
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{py("a + 1")}}
		}},
	)
	defer srv.Close()
	cfg := episodeConfig(t, nil)
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), func(ep *agent.Episode) { pid = ep.Kernel().Pid() })
	if res.Status != agent.StatusError || res.Error == nil {
		t.Fatalf("status %s error %+v, want error", res.Status, res.Error)
	}
	nb := readTrace(t, cfg.Out)
	if len(cellsBy(nb, "setup")) != 1 || len(cellsBy(nb, "agent")) < 1 {
		t.Fatalf("trace lost cells: %d cells", len(nb.Cells))
	}
	if cellsBy(nb, "agent")[0].Source != "a = 41" {
		t.Errorf("first agent cell = %q", cellsBy(nb, "agent")[0].Source)
	}
	var onDisk agent.Result
	b, _ := os.ReadFile(filepath.Join(cfg.Out, "result.json"))
	if err := json.Unmarshal(b, &onDisk); err != nil || onDisk.Status != agent.StatusError {
		t.Errorf("result.json status %q (%v)", onDisk.Status, err)
	}
}

func TestProviderErrorsRetried(t *testing.T) {
	srv := openaitest.New(
		openaitest.Step{Status: 500},
		openaitest.Step{Status: 429},
		openaitest.Step{Delay: 20 * time.Second}, // past the attempt's deadline
		openaitest.Step{Hangup: true},            // connection reset
		openaitest.Step{Status: 503},
		call(py("print('ok')")),
		call(finish("failure", "done")),
	)
	defer srv.Close()
	cfg := episodeConfig(t, nil)
	res, _ := playEpisode(t, cfg, openaiConfig(srv, func(c *runtimes.OpenAIConfig) {
		c.HTTPAttempts = 6
		c.RequestTimeout = 1500 * time.Millisecond
	}), nil)
	if res.Status != agent.StatusCompleted || res.ToolTurns != 2 {
		t.Fatalf("status %s turns %d (%+v)", res.Status, res.ToolTurns, res.Error)
	}
	turns := readJSONL(t, filepath.Join(cfg.Out, "turns.jsonl"))
	if turns[0]["attempts"].(float64) != 6 {
		t.Errorf("first call attempts = %v, want 6 (5 failures, then success)", turns[0]["attempts"])
	}
}

func TestPlannerErrors(t *testing.T) {
	// 400 is not retried at the HTTP layer; before the first tool call the planner is restarted.
	// After a tool call, a provider that keeps failing ends the episode with planner_error.
	srv := openaitest.New(
		openaitest.Step{Status: 400},
		call(py("print('ok')")),
		openaitest.Step{Status: 500},
		openaitest.Step{Status: 500},
	)
	defer srv.Close()
	cfg := episodeConfig(t, nil)
	res, _ := playEpisode(t, cfg, openaiConfig(srv, func(c *runtimes.OpenAIConfig) { c.HTTPAttempts = 2 }), nil)
	if res.Status != agent.StatusPlannerError || res.PlannerAttempts != 2 {
		t.Fatalf("status %s planner_attempts %d, want planner_error/2", res.Status, res.PlannerAttempts)
	}
}

func TestImagePolicies(t *testing.T) {
	cases := []struct {
		images   string
		code     string
		want     []string
		textOnly bool
	}{
		{spec.ImagesOnMotion, "robo.move_to([0.5, 0.0, 0.3])", []string{"agentview", "wrist"}, true},
		{spec.ImagesOnDemand, "robo.move_to([0.5, 0.0, 0.3])\nrobo.show('wrist')\nrobo.show('wrist')", []string{"wrist"}, false},
		{spec.ImagesOnDemand, "robo.move_to([0.5, 0.0, 0.3])", nil, false},
		{spec.ImagesNone, "robo.move_to([0.5, 0.0, 0.3])\nrobo.show('wrist')\ndisplay(np.zeros((8, 8, 3), dtype=np.uint8))", []string{"display_0"}, false},
		{spec.ImagesOnMotion, "robo.state()", nil, false},
	}
	for _, tc := range cases {
		name := tc.images + "/" + strings.Split(tc.code, "\n")[len(strings.Split(tc.code, "\n"))-1]
		if tc.textOnly {
			name += "/text-only"
		}
		t.Run(name, func(t *testing.T) {
			srv := openaitest.New(call(py(tc.code)), call(finish("failure", "x")))
			defer srv.Close()
			cfg := episodeConfig(t, func(c *testEpisode) { c.Images = tc.images })
			res, _ := playEpisode(t, cfg, openaiConfig(srv, func(c *runtimes.OpenAIConfig) { c.TextOnly = tc.textOnly }), nil)
			if res.Status != agent.StatusCompleted {
				t.Fatalf("status %s %+v", res.Status, res.Error)
			}
			req := srv.Requests()[1]
			if tc.textOnly {
				if _, isText := req.Messages()[0]["content"].(string); !isText {
					t.Errorf("text-only model got card images")
				}
				if n, ok := imagesAfterLastTool(req); ok || n != 0 || !strings.Contains(lastToolText(t, req), "not shown") {
					t.Errorf("text-only model got %d images", n)
				}
				return
			}
			// The card's step-0 images come with the first message, except under "none" ("never attached"),
			// where the card does not name them either.
			first, _ := json.Marshal(req.Messages()[0]["content"])
			if cardImages := strings.Contains(string(first), "image_url"); cardImages == (tc.images == spec.ImagesNone) {
				t.Errorf("images %s: card images attached %v", tc.images, cardImages)
			}
			if named := strings.Contains(string(first), "attached images:"); named == (tc.images == spec.ImagesNone) {
				t.Errorf("images %s: the card names attached images %v", tc.images, named)
			}
			var cell struct {
				Images    []string `json:"images"`
				Exception string   `json:"exception"`
			}
			json.Unmarshal([]byte(strings.Split(lastToolText(t, req), "\n[")[0]), &cell)
			if cell.Exception != "" {
				t.Fatalf("cell raised: %s", cell.Exception)
			}
			var got []string
			for _, n := range cell.Images {
				got = append(got, strings.TrimSuffix(n, ".png"))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("images %v, want %v", got, tc.want)
			}
			n, _ := imagesAfterLastTool(req)
			if n != len(tc.want) {
				t.Errorf("%d image parts sent, want %d", n, len(tc.want))
			}
		})
	}
}

func TestToolsArm(t *testing.T) {
	srv := openaitest.New(
		call(openaitest.ToolCall{Name: "pick", Arguments: `{"object": "red_block"}`}),
		call(openaitest.ToolCall{Name: "move_to", Arguments: `{"xyz": [0.5, "far"]}`}),
		call(openaitest.ToolCall{Name: "move_to", Arguments: `{"xyz": [0.5, 0.0, `}),
		call(finish("failure", "x")),
	)
	defer srv.Close()
	cfg := episodeConfig(t, func(c *testEpisode) { c.Arm = spec.ArmTools })
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
	if res.Status != agent.StatusCompleted || res.ToolTurns != 4 {
		t.Fatalf("status %s turns %d %+v", res.Status, res.ToolTurns, res.Error)
	}
	reqs := srv.Requests()
	if tools, _ := reqs[0].Body["tools"].([]any); len(tools) < 5 {
		t.Errorf("tools arm offers %d tools", len(tools))
	}
	var fb map[string]any
	if err := json.Unmarshal([]byte(strings.Split(lastToolText(t, reqs[1]), "\n[")[0]), &fb); err != nil {
		t.Fatal(err)
	}
	if fb["tool"] != "pick" || fb["ok"] != true || fb["state"] == nil || len(fb["images"].([]any)) != 2 {
		t.Errorf("pick feedback = %v", fb)
	}
	if got := lastToolText(t, reqs[2]); !strings.Contains(got, `"ok": false`) {
		t.Errorf("bad primitive argument feedback = %s", got)
	}
	if got := lastToolText(t, reqs[3]); !strings.Contains(got, "malformed arguments for move_to") {
		t.Errorf("malformed = %s", got)
	}
	nb := readTrace(t, cfg.Out)
	tc := cellsBy(nb, "tool")
	if len(tc) != 2 || tc[0].Source != `robo.pick(object="red_block")` {
		t.Errorf("tool cells %+v", tc)
	}
	checkTraceMeta(t, nb, res, map[string]any{"max_turns": nil, "budget_s": nil, "max_env_steps": "10000", "cell_timeout_s": "60"})
}

// TestHumanCellsAndPause: a person's cell reaches the agent's next decision (before the model call,
// not in a later feedback); a pause holds the agent before its decision, Step lets exactly one
// decision through, Resume lets it go on.
func TestHumanCellsAndPause(t *testing.T) {
	srv := openaitest.New(call(py("y = 1")), call(py("y")), call(finish("failure", "x")))
	defer srv.Close()
	cfg := episodeConfig(t, nil)
	requestsWhilePaused, turnsWhilePaused, requestsAfterStep, turnsAfterStep := -1, -1, -1, -1
	res, ep := playEpisode(t, cfg, openaiConfig(srv, nil), func(ep *agent.Episode) {
		// A person attaches to the episode's kernel, with its own session, and types a cell.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := attachPerson(t, ep)
		if _, err := c.Execute(ctx, "print('hello from a person')\nh = 41", kernel.ExecuteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The person pauses the agent, lets one decision through, then resumes.
		ep.Controller().Pause()
		go func() {
			waitFor := func(cond func() bool) {
				for end := time.Now().Add(20 * time.Second); !cond() && time.Now().Before(end); {
					time.Sleep(10 * time.Millisecond)
				}
			}
			waiting := func() bool { return ep.Status().Phase == "waiting" }
			waitFor(waiting)
			time.Sleep(200 * time.Millisecond)
			requestsWhilePaused, turnsWhilePaused = len(srv.Requests()), ep.Status().Turns
			ep.Controller().Step()
			waitFor(func() bool { return ep.Status().Turns >= 1 && waiting() })
			time.Sleep(200 * time.Millisecond)
			requestsAfterStep, turnsAfterStep = len(srv.Requests()), ep.Status().Turns
			ep.Controller().Resume()
		}()
	})
	if requestsWhilePaused != 0 || turnsWhilePaused != 0 || requestsAfterStep != 1 || turnsAfterStep != 1 {
		t.Errorf("while paused %d model calls, %d cells; after one step %d, %d; want 0, 0 then 1, 1",
			requestsWhilePaused, turnsWhilePaused, requestsAfterStep, turnsAfterStep)
	}
	if res.HumanCells != 1 {
		t.Fatalf("human_cells = %d", res.HumanCells)
	}
	if st := ep.Controller().Status().(agent.EpisodeStatus); st.HumanCells != 1 || st.ID != "run" || st.Turns != 2 || st.State != "over" {
		t.Errorf("status %+v", st)
	}
	// Told before the first decision: the first request already carries the person's cell.
	first, _ := json.Marshal(srv.Requests()[0].Messages())
	if !strings.Contains(string(first), "human_cells") || !strings.Contains(string(first), "hello from a person") ||
		!strings.Contains(string(first), "The robot did not move") {
		t.Errorf("the agent's first decision was not told about the person's cell: %s", first)
	}
	hc := cellsBy(readTrace(t, cfg.Out), "human")
	if len(hc) != 1 || !strings.Contains(hc[0].Source, "h = 41") {
		t.Errorf("human cells in trace: %+v", hc)
	}
	nb := readTrace(t, cfg.Out)
	var kinds []string
	for _, ev := range notebooks.ParseEpisodeMeta(nb.Metadata).Events {
		kinds = append(kinds, ev.Kind+":"+ev.By)
	}
	if strings.Join(kinds, " ") != "pause:person step:person resume:person" {
		t.Errorf("trace events %v", kinds)
	}
}

// TestSandbox: agent cells run with the sandbox on; refused cells are not run, the model is told why,
// and flags land in result.json. The same code typed by a person is not restricted.
func TestSandbox(t *testing.T) {
	cases := []struct{ code, want string }{
		{"import subprocess\nsubprocess.run(['true'])", "SandboxError"},
		{"robo.move_to([0.5, 0.0, 0.3])\nraise ValueError('after a move')", "after a move"},
		{"().__class__.__subclasses__()", "SandboxError"},
		{"open('/etc/hostname').read()", "open"},
	}
	var steps []openaitest.Step
	for _, c := range cases {
		steps = append(steps, call(py(c.code)))
	}
	steps = append(steps, call(finish("failure", "sandbox")))
	srv := openaitest.New(steps...)
	defer srv.Close()
	cfg := episodeConfig(t, nil)
	var human string
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), func(ep *agent.Episode) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := attachPerson(t, ep)
		r, err := c.Execute(ctx, "import subprocess\nprint(subprocess.run(['echo', 'person'], capture_output=True, text=True).stdout)", kernel.ExecuteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range r.Outputs {
			human += o.Text
		}
	})
	if !strings.Contains(human, "person") {
		t.Errorf("a person's cell was restricted: %q", human)
	}
	reqs := srv.Requests()
	for i, c := range cases {
		fb := lastToolText(t, reqs[i+1])
		var cell struct {
			Exception string `json:"exception"`
		}
		json.Unmarshal([]byte(strings.Split(fb, "\n[")[0]), &cell)
		if !strings.Contains(cell.Exception, c.want) {
			t.Errorf("%q: exception %q, want %q\n%s", c.code, cell.Exception, c.want, fb)
		}
	}
	if flags := strings.Join(res.Generation.SandboxFlags, " "); !strings.Contains(flags, "import:subprocess") {
		t.Errorf("sandbox flags in result.json: %q", flags)
	}
	// The cell that moved and then raised still reports its robot calls (ledger, steps).
	if res.Calls == 0 || res.EnvSteps == 0 {
		t.Errorf("calls %d env_steps %d: the failed cell's report was lost", res.Calls, res.EnvSteps)
	}
	t.Logf("flags %v", res.Generation.SandboxFlags)
}

func TestBootErrors(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*testEpisode)
		want string
	}{
		{"unknown task", func(c *testEpisode) { c.Task = "juggle" }, "juggle"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := episodeConfig(t, tc.mod)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ep, err := cfg.start(ctx)
			if err == nil {
				ep.Finish(ctx, "", nil)
				t.Fatal("episode started")
			}
			if !errors.Is(err, agent.ErrBoot) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v", err)
			}
			var res agent.Result
			b, _ := os.ReadFile(filepath.Join(cfg.Out, "result.json"))
			if err := json.Unmarshal(b, &res); err != nil || res.Status != agent.StatusBootError || res.Error == nil || !strings.Contains(res.Error.Message, tc.want) {
				t.Errorf("result.json: %+v (%v)", res, err)
			}
			if rows, _ := runs.LoadRuns([]string{cfg.Out}); len(rows) != 1 || rows[0].Status != agent.StatusBootError {
				t.Errorf("summarize sees %+v", rows)
			}
		})
	}
}

// TestCellTimeout: a cell past its limit is interrupted; the model is told, with the partial output,
// and the session goes on.
func TestCellTimeout(t *testing.T) {
	srv := openaitest.New(
		call(py("keep = 7\nimport time\nprint('before', flush=True)\ntime.sleep(60)")),
		call(py("print('alive', keep)")),
		call(finish("failure", "x")),
	)
	defer srv.Close()
	cfg := episodeConfig(t, func(c *testEpisode) { c.CellTimeoutS = 4 })
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
	if res.Status != agent.StatusCompleted || res.ToolTurns != 3 {
		t.Fatalf("status %s turns %d %+v", res.Status, res.ToolTurns, res.Error)
	}
	var cell struct{ Stdout, Exception string }
	json.Unmarshal([]byte(lastToolText(t, srv.Requests()[1])), &cell)
	if !strings.Contains(cell.Exception, "TimeoutError") || !strings.Contains(cell.Stdout, "before") {
		t.Errorf("timed-out cell feedback: %+v", cell)
	}
	json.Unmarshal([]byte(lastToolText(t, srv.Requests()[2])), &cell)
	if cell.Stdout != "alive 7\n" {
		t.Errorf("after the interrupt: %+v", cell)
	}
}

// TestCellTimeoutRestart: a cell that swallows the interrupt forces a kernel restart; the robot is
// gone, so the episode ends with status error and the cell in the trace.
func TestCellTimeoutRestart(t *testing.T) {
	srv := openaitest.New(
		call(py("import time\nwhile True:\n    try:\n        time.sleep(0.2)\n    except KeyboardInterrupt:\n        print('ignored', flush=True)")),
		call(finish("failure", "x")),
	)
	defer srv.Close()
	cfg := episodeConfig(t, func(c *testEpisode) { c.CellTimeoutS = 3 })
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
	if res.Status != agent.StatusError || res.Error == nil || res.Error.Type != "KernelRestarted" {
		t.Fatalf("status %s error %+v", res.Status, res.Error)
	}
	cells := cellsBy(readTrace(t, cfg.Out), "agent")
	if len(cells) != 1 || len(cells[0].Outputs) == 0 {
		t.Errorf("trace: %+v", cells)
	}
}

// TestDisplayUpdatesInTrace: a display a person showed is updated by a later agent cell and by a later
// person's cell; the trace cell that showed it follows each update on disk (nbformat semantics), and
// the updating cells get no output of their own.
func TestDisplayUpdatesInTrace(t *testing.T) {
	srv := openaitest.New(call(py("h.update('v2')")), call(py("1")), call(finish("failure", "x")))
	defer srv.Close()
	cfg := episodeConfig(t, nil)
	// displays returns the text/plain and metadata.n of every display_data in the trace on disk.
	displays := func() (texts []string, ns []any) {
		nb := readTrace(t, cfg.Out)
		for _, c := range nb.Cells {
			for _, o := range c.Outputs {
				if o.OutputType == notebooks.OutputDisplayData {
					s, _ := o.Data["text/plain"].(string)
					texts = append(texts, s)
					ns = append(ns, o.Metadata["n"])
				}
			}
		}
		return texts, ns
	}
	var afterAgent []string
	errs := make(chan error, 4)
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), func(ep *agent.Episode) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		c := attachPerson(t, ep)
		waitFor := func(cond func() bool) {
			for end := time.Now().Add(20 * time.Second); !cond() && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if _, err := c.Execute(ctx, "from IPython.display import display\nh = display('v1', display_id='d1', metadata={'n': 1})", kernel.ExecuteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(func() bool { return ep.Status().HumanCells == 1 })
		ep.Controller().Pause()
		go func() {
			defer cancel()
			defer ep.Controller().Resume()
			waitFor(func() bool { return ep.Status().Phase == "waiting" })
			ep.Controller().Step() // the agent's h.update('v2')
			waitFor(func() bool { return ep.Status().Turns >= 1 })
			time.Sleep(200 * time.Millisecond)
			afterAgent, _ = displays()
			if _, err := c.Execute(ctx, "h.update('v3', metadata={'n': 2})", kernel.ExecuteOptions{}); err != nil {
				errs <- err
			}
			waitFor(func() bool { return ep.Status().HumanCells == 2 })
		}()
	})
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if res.HumanCells != 2 || res.ToolTurns != 3 {
		t.Fatalf("human cells %d, tool turns %d (status %s %+v)", res.HumanCells, res.ToolTurns, res.Status, res.Error)
	}
	if !reflect.DeepEqual(afterAgent, []string{"'v2'"}) {
		t.Errorf("after the agent's update the trace shows %q, want the person's display updated to 'v2'", afterAgent)
	}
	texts, ns := displays()
	if !reflect.DeepEqual(texts, []string{"'v3'"}) || len(ns) != 1 || ns[0] != json.Number("2") {
		t.Errorf("at the end the trace shows %q with metadata n %v, want one display 'v3' with n = 2 exactly", texts, ns)
	}
	if ac := cellsBy(readTrace(t, cfg.Out), "agent"); len(ac) != 2 || len(ac[0].Outputs) != 0 {
		t.Errorf("agent cells %+v: the updating cell must have no output of its own", ac)
	}
	if hc := cellsBy(readTrace(t, cfg.Out), "human"); len(hc) != 2 || len(hc[1].Outputs) != 0 {
		t.Errorf("human cells %+v: the person's updating cell must have no output of its own", hc)
	}
}

// TestAdmit: a booted episode waits in Admit (a suite's slot) before its policy clock starts; the wait
// is queued_s, not startup or policy time. Cancelled while waiting, it ends interrupted with its
// kernel shut down.
func TestAdmit(t *testing.T) {
	const wait = 400 * time.Millisecond
	t.Run("admitted", func(t *testing.T) {
		srv := openaitest.New(call(finish("failure", "nothing tried")))
		defer srv.Close()
		cfg := episodeConfig(t, func(c *testEpisode) {
			c.host.Admit = func(ctx context.Context) error { time.Sleep(wait); return nil }
		})
		res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
		if res.Status != agent.StatusCompleted || res.QueuedS < wait.Seconds() {
			t.Fatalf("status %s queued_s %v", res.Status, res.QueuedS)
		}
		if res.PolicyWallS > res.TotalWallS-res.StartupS-res.QueuedS+0.05 {
			t.Errorf("policy %vs counts the wait: total %v startup %v queued %v", res.PolicyWallS, res.TotalWallS, res.StartupS, res.QueuedS)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cfg := episodeConfig(t, func(c *testEpisode) {
			c.host.Admit = func(ctx context.Context) error {
				time.AfterFunc(wait, cancel)
				<-ctx.Done()
				return ctx.Err()
			}
		})
		if ep, err := cfg.start(ctx); err == nil {
			ep.Finish(context.Background(), "", nil)
			t.Fatal("the episode started after its context ended")
		}
		var res agent.Result
		b, _ := os.ReadFile(filepath.Join(cfg.Out, "result.json"))
		if err := json.Unmarshal(b, &res); err != nil || res.Status != agent.StatusInterrupted {
			t.Fatalf("result.json: %+v (%v)", res, err)
		}
		if res.KernelPID == 0 || syscall.Kill(res.KernelPID, 0) == nil {
			t.Errorf("kernel %d still running", res.KernelPID)
		}
	})
}

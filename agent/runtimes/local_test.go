package runtimes

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/llm"
	"github.com/pyrualean/pyrualean/spec"
)

func TestLocalDeadline(t *testing.T) {
	r := &localRuntime{speed: speed{prompt: 100, gen: 10}, cfg: OpenAIConfig{MaxTokens: 200}}
	for _, tc := range []struct {
		chars int
		want  time.Duration
	}{
		{0, 50 * time.Second},      // 200/10 s generated, ×1.5, +20 s
		{30000, 200 * time.Second}, // + 10000 prompt tokens at 100/s
	} {
		if got := r.deadline(tc.chars); got != tc.want {
			t.Errorf("deadline(%d) = %s, want %s", tc.chars, got, tc.want)
		}
	}
}

// startLocal is the local runtime on the test model, on a port and with a slot folder of its own.
func startLocal(t *testing.T, ctx context.Context, slotDir string, s Settings) *localRuntime {
	t.Helper()
	skipShort(t)
	s.Model = llm.TestModel
	rt, err := newLocal(s)
	if err != nil {
		t.Fatal(err)
	}
	r := rt.(*localRuntime)
	root, err := agent.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	r.opts.Root, r.opts.Port, r.opts.Threads, r.opts.SlotDir, r.opts.Install = root, anyPort(t), 2, slotDir, true
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestLocalTurnCutAtDeadline: a reply that never ends (the real model told to ignore its end token,
// with room for 100k tokens) is cut at its deadline, the episode ends with a planner error that says
// so, nothing is retried, and the server is free at once for the next request: the hang-up stopped
// the generation instead of leaving it running to max_tokens.
func TestLocalTurnCutAtDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := startLocal(t, ctx, t.TempDir(), Settings{OpenAI: OpenAIOptions{MaxTokens: 100000, ToolChoice: "auto",
		ExtraBody: map[string]any{"ignore_eos": true, "code_block_tool": ""}}})
	r.speed = speed{prompt: 1e9, gen: 1e9} // so the deadline is its 20 s of slack: far less than 100k tokens take
	d := &fakeDriver{dir: t.TempDir(), prompt: "Write a very long story about a robot arm."}
	start := time.Now()
	err := r.Run(ctx, d)
	took := time.Since(start)
	if !errors.Is(err, agent.ErrPlanner) || !strings.Contains(err.Error(), "no reply within its deadline of 20s") {
		t.Fatalf("Run = %v, want a planner error naming the deadline", err)
	}
	if took > 40*time.Second {
		t.Errorf("the turn took %s: not cut at its 20 s deadline", took)
	}
	if len(d.turns) != 1 || !strings.Contains(d.turns[0].Error, "the reply was cut") {
		t.Fatalf("turns recorded: %+v, want one with the cut", d.turns)
	}
	if d.attempts != 1 {
		t.Errorf("planner attempts %d, want 1 (a cut generation is not retried)", d.attempts)
	}
	// The server must be idle within moments (llama.cpp checks for a closed connection about once
	// a second), not busy generating the rest of the 100k tokens.
	idle := false
	for i := 0; i < 30 && !idle; i++ {
		p, err := r.srv.Progress(ctx)
		if err != nil {
			t.Fatal(err)
		}
		idle = !p.Processing
		time.Sleep(500 * time.Millisecond)
	}
	if !idle {
		t.Fatal("the server still generates 15 s after the client hung up")
	}
}

// TestLocalSeedReplays: the local runtime's requests carry LocalSeed, so the same prompt gets the same
// reply even when sampling is hot (make demo's episode replays as it ran); a request that names another
// seed gets another reply, so the sameness is the seed's doing, not a temperature that samples nothing.
func TestLocalSeedReplays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hot := 1.5
	r := startLocal(t, ctx, t.TempDir(), Settings{OpenAI: OpenAIOptions{MaxTokens: 48, Temperature: &hot,
		ExtraBody: map[string]any{"code_block_tool": ""}}})
	if got := r.cfg.ExtraBody["seed"]; got != LocalSeed {
		t.Fatalf("extra body seed %v, want LocalSeed %d", got, LocalSeed)
	}
	ask := func(extra map[string]any) string {
		t.Helper()
		rep, err := r.chat.Reply(ctx, ChatRequest{Extra: extra, Messages: []Message{
			{Role: RoleUser, Parts: []Part{{Text: "Write a short poem about a robot arm."}}}}})
		if err != nil {
			t.Fatal(err)
		}
		seed := int64(LocalSeed)
		if s, ok := extra["seed"].(int); ok {
			seed = int64(s)
		}
		if sp := rep.Sampling; sp == nil || sp.Seed == nil || *sp.Seed != seed || sp.Temperature == nil || *sp.Temperature != hot || sp.MaxTokens != 48 {
			t.Errorf("the reply's sampling %+v, want seed %d, temperature %g, 48 tokens", sp, seed, hot)
		}
		return rep.Text
	}
	first, again := ask(nil), ask(nil)
	if first == "" || first != again {
		t.Fatalf("the same prompt with the default seed gave\n%q\nthen\n%q", first, again)
	}
	differ := 0
	for s := LocalSeed + 1; s <= LocalSeed+3; s++ {
		if ask(map[string]any{"seed": s}) != first {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("three other seeds all gave the default seed's reply %q: the sampling is not seeded", first)
	}
}

// TestLocalPromptCache: the second episode's first turn takes the shared prompt prefix from the
// server's cache, and so does the first turn of an episode in a new server process (the slot file
// saved after the first episode's first reply), by the server's own count of cached tokens.
func TestLocalPromptCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	slots := t.TempDir()
	episode := func(r *localRuntime, seed int) agent.Turn {
		t.Helper()
		run := playTask(t, r, "put_block_in_bowl", func(s *spec.Episode) {
			s.Seed, s.Images, s.MaxCalls, s.BudgetS, s.PromptProfile = seed, spec.ImagesNone, 1, 300, spec.ProfileCompact
			s.Policy.Runtime = "local"
		})
		if run.res.Prompt.Profile != spec.ProfileCompact {
			t.Errorf("result.json prompt profile %q", run.res.Prompt.Profile)
		}
		turns := readTurns(t, filepath.Join(run.dir, run.res.Files.Turns))
		if len(turns) == 0 || turns[0].Error != "" {
			t.Fatalf("seed %d: turns %+v (run %v)", seed, turns, run.err)
		}
		return turns[0]
	}
	opts := Settings{OpenAI: OpenAIOptions{MaxTokens: 64}}
	r := startLocal(t, ctx, slots, opts)
	first := episode(r, 0)
	second := episode(r, 1)
	r.Close()
	r2 := startLocal(t, ctx, slots, opts) // a new server process, warm only through the slot file
	third := episode(r2, 2)

	t.Logf("first turns: cold %+v, same server %+v, new process %+v", first.Usage, second.Usage, third.Usage)
	if first.Usage.CachedTokens > first.Usage.InputTokens/10 {
		t.Errorf("the first episode's first turn found %d of %d tokens cached: the test is not cold", first.Usage.CachedTokens, first.Usage.InputTokens)
	}
	for name, tr := range map[string]agent.Turn{"second episode": second, "new process": third} {
		if tr.Usage.CachedTokens < tr.Usage.InputTokens*3/4 {
			t.Errorf("%s: %d of %d prompt tokens cached, want the shared prefix (≥ 75%%)", name, tr.Usage.CachedTokens, tr.Usage.InputTokens)
		}
	}
	if files, _ := filepath.Glob(filepath.Join(slots, "*.bin")); len(files) != 1 {
		t.Errorf("slot files %v, want one for the shared prefix", files)
	}
}

// TestLocalRecordTokens: with RecordTokens the embedded llama.cpp server's token ids and logprobs
// reach tokens.jsonl, one line per LLM call: as many tokens as the server counted (n-gram drafts and
// the end-of-turn token included), each with its id and a logprob <= 0, whether the reply is a code
// block or a JSON tool call (the server's two ways of making tool calls).
func TestLocalRecordTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := startLocal(t, ctx, t.TempDir(), Settings{RecordTokens: true, OpenAI: OpenAIOptions{MaxTokens: 48}})
	// Deadlines are TestLocalTurnCutAtDeadline's subject: here a machine busier than at Start's
	// calibration must not cut a reply whose tokens the test reads (1 token/s: hours).
	r.speed = speed{prompt: 1, gen: 1}
	for _, codeBlock := range []string{"python", ""} {
		r.cfg.ExtraBody["code_block_tool"] = codeBlock
		r.chat = NewOpenAIChat(r.cfg)
		run := playTask(t, r, "put_block_in_bowl", func(s *spec.Episode) {
			s.MaxCalls, s.Images, s.PromptProfile, s.BudgetS, s.Policy.Runtime = 2, spec.ImagesNone, spec.ProfileCompact, 480, "local"
		})
		arm := "code_block_tool=" + codeBlock
		var turns []agent.Turn // the replies
		for _, tr := range readTurns(t, filepath.Join(run.dir, "turns.jsonl")) {
			if tr.Error == "" {
				turns = append(turns, tr)
			}
		}
		lines, err := ReadTokens(filepath.Join(run.dir, TokensFile))
		if err != nil || len(turns) == 0 || len(lines) != len(turns) {
			t.Fatalf("%s: %d token lines (%v) for %d turns (run %v)", arm, len(lines), err, len(turns), run.err)
		}
		for i, l := range lines {
			n := len(l.Completion)
			if l.Turn != turns[i].Turn || n == 0 || len(l.CompletionIDs) != n || len(l.CompletionLogprobs) != n || n != turns[i].Usage.OutputTokens {
				t.Errorf("%s line %d: turn %d, %d tokens, %d ids, %d logprobs; the server counted %d", arm, i, l.Turn, n,
					len(l.CompletionIDs), len(l.CompletionLogprobs), turns[i].Usage.OutputTokens)
			}
			for j, lp := range l.CompletionLogprobs {
				if lp > 0 || l.CompletionIDs[j] < 0 {
					t.Errorf("%s line %d token %d: id %d logprob %g", arm, i, j, l.CompletionIDs[j], lp)
				}
			}
		}
		// A code block opens with the episode's ReplyStart (the server's code_block_start), in every turn.
		for i, l := range lines {
			want := "```python\n# Task \"put_block_in_bowl\": put the red block in the bowl\n"
			if got := strings.Join(l.Completion, ""); codeBlock != "" && !strings.HasPrefix(got, want[:min(len(want), len(got))]) {
				t.Errorf("%s line %d: the reply %q does not open with %q", arm, i, got, want)
			}
		}
		t.Logf("%s: turn 1 wrote %q (ids %v...): calls %v, finish %s", arm, strings.Join(lines[0].Completion, ""),
			lines[0].CompletionIDs[:min(5, len(lines[0].CompletionIDs))], turns[0].ToolCalls, turns[0].FinishReason)
	}
}

func readTurns(t *testing.T, path string) []agent.Turn {
	t.Helper()
	turns, err := agent.ReadTurns(path)
	if err != nil {
		t.Fatal(err)
	}
	return turns
}

// TestLocalServerGone: an eval's runtime that reused a server another process started (a play still
// running) keeps serving once that server stops: its next episode starts a server of its own instead of
// failing at its first request, as every later episode of an eval did (80 of 140, a second each).
func TestLocalServerGone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := agent.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	port := anyPort(t)
	other, err := llm.Start(ctx, llm.Options{Model: llm.TestModel, Root: root, Port: port, Threads: 2, Install: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	r := startLocal(t, ctx, t.TempDir(), Settings{OpenAI: OpenAIOptions{MaxTokens: 16}})
	r.Close() // started on a port of its own; now find the other one
	r.opts.Port = port
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !r.server().Reused {
		t.Fatalf("the runtime started its own server; the test needs it to reuse the other one")
	}
	if err := other.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.server().Serving(ctx); err == nil {
		t.Fatal("Serving: nil for a server that has stopped")
	}
	run := playTask(t, r, "put_block_in_bowl", func(s *spec.Episode) {
		s.Images, s.MaxCalls, s.BudgetS, s.PromptProfile = spec.ImagesNone, 1, 300, spec.ProfileCompact
		s.Policy.Runtime = "local"
	})
	if run.res.Status == agent.StatusPlannerError || run.res.Generation.Turns == 0 {
		t.Fatalf("episode after the reused server stopped: status %s, %d turns, error %v", run.res.Status, run.res.Generation.Turns, run.res.Error)
	}
	srv := r.server()
	if srv.Reused || srv.Serving(ctx) != nil {
		t.Errorf("server after the restart: reused %v, serving %v", srv.Reused, srv.Serving(ctx))
	}
}

func anyPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// fakeDriver is an episode with nothing behind it: the test ends before any tool runs.
type fakeDriver struct {
	dir, prompt string
	turns       []agent.Turn
	attempts    int
}

func (d *fakeDriver) Toolkit() agent.Toolkit { return fakeToolkit{} }
func (d *fakeDriver) Prompt() agent.Prompt   { return agent.Prompt{Text: d.prompt} }
func (d *fakeDriver) Record() agent.Recorder { return d }
func (d *fakeDriver) Turn(t agent.Turn) error {
	d.turns = append(d.turns, t)
	return nil
}
func (d *fakeDriver) Finished() bool                    { return false }
func (d *fakeDriver) Success() *bool                    { return nil }
func (d *fakeDriver) PlannerAttempts(n int)             { d.attempts = n }
func (d *fakeDriver) Dir() string                       { return d.dir }
func (d *fakeDriver) CLI(agent.CLIInfo)                 {}
func (d *fakeDriver) UsageTotals(agent.Usage, *float64) {}
func (d *fakeDriver) AwaitTurn(context.Context) (agent.PeopleUpdate, error) {
	return agent.PeopleUpdate{}, nil
}
func (d *fakeDriver) Decide(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}

type fakeToolkit struct{}

func (fakeToolkit) Tools() []agent.ToolSpec {
	return []agent.ToolSpec{{Name: "python", Description: "run code", Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`)}}
}
func (fakeToolkit) Call(context.Context, string, json.RawMessage) (agent.ToolResult, error) {
	return agent.ToolResult{}, errors.New("fakeToolkit: no tool runs in this test")
}

// chatFunc is a Chat from a function.
type chatFunc func(ChatRequest) Reply

func (f chatFunc) Reply(_ context.Context, req ChatRequest) (Reply, error) { return f(req), nil }

func TestBlockChat(t *testing.T) {
	call := []ToolCall{{Name: "python", Arguments: `{"code":"x = 1\n"}`}}
	for _, tc := range []struct {
		name, start string
		reply       Reply
		wantStart   any // the request's code_block_start (nil: not sent)
		wantNudge   string
	}{
		{"a call", "# Task\n", Reply{ToolCalls: call, FinishReason: "tool_calls"}, "# Task\n", ""},
		{"cut at max_tokens", "# Task\n", Reply{Text: "```python\n# Task\n# copied", FinishReason: "length", Usage: agent.Usage{OutputTokens: 384}}, "# Task\n", "cut off after 384 tokens"},
		{"no start", "", Reply{Text: "```python\n#", FinishReason: "length", Usage: agent.Usage{OutputTokens: 9}}, nil, "cut off after 9 tokens"},
		{"stopped without a block", "", Reply{Text: "done", FinishReason: "stop"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent ChatRequest
			c := blockChat{chatFunc(func(req ChatRequest) Reply { sent = req; return tc.reply }), tc.start}
			rep, err := c.Reply(context.Background(), ChatRequest{Extra: map[string]any{"top_k": 5}})
			if err != nil {
				t.Fatal(err)
			}
			if got := sent.Extra["code_block_start"]; got != tc.wantStart || sent.Extra["top_k"] != 5 {
				t.Errorf("request extra %v, want code_block_start %v and top_k kept", sent.Extra, tc.wantStart)
			}
			if (tc.wantNudge == "") != (rep.Nudge == "") || !strings.Contains(rep.Nudge, tc.wantNudge) {
				t.Errorf("nudge %q, want one with %q", rep.Nudge, tc.wantNudge)
			}
		})
	}
}

package llm_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/llm"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/spec"
	"github.com/pyrualean/pyrualean/spec/spectest"
)

// TestLocalEpisode is the whole pipeline with the smallest vetted model, the way `pyrualean play
// --runtime local` runs it: llama.cpp serves the model, the production openai runtime drives a real
// kernel with the tabletop robot, and the run folder must be complete and consistent. Success is not
// required (a 135M model does not solve the task).
func TestLocalEpisode(t *testing.T) {
	nbtest.Heavy(t, "the llama.cpp model and an episode")
	root, err := agent.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	srv, err := llm.Start(ctx, llm.Options{Model: llm.TestModel, Root: root, Port: anyPort(t), Threads: 1, Install: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	out := filepath.Join(t.TempDir(), "run")
	const maxTurns = 2
	s := spectest.Tabletop(t, func(s *spec.Episode) {
		s.Task, s.Out, s.Images, s.MaxCalls, s.BudgetS = "put_block_in_bowl", out, spec.ImagesNone, maxTurns, 300
		s.Policy = spec.Policy{Runtime: "local", Model: srv.Model}
	})
	ep, err := agent.StartEpisode(ctx, s, agent.Host{Root: root})
	if err != nil {
		t.Fatalf("StartEpisode: %v", err)
	}
	temp := 0.0 // greedy: the tiny model's cells stay reproducible
	start := ep.Prompt().ReplyStart
	if start == "" {
		t.Fatal("the compact cells prompt has no ReplyStart")
	}
	pctx, pcancel := ep.Context(ctx)
	runErr := runtimes.RunOpenAI(pctx, ep, runtimes.OpenAIConfig{
		BaseURL: srv.BaseURL, APIKey: "local", Model: srv.Model, ToolChoice: "required", Temperature: &temp,
		// 700, not 300: under the prompt as it stands, greedy 135M replies write 300-token cells that close
		// only past 300 (measured: 3 of 3 replies cut, no cell ran; at 700, 5 of 5 closed).
		MaxTokens: 700, TextOnly: true,
		// The local runtime's code-block replies, opened with the episode's ReplyStart. A 135M model
		// loops on a phrase until max_tokens; DRY's penalty on repeated sequences lets it close the block.
		ExtraBody: map[string]any{"code_block_tool": "python", "code_block_start": start,
			"dry_multiplier": 2.0, "dry_allowed_length": 2, "repeat_penalty": 1.1, "seed": 7},
		MaxLLMCalls: maxTurns + 3, Backoff: 100 * time.Millisecond, PlannerRetryWait: 100 * time.Millisecond,
	})
	pcancel()
	res, err := ep.Finish(context.WithoutCancel(ctx), "", runErr)
	if err != nil {
		t.Fatalf("Finish: %v (run: %v)", err, runErr)
	}
	t.Logf("status %s, %d LLM calls, %d tool turns, %d input + %d output tokens, policy %.1f s",
		res.Status, res.Generation.Turns, res.ToolTurns, res.Generation.InputTokens, res.Generation.OutputTokens, res.PolicyWallS)

	switch res.Status {
	case agent.StatusCompleted, agent.StatusCallBudget, agent.StatusTimeout:
	default:
		t.Fatalf("status %q (error %+v, run error %v): the pipeline itself failed", res.Status, res.Error, runErr)
	}
	if res.Model != llm.TestModel || res.Runtime != "local" {
		t.Errorf("result model/runtime = %q/%q", res.Model, res.Runtime)
	}

	// result.json on disk is the result returned.
	var disk agent.Result
	readJSON(t, filepath.Join(out, "result.json"), &disk)
	if disk.Status != res.Status || disk.ToolTurns != res.ToolTurns || disk.Generation.Turns != res.Generation.Turns {
		t.Errorf("result.json %+v differs from the returned result", disk)
	}

	// turns.jsonl: one line per LLM call, each answered with a tool call (tool_choice required).
	turns := readJSONL(t, filepath.Join(out, res.Files.Turns))
	if len(turns) == 0 || len(turns) != res.Generation.Turns {
		t.Fatalf("turns.jsonl has %d lines, result.json says %d LLM calls", len(turns), res.Generation.Turns)
	}
	pythonCalls, allCalls, inTok := 0, 0, 0
	for i, tr := range turns {
		// The wall-clock budget may end the episode while a call is in flight (a reply that repeats a cell
		// is asked up to 3 more times, 700 tokens each at one thread): that last turn has no reply to check.
		if res.Status == agent.StatusTimeout && i == len(turns)-1 && strings.Contains(tr.Error, "budget exceeded") {
			t.Logf("turn %d: cut by the wall-clock budget: %s", i+1, tr.Error)
			continue
		}
		if tr.Error != "" {
			t.Errorf("turn %d: error %q", i+1, tr.Error)
		}
		if len(tr.ToolCalls) == 0 && tr.FinishReason != "length" {
			t.Errorf("turn %d: no tool call (tool_choice required must force one; finish %q): %.300s", i+1, tr.FinishReason, tr.Content)
		}
		allCalls += len(tr.ToolCalls)
		for _, name := range tr.ToolCalls {
			if name == "python" {
				pythonCalls++
			}
		}
		inTok += tr.Usage.InputTokens
		if tr.Usage.InputTokens == 0 || tr.Usage.OutputTokens == 0 {
			t.Errorf("turn %d: usage not recorded: %+v", i+1, tr.Usage)
		}
	}
	if inTok != res.Generation.InputTokens {
		t.Errorf("turns.jsonl input tokens %d != result.json %d", inTok, res.Generation.InputTokens)
	}
	if pythonCalls == 0 {
		for i, tr := range turns {
			t.Logf("turn %d: finish %q, calls %v: %.400q", i+1, tr.FinishReason, tr.ToolCalls, tr.Content)
		}
		t.Fatal("the model never called python: nothing reached the kernel")
	}

	// The model's python calls reached the kernel: one executed agent cell each in the trace.
	nb, err := notebooks.ReadFile(filepath.Join(out, res.Files.Trace))
	if err != nil {
		t.Fatal(err)
	}
	var agentCells []notebooks.Cell
	for _, c := range nb.Cells {
		if m, ok := c.Metadata["pyrualean"].(map[string]any); ok && m["author"] == "agent" && c.CellType == notebooks.CellCode {
			agentCells = append(agentCells, c)
		}
	}
	// Calls past --max-turns are refused without running, so the trace holds min(calls, budget) cells;
	// tool_turns counts every call, refused ones too, as the original does.
	if len(agentCells) != min(pythonCalls, maxTurns) || res.ToolTurns != allCalls {
		t.Fatalf("%d agent cells in the trace, %d python calls and %d tool calls in turns.jsonl, tool_turns %d", len(agentCells), pythonCalls, allCalls, res.ToolTurns)
	}
	if src := agentCells[0].Source; !strings.HasPrefix(src, start) {
		t.Errorf("the first agent cell does not open with ReplyStart %q:\n%s", start, src)
	}
	for i, c := range agentCells {
		m := c.Metadata["pyrualean"].(map[string]any)
		if c.ExecutionCount == nil && m["status"] != "error" {
			t.Errorf("agent cell %d was not executed: %+v", i, m)
		}
		if _, ok := c.Metadata["execution"]; !ok {
			t.Errorf("agent cell %d has no execution timing (did it run in the kernel?)", i)
		}
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

func readJSON(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readJSONL(t *testing.T, path string) []agent.Turn {
	t.Helper()
	turns, err := agent.ReadTurns(path)
	if err != nil {
		t.Fatal(err)
	}
	return turns
}

package runtimes

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/agentcli/scripted"
)

// newAnthropicTest is the anthropic runtime pointed at a scripted Messages API server (the one
// Claude Code's tests talk to), with short waits between retries.
func newAnthropicTest(t *testing.T, srv *scripted.Server) Runtime {
	t.Helper()
	t.Setenv("PYRUALEAN_TEST_KEY", "sk-test")
	rt, err := New("anthropic", Settings{Model: "claude-test", BaseURL: srv.URL, APIKeyEnv: "PYRUALEAN_TEST_KEY", Reasoning: "high", MaxTurns: 8})
	if err != nil {
		t.Fatal(err)
	}
	cr := rt.(*chatRuntime)
	cr.chat.(*anthropicChat).doer.backoff = time.Millisecond
	cr.loop.PlannerRetryWait = time.Millisecond
	return rt
}

// messagesBody is the part of a recorded Messages API request the test reads.
type messagesBody struct {
	OutputConfig struct{ Effort string } `json:"output_config"`
	Messages     []struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string          `json:"type"`
			ID        string          `json:"id"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		} `json:"content"`
	} `json:"messages"`
}

// checkConversation checks what the API demands of a conversation: it starts with the user, roles
// alternate, and each tool_use is answered by a tool_result at the start of the next message.
func checkConversation(b messagesBody) error {
	for i, m := range b.Messages {
		if want := []string{"user", "assistant"}[i%2]; m.Role != want {
			return fmt.Errorf("message %d: role %s, want %s", i, m.Role, want)
		}
		if m.Role != "assistant" {
			continue
		}
		n := 0
		for _, c := range m.Content {
			if c.Type != "tool_use" {
				continue
			}
			if i+1 >= len(b.Messages) {
				return nil // the reply the request asks for comes next
			}
			if next := b.Messages[i+1].Content; n >= len(next) || next[n].Type != "tool_result" || next[n].ToolUseID != c.ID {
				return fmt.Errorf("message %d: tool_use %s not answered first in the next message", i, c.ID)
			}
			n++
		}
	}
	return nil
}

// TestAnthropicSolves: the anthropic runtime solves a real episode through the Messages API: tool
// results (with their images) go back as tool_result blocks in valid alternating messages, usage
// counts cache reads as input, the effort is sent, and an overloaded API (529) is retried.
func TestAnthropicSolves(t *testing.T) {
	steps := []scripted.Step{{Fail: 529}}
	for _, a := range solution(t, "put_block_in_bowl") {
		var args map[string]any
		json.Unmarshal(a.Args, &args)
		steps = append(steps, scripted.Step{Tool: a.Tool, Args: args, Text: "Next step."})
	}
	steps = append(steps, scripted.Step{Tool: "finish", Args: map[string]any{"status": "success", "summary": "done"}})
	srv := scripted.NewMessages(steps)
	defer srv.Close()
	run := playTask(t, newAnthropicTest(t, srv), "put_block_in_bowl", nil)
	if run.err != nil || run.res.EnvironmentSuccess == nil || !*run.res.EnvironmentSuccess || run.res.Status != agent.StatusCompleted {
		t.Fatalf("run %v, result %+v", run.err, run.res)
	}
	reqs := srv.ScriptedRequests()
	turns := readTurns(t, run.dir+"/turns.jsonl")
	if len(turns) != len(reqs)-1 || turns[0].Attempts != 2 {
		t.Fatalf("%d turns (first %+v) for %d requests, one of them a 529 retried inside the call", len(turns), turns[0], len(reqs))
	}
	images := 0
	for i, r := range reqs {
		var b messagesBody
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatal(err)
		}
		if err := checkConversation(b); err != nil || b.OutputConfig.Effort != "high" {
			t.Errorf("request %d: %v, effort %q", i, err, b.OutputConfig.Effort)
		}
		for _, res := range r.Results {
			images += res.Images
		}
	}
	last := reqs[len(reqs)-1].Results
	if len(last) == 0 || last[len(last)-1].Text == "" || images == 0 {
		t.Errorf("last request's tool results %+v; %d images in tool results overall", last, images)
	}
	for _, tr := range turns {
		u := tr.Usage
		if u.Calls != 1 || u.InputTokens != 1000 || u.CachedTokens != 200 || u.OutputTokens != 50 || tr.Content != "Next step." && tr.ToolCalls[0] != "finish" {
			t.Errorf("turn %d: %+v content %q", tr.Turn, u, tr.Content)
		}
	}
}

// TestAnthropicRefusedIsFinal: a request the API refuses (400: bad model, key, image) ends the
// episode as a planner error at once, with the API's message and no retry.
func TestAnthropicRefusedIsFinal(t *testing.T) {
	srv := scripted.NewMessages([]scripted.Step{{Fail: http.StatusBadRequest}, {Tool: "finish"}})
	defer srv.Close()
	run := playTask(t, newAnthropicTest(t, srv), "put_block_in_bowl", nil)
	if !errors.Is(run.err, agent.ErrPlanner) || run.res.Status != agent.StatusPlannerError || len(srv.ScriptedRequests()) != 1 {
		t.Fatalf("run %v, status %s, %d requests; want a planner error after one request", run.err, run.res.Status, len(srv.ScriptedRequests()))
	}
	turns := readTurns(t, run.dir+"/turns.jsonl")
	if len(turns) != 1 || turns[0].Error == "" || run.res.PlannerAttempts != 1 {
		t.Errorf("turns %+v, planner attempts %d", turns, run.res.PlannerAttempts)
	}
	t.Logf("refused: %v", run.err)
}

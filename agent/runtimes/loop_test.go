package runtimes

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/spec"
	"github.com/pyrualean/pyrualean/spec/spectest"
)

// Real episodes (tabletop in a pyrualean kernel) driven by the loop through a backend's production
// client, against scripted servers that speak the backend's wire format.

// episodeRun is one finished episode.
type episodeRun struct {
	res *agent.Result
	err error // what Run returned
	dir string
}

// playTask runs rt on one tabletop episode of task (cells arm, images on-motion, unless change says
// otherwise) and finishes it.
func playTask(t *testing.T, rt Runtime, task string, change func(*spec.Episode)) episodeRun {
	t.Helper()
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := spectest.Tabletop(t, func(s *spec.Episode) {
		s.Task, s.MaxCalls, s.BudgetS, s.Images = task, 8, 180, spec.ImagesOnMotion
		s.Policy = spec.Policy{Runtime: "openai", Model: rt.Model()}
		if change != nil {
			change(s)
		}
	})
	ep, err := agent.StartEpisode(ctx, s, agent.Host{})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := ep.Context(ctx)
	runErr := rt.Run(pctx, ep)
	pcancel()
	res, err := ep.Finish(context.WithoutCancel(ctx), "", runErr)
	if err != nil {
		t.Fatalf("Finish: %v (run: %v)", err, runErr)
	}
	return episodeRun{res: res, err: runErr, dir: s.Out}
}

// skipShort skips a test that boots real episodes or a model server under the fast tier (go test -short).
func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a real episode (kernel, MuJoCo) or model server: not in the fast tier")
	}
}

// solution is the task's reference solution as python calls (robotapi/solutions/tabletop).
func solution(t *testing.T, task string) []Action {
	t.Helper()
	skipShort(t)
	root, err := agent.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	acts, err := LoadActions(filepath.Join(root, "robotapi", "solutions", "tabletop", task+".py"), spec.ArmCells)
	if err != nil {
		t.Fatal(err)
	}
	return acts
}

const finishArgs = `{"status":"success","summary":"done"}`

// TestOpenAITokensAndEffort: with RecordTokens the openai runtime asks for logprobs (and vLLM's
// token ids, through the extra body), sends the reasoning effort, and writes one tokens.jsonl line
// per LLM call with the ids, strings and logprobs the server returned; without it, the requests
// carry no token fields and no file is written.
func TestOpenAITokensAndEffort(t *testing.T) {
	for _, record := range []bool{true, false} {
		acts := solution(t, "put_block_in_bowl")
		var steps []openaitest.Step
		for _, a := range acts {
			steps = append(steps, openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: a.Tool, Arguments: string(a.Args)}}}})
		}
		steps = append(steps, openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "finish", Arguments: finishArgs}}}})
		srv := openaitest.New(steps...)
		defer srv.Close()
		t.Setenv("PYRUALEAN_TEST_KEY", "k")
		rt, err := New("openai", Settings{Model: "scripted", BaseURL: srv.BaseURL(), APIKeyEnv: "PYRUALEAN_TEST_KEY",
			Reasoning: "high", RecordTokens: record, OpenAI: OpenAIOptions{ExtraBody: map[string]any{"return_token_ids": true}}})
		if err != nil {
			t.Fatal(err)
		}
		run := playTask(t, rt, "put_block_in_bowl", nil)
		if run.err != nil || run.res.EnvironmentSuccess == nil || !*run.res.EnvironmentSuccess {
			t.Fatalf("record=%v: run %v, result %+v", record, run.err, run.res)
		}
		reqs := srv.Requests()
		for i, r := range reqs {
			_, hasLogprobs := r.Body["logprobs"]
			if r.Body["reasoning_effort"] != "high" || hasLogprobs != record || (record && r.Body["top_logprobs"] != json.Number("1")) {
				t.Errorf("record=%v: request %d: reasoning_effort %v logprobs %v top_logprobs %v", record, i, r.Body["reasoning_effort"], r.Body["logprobs"], r.Body["top_logprobs"])
			}
		}
		if _, err := os.Stat(filepath.Join(run.dir, TokensFile)); !record {
			if err == nil {
				t.Errorf("no --record-tokens, yet %s was written", TokensFile)
			}
			continue
		}
		turns := readTurns(t, filepath.Join(run.dir, "turns.jsonl"))
		lines, err := ReadTokens(filepath.Join(run.dir, TokensFile))
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) != len(turns) || len(lines) != len(reqs) {
			t.Fatalf("%d token lines, %d turns, %d requests", len(lines), len(turns), len(reqs))
		}
		t.Logf("tokens.jsonl line 1: %d ids %v..., tokens %q..., logprobs %v...", len(lines[0].CompletionIDs),
			lines[0].CompletionIDs[:3], lines[0].Completion[:3], lines[0].CompletionLogprobs[:3])
		for i, l := range lines {
			text := strings.Join(l.Completion, "")
			if l.Turn != turns[i].Turn || len(l.CompletionIDs) != len(l.Completion) || len(l.CompletionLogprobs) != len(l.Completion) ||
				!strings.HasPrefix(text, turns[i].ToolCalls[0]) || len(l.PromptIDs) != turns[i].Usage.InputTokens {
				t.Errorf("line %d: turn %d (want %d), %d ids, %d tokens %q, %d logprobs, %d prompt ids (usage %d)", i, l.Turn, turns[i].Turn,
					len(l.CompletionIDs), len(l.Completion), text, len(l.CompletionLogprobs), len(l.PromptIDs), turns[i].Usage.InputTokens)
				continue
			}
			for j, tok := range l.Completion {
				if l.CompletionIDs[j] != openaitest.TokenID(tok) || l.CompletionLogprobs[j] > 0 {
					t.Errorf("line %d token %d %q: id %d logprob %g", i, j, tok, l.CompletionIDs[j], l.CompletionLogprobs[j])
				}
			}
		}
	}
}

func TestParseTokens(t *testing.T) {
	lp := func(f float64) *float64 { return &f }
	cases := []struct {
		name, body string
		want       *Tokens
	}{
		{"openai strings", `{"choices":[{"logprobs":{"content":[{"token":"Hi","logprob":-0.5,"bytes":[72,105]}]}}]}`,
			&Tokens{Completion: []string{"Hi"}, CompletionLogprobs: []float64{-0.5}}},
		{"llama.cpp ids", `{"choices":[{"logprobs":{"content":[{"id":7,"token":"a","logprob":-1},{"id":9,"token":"b","logprob":0}]}}]}`,
			&Tokens{CompletionIDs: []int{7, 9}, Completion: []string{"a", "b"}, CompletionLogprobs: []float64{-1, 0}}},
		{"vllm token_id strings", `{"choices":[{"logprobs":{"content":[{"token":"token_id:42","logprob":-2}]}}]}`,
			&Tokens{CompletionIDs: []int{42}, Completion: []string{"token_id:42"}, CompletionLogprobs: []float64{-2}}},
		{"vllm return_token_ids and prompt_logprobs", `{"prompt_token_ids":[1,5],"prompt_logprobs":[null,{"5":{"logprob":-3,"rank":1,"decoded_token":"x"},"6":{"logprob":-4}}],
			"choices":[{"token_ids":[3],"logprobs":{"content":[{"token":"y","logprob":-0.1}]}}]}`,
			&Tokens{CompletionIDs: []int{3}, Completion: []string{"y"}, CompletionLogprobs: []float64{-0.1},
				PromptIDs: []int{1, 5}, Prompt: []string{"", "x"}, PromptLogprobs: []*float64{nil, lp(-3)}}},
		{"none", `{"choices":[{"message":{"content":"x"},"logprobs":null}]}`, nil},
		{"garbage", `not json`, nil},
	}
	for _, c := range cases {
		got, _ := json.Marshal(parseTokens([]byte(c.body)))
		want, _ := json.Marshal(c.want)
		if string(got) != string(want) {
			t.Errorf("%s: %s, want %s", c.name, got, want)
		}
	}
}

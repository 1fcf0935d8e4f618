package runtimes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/pyrualean/pyrualean/agent"
)

func TestParseRawCompletion(t *testing.T) {
	cases := []struct {
		name, body    string
		want          agent.Usage
		wantReasoning string
	}{
		{"openai details", `{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":7}}}`,
			agent.Usage{Calls: 1, InputTokens: 100, CachedTokens: 64, OutputTokens: 20, ReasoningTokens: 7}, ""},
		{"sglang top-level reasoning", `{"choices":[{"message":{"reasoning_content":"think"}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"reasoning_tokens":3}}`,
			agent.Usage{Calls: 1, InputTokens: 10, OutputTokens: 5, ReasoningTokens: 3}, "think"},
		{"vllm reasoning key", `{"choices":[{"message":{"reasoning":"hmm"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
			agent.Usage{Calls: 1, InputTokens: 1, OutputTokens: 1}, "hmm"},
		{"llama.cpp timings", `{"choices":[{"message":{}}],"usage":{"prompt_tokens":50,"completion_tokens":2},"timings":{"cache_n":40}}`,
			agent.Usage{Calls: 1, InputTokens: 50, CachedTokens: 40, OutputTokens: 2}, ""},
		{"ollama minimal", `{"choices":[{"message":{}}],"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11}}`,
			agent.Usage{Calls: 1, InputTokens: 5, OutputTokens: 6}, ""},
		{"garbage", `not json`, agent.Usage{}, ""},
	}
	for _, c := range cases {
		u, r, _ := parseRawCompletion([]byte(c.body))
		if u != c.want || r != c.wantReasoning {
			t.Errorf("%s: %+v %q, want %+v %q", c.name, u, r, c.want, c.wantReasoning)
		}
	}
}

// TestProviderDoer exercises the HTTP layer against a real server: extra body merge, retries with
// Retry-After, no retry on 400, and transport failures.
func TestProviderDoer(t *testing.T) {
	var hits atomic.Int32
	var lastBody atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		lastBody.Store(string(b))
		switch {
		case r.URL.Path == "/bad":
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"bad"}}`)
		case n <= 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(429)
		default:
			io.WriteString(w, `{"ok":true}`)
		}
	}))
	defer srv.Close()
	d := &providerDoer{client: srv.Client(), extra: map[string]any{"top_k": 5, "temperature": 0.0}, attempts: 4,
		backoff: time.Millisecond, maxBackoff: 5 * time.Millisecond, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	// The request's own extra (ChatRequest.Extra) goes on after the doer's, and wins.
	sink := &rawSink{Extra: map[string]any{"top_k": 7, "code_block_start": "# go\n"}}
	req, _ := http.NewRequestWithContext(withRawSink(context.Background(), sink), "POST", srv.URL+"/v1", strings.NewReader(`{"model":"m","temperature":0.7}`))
	resp, err := d.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != `{"ok":true}` || sink.Attempts != 3 || string(sink.Body) != `{"ok":true}` {
		t.Errorf("status %d body %s attempts %d", resp.StatusCode, body, sink.Attempts)
	}
	var sent map[string]any
	json.Unmarshal([]byte(lastBody.Load().(string)), &sent)
	if sent["top_k"] != 7.0 || sent["temperature"] != 0.0 || sent["model"] != "m" || sent["code_block_start"] != "# go\n" {
		t.Errorf("body on the wire = %v", sent)
	}
	// The sampler's fields are read from the body as sent: the doer's temperature won over the client's.
	if sp := sink.Sampling; sp == nil || sp.Temperature == nil || *sp.Temperature != 0 || sp.Seed != nil {
		t.Errorf("sampling recorded %+v, want temperature 0 and no seed", sp)
	}
	hits.Store(10)
	req, _ = http.NewRequest("POST", srv.URL+"/bad", strings.NewReader(`{}`))
	before := hits.Load()
	resp, err = d.Do(req)
	if err != nil || resp.StatusCode != 400 || hits.Load()-before != 1 {
		t.Errorf("400: err %v status %v hits %d (want one attempt)", err, resp, hits.Load()-before)
	}
	srv.Close()
	req, _ = http.NewRequest("POST", srv.URL+"/v1", strings.NewReader(`{}`))
	if _, err := d.Do(req); err == nil || !strings.Contains(err.Error(), "after 4 attempts") {
		t.Errorf("closed server: %v", err)
	}
	req, _ = http.NewRequest("POST", "http://x", strings.NewReader(`[1]`))
	if _, err := d.Do(req); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("non-object body with extras: %v", err)
	}
}
func TestSamplingOf(t *testing.T) {
	f, i := func(v float64) *float64 { return &v }, func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name, body string
		want       *agent.Sampling
	}{
		{"all", `{"temperature":0.2,"top_p":0.9,"seed":1,"max_tokens":512,"messages":[]}`,
			&agent.Sampling{Temperature: f(0.2), TopP: f(0.9), Seed: i(1), MaxTokens: 512}},
		{"temperature 0 is kept", `{"temperature":0}`, &agent.Sampling{Temperature: f(0)}},
		{"max_completion_tokens", `{"max_completion_tokens":64}`, &agent.Sampling{MaxTokens: 64}},
		{"mistyped fields left out", `{"seed":"7","temperature":"hot","top_p":null,"max_tokens":1.5}`, &agent.Sampling{}},
		{"fractional seed", `{"seed":1.5,"temperature":1}`, &agent.Sampling{Temperature: f(1)}},
		{"none sent", `{"model":"m"}`, &agent.Sampling{}},
		{"not an object", `[1]`, nil},
		{"not JSON", `{`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := samplingOf([]byte(tc.body))
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tc.want)
			if string(gb) != string(wb) {
				t.Errorf("samplingOf(%s) = %s, want %s", tc.body, gb, wb)
			}
		})
	}
}

func TestDropOldImages(t *testing.T) {
	img := func() Part { return Part{Image: &agent.Image{Name: "cam", PNG: []byte{0}}} }
	txt := func(s string) Part { return Part{Text: s} }
	msgs := []Message{
		{Role: RoleUser, Parts: []Part{txt("prompt"), img(), img()}},
		{Role: RoleAssistant, Parts: []Part{txt("x")}},
		{Role: RoleUser, Parts: []Part{txt("call 1"), img(), img()}},
		{Role: RoleUser, Parts: []Part{txt("call 2"), img(), img()}},
	}
	dropOldImages(msgs, 3)
	if n := countImages(msgs); n != 3 {
		t.Fatalf("%d images kept", n)
	}
	if p := msgs[0].Parts; len(p) != 2 || p[1].Text != droppedImageNote {
		t.Errorf("first message parts %+v", p)
	}
	if p := msgs[2].Parts; len(p) != 3 || p[1].Text != droppedImageNote || p[2].Image == nil {
		t.Errorf("call 1 parts %+v", p)
	}
}

// BenchmarkOpenAIRequest measures what the neutral history adds per LLM call: lowering a long
// history (40 tool turns, 20 images of 64 KB) to go-openai messages, beside the JSON encoding of the
// request that every call made before the split too (the anchor).
func BenchmarkOpenAIRequest(b *testing.B) {
	png := make([]byte, 64<<10)
	msgs := []Message{{Role: RoleUser, Parts: textParts(strings.Repeat("prompt ", 2000))}}
	for i := range 40 {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs, Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: id, Name: "python", Arguments: `{"code":"robo.move_to([0.1,0.2,0.3])"}`}}},
			Message{Role: RoleTool, ToolCallID: id, Parts: textParts(strings.Repeat("feedback ", 100))})
		if i%2 == 0 {
			msgs = append(msgs, Message{Role: RoleUser, Parts: []Part{{Text: "Images from " + id}, imagePart(&agent.Image{Name: "cam", PNG: png})}})
		}
	}
	lowered := openaiMessages(msgs)
	b.Run("lower", func(b *testing.B) {
		for b.Loop() {
			openaiMessages(msgs)
		}
	})
	b.Run("anchor-encode", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(openai.ChatCompletionRequest{Model: "m", Messages: lowered})
		}
	})
}

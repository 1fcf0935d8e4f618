package tokenbench

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/agent/tokencount"
)

// toolCall is one scripted reply: the model calls Name with Arguments (JSON).
type toolCall struct{ Name, Arguments string }

// endpoint is the benchmark's model: an OpenAI-compatible chat completions server on loopback that
// answers each request with the next scripted tool call and bills its input with a real tokenizer
// (tokencount.ChatRequest, prefix cache included), so what is measured is what the production openai
// runtime sends.
type endpoint struct {
	counter *tokencount.Counter
	srv     *http.Server
	ln      net.Listener

	mu    sync.Mutex
	calls []toolCall
	next  int
	prev  []string // the previous request's messages, for the prefix cache
}

func startEndpoint(counter *tokencount.Counter, calls []toolCall) (*endpoint, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tokenbench endpoint: %w", err)
	}
	e := &endpoint{counter: counter, calls: calls, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", e.chat)
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go e.srv.Serve(ln)
	return e, nil
}

func (e *endpoint) baseURL() string { return "http://" + e.ln.Addr().String() + "/v1" }
func (e *endpoint) close()          { e.srv.Close() }

func (e *endpoint) chat(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "body is not JSON: " + err.Error(), "type": "invalid_request_error"}})
		return
	}
	e.mu.Lock()
	if e.next >= len(e.calls) {
		e.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": fmt.Sprintf("script exhausted after %d replies", len(e.calls)), "type": "invalid_request_error"}})
		return
	}
	tc := e.calls[e.next]
	e.next++
	n := e.next
	prompt, cached, cur := tokencount.ChatRequest(e.counter, body, e.prev)
	e.prev = cur
	e.mu.Unlock()
	completion := e.counter.Count(tc.Name) + e.counter.Count(tc.Arguments) + 3
	model, _ := body["model"].(string)
	writeJSON(w, http.StatusOK, map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
			"role": "assistant", "content": nil,
			"tool_calls": []any{map[string]any{"id": fmt.Sprintf("call_%d_0", n), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}}},
		}}},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
			"prompt_tokens_details": map[string]any{"cached_tokens": cached}},
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// Package openaitest is a scripted OpenAI-compatible chat completions server for tests and token
// benchmarks. It speaks the real wire format over real HTTP (tool_calls, usage with
// prompt_tokens_details.cached_tokens and completion_tokens_details.reasoning_tokens, reasoning text,
// error bodies, token logprobs when asked) and replays a script of replies, recording every request
// it received, so the code under test is the production client end to end.
package openaitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/agent/tokencount"
)

// ToolCall is one function call the scripted model makes.
type ToolCall struct {
	Name      string
	Arguments string // sent verbatim, so tests can send malformed JSON
}

// Reply is one scripted assistant message.
type Reply struct {
	Content      string
	Reasoning    string
	ReasoningKey string // "reasoning_content" (default) or "reasoning" (vLLM, Ollama)
	ToolCalls    []ToolCall
	// TopLevelReasoningTokens puts reasoning_tokens at the top of usage (SGLang) instead of in
	// completion_tokens_details.
	TopLevelReasoningTokens bool
}

// Step is one scripted response: an HTTP error status (with an OpenAI error body), a fixed reply,
// or a reply computed from the request.
type Step struct {
	Status int           // non-zero, non-200: answer with this status and an error body
	Delay  time.Duration // wait before answering (to exceed a client's deadline)
	Hangup bool          // close the connection without answering (a reset)
	Reply  Reply
	Func   func(req Request) Reply // when set, computes the reply
}

// Request is one received chat completion request.
type Request struct {
	Raw  []byte
	Body map[string]any
}

// Messages returns the request's messages as generic JSON objects.
func (r Request) Messages() []map[string]any {
	ms, _ := r.Body["messages"].([]any)
	out := make([]map[string]any, 0, len(ms))
	for _, m := range ms {
		if mm, ok := m.(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

// Counter counts tokens of text and images; the zero Server uses ~4 characters per token.
type Counter interface {
	Count(text string) int
	CountImage(pngBytes []byte) int
}

// Server is a scripted OpenAI-compatible endpoint. Its URL plus "/v1" is a base URL for clients.
type Server struct {
	*httptest.Server
	Counter Counter

	mu       sync.Mutex
	script   []Step
	next     int
	requests []Request
	prevMsgs []string // the previous request's messages, serialised, for prefix-cache accounting
	calls    int
}

// New starts a server that answers with the script in order.
func New(script ...Step) *Server {
	s := &Server{script: script}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"object": "list", "data": []any{map[string]any{"id": "scripted", "object": "model", "owned_by": "openaitest"}}})
	})
	s.Server = httptest.NewServer(mux)
	return s
}

// BaseURL is the OpenAI base URL (…/v1).
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Append adds steps to the script.
func (s *Server) Append(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, steps...)
}

// Requests returns every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Remaining is how many scripted steps have not been served.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script) - s.next
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, msg, typ string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		apiError(w, 400, "cannot read body: "+err.Error(), "invalid_request_error")
		return
	}
	var body map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		apiError(w, 400, "body is not JSON: "+err.Error(), "invalid_request_error")
		return
	}
	req := Request{Raw: raw, Body: body}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	if s.next >= len(s.script) {
		s.mu.Unlock()
		apiError(w, 400, fmt.Sprintf("openaitest: script exhausted after %d steps", len(s.script)), "invalid_request_error")
		return
	}
	step := s.script[s.next]
	s.next++
	s.mu.Unlock()

	if step.Hangup {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	if step.Delay > 0 {
		select {
		case <-time.After(step.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if step.Status != 0 && step.Status != 200 {
		if step.Status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		apiError(w, step.Status, fmt.Sprintf("scripted failure (HTTP %d)", step.Status), "server_error")
		return
	}
	if err := validate(body); err != nil {
		apiError(w, 400, err.Error(), "invalid_request_error")
		return
	}
	reply := step.Reply
	if step.Func != nil {
		reply = step.Func(req)
	}
	writeJSON(w, 200, s.completion(body, reply))
}

// validate rejects what real servers reject, so client mistakes surface in tests.
func validate(body map[string]any) error {
	msgs, ok := body["messages"].([]any)
	if !ok || len(msgs) == 0 {
		return fmt.Errorf("messages: required")
	}
	pending := map[string]bool{}
	for i, m := range msgs {
		mm, _ := m.(map[string]any)
		role, _ := mm["role"].(string)
		switch role {
		case "assistant":
			if len(pending) > 0 {
				return fmt.Errorf("messages[%d]: assistant message before tool results for %v", i, keys(pending))
			}
			tcs, _ := mm["tool_calls"].([]any)
			for _, tc := range tcs {
				t, _ := tc.(map[string]any)
				id, _ := t["id"].(string)
				pending[id] = true
			}
		case "tool":
			id, _ := mm["tool_call_id"].(string)
			if !pending[id] {
				return fmt.Errorf("messages[%d]: tool message for unknown tool_call_id %q", i, id)
			}
			delete(pending, id)
			if _, isString := mm["content"].(string); !isString {
				// OpenAI: "Image URLs are only allowed for messages with role 'user'".
				return fmt.Errorf("messages[%d]: tool message content must be a string here", i)
			}
		case "user", "system":
			if len(pending) > 0 {
				return fmt.Errorf("messages[%d]: %s message before tool results for %v", i, role, keys(pending))
			}
		default:
			return fmt.Errorf("messages[%d]: unknown role %q", i, role)
		}
	}
	return nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (s *Server) completion(body map[string]any, reply Reply) map[string]any {
	s.mu.Lock()
	s.calls++
	n := s.calls
	prompt, cached, cur := s.promptTokens(body)
	s.prevMsgs = cur
	s.mu.Unlock()

	msg := map[string]any{"role": "assistant", "content": nil}
	if reply.Content != "" {
		msg["content"] = reply.Content
	}
	completion := s.count(reply.Content)
	var reasoningTokens int
	if reply.Reasoning != "" {
		key := reply.ReasoningKey
		if key == "" {
			key = "reasoning_content"
		}
		msg[key] = reply.Reasoning
		reasoningTokens = s.count(reply.Reasoning)
		completion += reasoningTokens
	}
	finish := "stop"
	if len(reply.ToolCalls) > 0 {
		finish = "tool_calls"
		var tcs []any
		for i, tc := range reply.ToolCalls {
			tcs = append(tcs, map[string]any{
				"id": fmt.Sprintf("call_%d_%d", n, i), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments},
			})
			completion += s.count(tc.Name) + s.count(tc.Arguments) + 3
		}
		msg["tool_calls"] = tcs
	}
	usage := map[string]any{
		"prompt_tokens":         prompt,
		"completion_tokens":     completion,
		"total_tokens":          prompt + completion,
		"prompt_tokens_details": map[string]any{"cached_tokens": cached},
	}
	if reply.TopLevelReasoningTokens {
		usage["reasoning_tokens"] = reasoningTokens
	} else {
		usage["completion_tokens_details"] = map[string]any{"reasoning_tokens": reasoningTokens}
	}
	model, _ := body["model"].(string)
	choice := map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}
	out := map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": time.Now().Unix(),
		"model": model, "system_fingerprint": "openaitest", "choices": []any{choice}, "usage": usage,
	}
	addTokens(body, reply, prompt, choice, out)
	return out
}

// addTokens answers the token-level fields a request asks for: logprobs (OpenAI's logprobs.content,
// over the reply's text and its calls' names and arguments as a vLLM server generates them) and
// vLLM's return_token_ids (choice token_ids, prompt_token_ids). A token is up to 4 bytes of the
// text; its id and logprob are derived from it, so they are the same on every run.
func addTokens(body map[string]any, reply Reply, promptTokens int, choice, out map[string]any) {
	text := reply.Content
	for _, tc := range reply.ToolCalls {
		text += tc.Name + tc.Arguments
	}
	var content []any
	var ids []int
	for i := 0; i < len(text); i += 4 {
		tok := text[i:min(i+4, len(text))]
		id := TokenID(tok)
		ids = append(ids, id)
		var b []int
		for _, c := range []byte(tok) {
			b = append(b, int(c))
		}
		content = append(content, map[string]any{"token": tok, "logprob": -float64(id%97) / 100,
			"bytes": b, "top_logprobs": []any{}})
	}
	if body["logprobs"] == true {
		choice["logprobs"] = map[string]any{"content": content}
	}
	if body["return_token_ids"] == true {
		choice["token_ids"] = ids
		prompt := make([]int, promptTokens)
		for i := range prompt {
			prompt[i] = i + 1
		}
		out["prompt_token_ids"] = prompt
	}
}

// TokenID is the id the server gives a token.
func TokenID(tok string) int {
	h := 0
	for _, c := range []byte(tok) {
		h = (h*31 + int(c)) % 49999
	}
	return h + 1
}

func (s *Server) count(text string) int {
	if text == "" {
		return 0
	}
	if s.Counter != nil {
		return s.Counter.Count(text)
	}
	return (len(text) + 3) / 4
}

func (s *Server) countImage(b []byte) int {
	if s.Counter != nil {
		return s.Counter.CountImage(b)
	}
	return tokencount.ImageTokens(b)
}

// promptTokens counts the request's input (tokencount.ChatRequest) against the previous request.
func (s *Server) promptTokens(body map[string]any) (total, cached int, cur []string) {
	return tokencount.ChatRequest(serverCounter{s}, body, s.prevMsgs)
}

// serverCounter counts with the Server's Counter, or ~4 characters per token without one.
type serverCounter struct{ s *Server }

func (c serverCounter) Count(text string) int          { return c.s.count(text) }
func (c serverCounter) CountImage(pngBytes []byte) int { return c.s.countImage(pngBytes) }

package scripted

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// NewMessages starts an Anthropic Messages API server (POST /v1/messages, SSE when stream is true)
// answering from steps. Point Claude Code at it with ANTHROPIC_BASE_URL=URL.
func NewMessages(steps []Step) *Server {
	return newServer(steps, func(s *Server) http.Handler {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/messages", s.messages)
		mux.HandleFunc("POST /v1/messages/count_tokens", func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			s.record(Request{Path: "POST /v1/messages/count_tokens", Step: -1})
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"input_tokens":1000}`)
		})
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			s.record(Request{Path: r.Method + " " + r.URL.Path, Step: -1})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"type":"error","error":{"type":"not_found_error","message":"not scripted"}}`)
		})
		return mux
	})
}

type messagesRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// messagesResults extracts tool_result blocks from user messages.
func messagesResults(req messagesRequest) []ToolResult {
	var out []ToolResult
	for _, m := range req.Messages {
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			IsError   bool            `json:"is_error"`
			Content   json.RawMessage `json:"content"`
		}
		if m.Role != "user" || json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			tr := ToolResult{CallID: b.ToolUseID, IsError: b.IsError}
			var s string
			if json.Unmarshal(b.Content, &s) == nil {
				tr.Text = s
			} else {
				var parts []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				}
				json.Unmarshal(b.Content, &parts)
				for _, p := range parts {
					switch p.Type {
					case "text":
						tr.Text += p.Text
					case "image":
						tr.Images++
					}
				}
			}
			out = append(out, tr)
		}
	}
	return out
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	var tools []string
	for _, t := range req.Tools {
		tools = append(tools, t.Name)
	}
	i, step, ok := s.take(tools)
	s.record(Request{Path: "POST /v1/messages", Body: body, Tools: tools, Results: messagesResults(req),
		Step: i, Scripted: ok, UserAgent: r.UserAgent()})
	if !ok {
		step = Step{Text: "done", Usage: Usage{Input: 10, Output: 1}}
	}
	if step.Delay > 0 {
		select {
		case <-time.After(step.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if step.Fail != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(step.Fail)
		json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": failMessage}})
		return
	}
	u := step.Usage.orDefault()
	msgID := s.newCallID("msg_")
	var blocks []map[string]any
	if step.Text != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": step.Text})
	}
	stop := "end_turn"
	if step.Tool != "" {
		name := resolveTool(tools, step.Tool)
		if name == "" {
			name = step.Tool
		}
		var input any = step.Args
		if step.Args == nil {
			input = map[string]any{}
		}
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": s.newCallID("toolu_"), "name": name, "input": input})
		stop = "tool_use"
	}
	// Anthropic reports input_tokens without the cached part; cache reads/writes are separate fields.
	usage := map[string]any{"input_tokens": u.Input - u.Cached - u.CacheWrite, "output_tokens": u.Output,
		"cache_read_input_tokens": u.Cached, "cache_creation_input_tokens": u.CacheWrite}
	message := map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
		"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(message)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	start := map[string]any{}
	for k, v := range message {
		start[k] = v
	}
	start["content"] = []any{}
	start["stop_reason"] = nil
	start["usage"] = map[string]any{"input_tokens": usage["input_tokens"], "output_tokens": 1,
		"cache_read_input_tokens": u.Cached, "cache_creation_input_tokens": u.CacheWrite}
	sse(w, "message_start", map[string]any{"type": "message_start", "message": start})
	for idx, b := range blocks {
		switch b["type"] {
		case "text":
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx,
				"content_block": map[string]any{"type": "text", "text": ""}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		case "tool_use":
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": mustJSON(b["input"])}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": u.Output}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

package scripted

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// NewResponses starts an OpenAI Responses API server (POST /v1/responses, stream: true) answering from
// steps. Point Codex at URL+"/v1" with wire_api="responses".
func NewResponses(steps []Step) *Server {
	return newServer(steps, func(s *Server) http.Handler {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/responses", s.responses)
		mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"object":"list","data":[{"id":"scripted","object":"model","owned_by":"test"}]}`)
		})
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			s.record(Request{Path: r.Method + " " + r.URL.Path, Step: -1})
			http.Error(w, `{"error":{"message":"not scripted"}}`, http.StatusNotFound)
		})
		return mux
	})
}

type responsesRequest struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Tools  []json.RawMessage `json:"tools"`
	Input  []json.RawMessage `json:"input"`
}

// responsesToolNames lists function tools, those nested in namespaces as "<namespace>__<name>", and
// maps each nested name to its namespace.
func responsesToolNames(raw []json.RawMessage) ([]string, map[string]string) {
	var names []string
	namespaces := map[string]string{}
	for _, t := range raw {
		var tool struct {
			Type  string            `json:"type"`
			Name  string            `json:"name"`
			Tools []json.RawMessage `json:"tools"`
		}
		if json.Unmarshal(t, &tool) != nil {
			continue
		}
		if tool.Name != "" {
			names = append(names, tool.Name)
		}
		subs, _ := responsesToolNames(tool.Tools)
		for _, sub := range subs {
			names = append(names, tool.Name+"__"+sub)
			namespaces[tool.Name+"__"+sub] = tool.Name
		}
	}
	return names, namespaces
}

// responsesResults extracts function_call_output items. Codex sends MCP results either as a string or as
// a list of input_text / input_image parts.
func responsesResults(input []json.RawMessage) []ToolResult {
	var out []ToolResult
	for _, it := range input {
		var item struct {
			Type   string          `json:"type"`
			CallID string          `json:"call_id"`
			Output json.RawMessage `json:"output"`
		}
		if json.Unmarshal(it, &item) != nil || item.Type != "function_call_output" {
			continue
		}
		tr := ToolResult{CallID: item.CallID}
		var s string
		if json.Unmarshal(item.Output, &s) == nil {
			tr.Text = s
		} else {
			var parts []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				ImageURL string `json:"image_url"`
			}
			if json.Unmarshal(item.Output, &parts) == nil {
				for _, p := range parts {
					switch p.Type {
					case "input_text", "output_text", "text":
						tr.Text += p.Text
					case "input_image", "image":
						tr.Images++
					}
				}
			} else {
				var obj struct {
					Content json.RawMessage `json:"content"`
					Success *bool           `json:"success"`
				}
				if json.Unmarshal(item.Output, &obj) == nil {
					tr.Text = string(obj.Content)
					tr.IsError = obj.Success != nil && !*obj.Success
				}
			}
		}
		out = append(out, tr)
	}
	return out
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	tools, namespaces := responsesToolNames(req.Tools)
	i, step, ok := s.take(tools)
	s.record(Request{Path: "POST /v1/responses", Body: body, Tools: tools, Results: responsesResults(req.Input),
		Step: i, Scripted: ok, UserAgent: r.UserAgent()})
	if !ok {
		step = Step{Text: "done"}
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
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": failMessage, "type": "invalid_request_error", "code": nil}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	respID := s.newCallID("resp_")
	resp := map[string]any{"id": respID, "object": "response", "created_at": time.Now().Unix(),
		"status": "in_progress", "model": req.Model, "output": []any{}}
	sse(w, "response.created", map[string]any{"type": "response.created", "response": resp})
	var items []map[string]any
	if step.Text != "" {
		items = append(items, map[string]any{"type": "message", "id": s.newCallID("msg_"), "role": "assistant",
			"status": "completed", "content": []any{map[string]any{"type": "output_text", "text": step.Text, "annotations": []any{}}}})
	}
	if step.Tool != "" {
		name := resolveTool(tools, step.Tool)
		if name == "" {
			name = step.Tool
		}
		call := map[string]any{"type": "function_call", "id": s.newCallID("fc_"),
			"call_id": s.newCallID("call_"), "name": name, "arguments": mustJSON(step.Args), "status": "completed"}
		// A tool inside a namespace (Codex groups each MCP server's tools as "mcp__<server>") is called
		// by its own name plus the namespace.
		if ns, ok := namespaces[name]; ok {
			call["name"] = name[len(ns)+2:]
			call["namespace"] = ns
		}
		items = append(items, call)
	}
	for idx, item := range items {
		sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": idx, "item": item})
		if item["type"] == "message" {
			sse(w, "response.output_text.delta", map[string]any{"type": "response.output_text.delta", "output_index": idx,
				"item_id": item["id"], "content_index": 0, "delta": step.Text})
		}
		sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": idx, "item": item})
	}
	u := step.Usage.orDefault()
	resp["status"] = "completed"
	resp["output"] = items
	resp["usage"] = map[string]any{
		"input_tokens": u.Input, "input_tokens_details": map[string]any{"cached_tokens": u.Cached},
		"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning},
		"total_tokens": u.Input + u.Output,
	}
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": resp})
}

package runtimes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/pyrualean/pyrualean/agent/agentcli"
)

// anthropicChat is the Chat of the Anthropic Messages API (POST /v1/messages, not streamed), over the
// provider doer (retries, backoff, per-attempt deadline). The reply's content blocks go back to the
// model as they came (Reply.Raw), so thinking blocks keep their signatures.
type anthropicChat struct {
	url, key, model string
	maxTokens       int
	toolChoice      string // auto, required, none
	effort          string // output_config.effort
	doer            *providerDoer
}

// anthropicVersion is the API version header the request format follows.
const anthropicVersion = "2023-06-01"

func newAnthropic(s Settings) (Runtime, error) {
	if err := checkChatOptions(s.OpenAI); err != nil {
		return nil, err
	}
	model := s.Model
	if model == "" {
		model = os.Getenv("ANTHROPIC_MODEL")
	}
	if model == "" {
		return nil, fmt.Errorf("--model: the anthropic runtime has no default model: name one (or set $ANTHROPIC_MODEL)")
	}
	base, err := baseURL(s.BaseURL, "ANTHROPIC_BASE_URL", "https://api.anthropic.com")
	if err != nil {
		return nil, err
	}
	extra := map[string]any{}
	for k, v := range s.OpenAI.ExtraBody {
		extra[k] = v
	}
	if t := s.OpenAI.Temperature; t != nil {
		extra["temperature"] = *t
	}
	if _, set := extra["output_config"]; s.Reasoning != "" && !set {
		extra["output_config"] = map[string]any{"effort": s.Reasoning}
	}
	c := &anthropicChat{url: strings.TrimRight(base, "/") + "/v1/messages", key: os.Getenv(keyEnv(s, "ANTHROPIC_API_KEY")),
		model: model, maxTokens: s.OpenAI.MaxTokens, toolChoice: s.OpenAI.ToolChoice, effort: s.Reasoning,
		doer: newProviderDoer(s.HTTPClient, extra, httpPolicy{}, s.Logger)}
	if c.maxTokens == 0 {
		c.maxTokens = 8192 // the API requires a ceiling
	}
	loop := loopSettings(s, model)
	loop.ImagesInToolMessages = true // the Messages API takes images in tool results
	return &chatRuntime{chat: c, loop: loop}, nil
}

func (c *anthropicChat) Reply(ctx context.Context, req ChatRequest) (Reply, error) {
	body, err := json.Marshal(c.request(req))
	if err != nil {
		return Reply{}, fmt.Errorf("anthropic request: %w", err)
	}
	sink := &rawSink{}
	hreq, err := http.NewRequestWithContext(withRawSink(ctx, sink), http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("X-Api-Key", c.key)
	hreq.Header.Set("Anthropic-Version", anthropicVersion)
	resp, err := c.doer.Do(hreq)
	r := Reply{Attempts: sink.Attempts, Effort: c.effort}
	if err != nil {
		return r, Retryable(err) // the network, after the doer's retries
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return r, Retryable(err)
	case resp.StatusCode != http.StatusOK:
		err := fmt.Errorf("anthropic: HTTP %d: %s", resp.StatusCode, anthropicError(raw))
		if resp.StatusCode < 500 && !retryableStatus(resp.StatusCode) {
			return r, err // the request is wrong (bad model, key, image): asking again will not help
		}
		return r, Retryable(err)
	}
	return parseAnthropic(raw, r)
}

// request is the Messages API body (extras are merged by the doer).
func (c *anthropicChat) request(req ChatRequest) map[string]any {
	body := map[string]any{"model": c.model, "max_tokens": c.maxTokens, "messages": anthropicMessages(req.Messages)}
	if len(req.Tools) > 0 {
		tools := make([]map[string]any, 0, len(req.Tools))
		for _, t := range req.Tools {
			tools = append(tools, map[string]any{"name": t.Name, "description": t.Description, "input_schema": toolSchema(t)})
		}
		body["tools"] = tools
		if choice := map[string]string{"auto": "auto", "required": "any", "none": "none"}[c.toolChoice]; choice != "" {
			body["tool_choice"] = map[string]string{"type": choice}
		}
	}
	return body
}

// anthropicMessages lowers the conversation: tool results become tool_result blocks of a user
// message, and a run of user-side messages is one user message (the API alternates roles, and wants
// a reply's tool results first in the message after it).
func anthropicMessages(msgs []Message) []map[string]any {
	var out []map[string]any
	for _, m := range msgs {
		role := "user"
		if m.Role == RoleAssistant {
			role = "assistant"
		}
		blocks := anthropicBlocks(m)
		if n := len(out); n > 0 && role == "user" && out[n-1]["role"] == "user" {
			out[n-1]["content"] = append(out[n-1]["content"].([]any), blocks...)
			continue
		}
		out = append(out, map[string]any{"role": role, "content": blocks})
	}
	return out
}

// anthropicBlocks is one message's content blocks.
func anthropicBlocks(m Message) []any {
	switch m.Role {
	case RoleAssistant:
		var blocks []any
		if json.Unmarshal(m.Raw, &blocks) == nil && len(blocks) > 0 {
			return blocks // as the model sent them
		}
		blocks = partBlocks(m.Parts)
		for _, tc := range m.ToolCalls {
			input := json.RawMessage(tc.Arguments)
			if !json.Valid(input) {
				input = json.RawMessage(`{}`)
			}
			blocks = append(blocks, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": input})
		}
		return blocks
	case RoleTool:
		return []any{map[string]any{"type": "tool_result", "tool_use_id": m.ToolCallID, "content": partBlocks(m.Parts), "is_error": m.IsError}}
	}
	return partBlocks(m.Parts)
}

// partBlocks are text and image blocks; the API refuses empty text blocks.
func partBlocks(parts []Part) []any {
	blocks := []any{}
	for _, p := range parts {
		switch {
		case p.Image != nil:
			blocks = append(blocks, map[string]any{"type": "image", "source": map[string]any{
				"type": "base64", "media_type": "image/png", "data": p.Base64()}})
		case p.Text != "":
			blocks = append(blocks, map[string]any{"type": "text", "text": p.Text})
		}
	}
	return blocks
}

var errNoMessage = errors.New("anthropic: the reply holds no message")

// parseAnthropic reads a Messages API reply into r.
func parseAnthropic(raw []byte, r Reply) (Reply, error) {
	var msg struct {
		Content    []json.RawMessage       `json:"content"`
		StopReason string                  `json:"stop_reason"`
		Usage      agentcli.AnthropicUsage `json:"usage"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil || msg.Content == nil {
		return r, Retryable(fmt.Errorf("%w: %s", errNoMessage, truncateBytes(raw, 300)))
	}
	for _, b := range msg.Content {
		var blk struct {
			Type, Text, Thinking, ID, Name string
			Input                          json.RawMessage
		}
		json.Unmarshal(b, &blk)
		switch blk.Type {
		case "text":
			r.Text += blk.Text
		case "thinking":
			r.Reasoning += blk.Thinking
		case "tool_use":
			r.ToolCalls = append(r.ToolCalls, ToolCall{ID: blk.ID, Name: blk.Name, Arguments: string(blk.Input)})
		}
	}
	r.Usage, r.FinishReason = msg.Usage.Usage(1), msg.StopReason
	r.Raw, _ = json.Marshal(msg.Content)
	return r, nil
}

// anthropicError is the message of an API error body, else the body's start.
func anthropicError(raw []byte) string {
	var e struct {
		Error struct{ Type, Message string } `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		return e.Error.Type + ": " + e.Error.Message
	}
	return truncateBytes(raw, 300)
}

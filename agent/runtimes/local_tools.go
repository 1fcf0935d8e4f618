package runtimes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/pyrualean/pyrualean/agent"
)

// jsonCallChat is the tools arm on the embedded model. The chat template of a small model renders
// every tool's schema again (thousands of tokens the compact prompt already says in fewer), and the
// model does not keep to the template's tool-call tags; so the request carries no tools: the history
// is plain chat (each call the model made as the JSON object it wrote, each result a user message),
// the reply is constrained by llama.cpp's JSON-schema grammar to one object {"tool": NAME, "args":
// {...}} of one of the tools, and ParseToolReply reads it back as the tool call. A reply that does not
// parse (cut at max_tokens, say) gets no call and a message saying what was wrong (Reply.Nudge).
type jsonCallChat struct {
	cfg OpenAIConfig // the endpoint, without the cells arm's code-block setting

	mu    sync.Mutex
	chats map[string]Chat // one per tool set: the grammar is part of the request body
}

func newJSONCallChat(cfg OpenAIConfig) *jsonCallChat {
	extra := map[string]any{}
	for k, v := range cfg.ExtraBody {
		if k != "code_block_tool" {
			extra[k] = v
		}
	}
	// The embedded server asks again, hotter and with other seeds, when a reply repeats an earlier
	// call (the cells arm's code blocks get the same guard): both arms meet a repeating model alike.
	extra["repeat_guard"] = true
	cfg.ExtraBody, cfg.ToolChoice = extra, ""
	return &jsonCallChat{cfg: cfg, chats: map[string]Chat{}}
}

func (c *jsonCallChat) Reply(ctx context.Context, req ChatRequest) (Reply, error) {
	chat, err := c.chatFor(req.Tools)
	if err != nil {
		return Reply{}, err
	}
	r, err := chat.Reply(ctx, ChatRequest{Messages: jsonCallHistory(req.Messages), Tokens: req.Tokens})
	if err != nil {
		return r, err
	}
	call, perr := ParseToolReply(r.Text, req.Tools)
	if perr != nil {
		r.Nudge = perr.Error() + "\nReply with exactly one tool call as one JSON object: " + agent.ToolReplyFormat
		return r, nil
	}
	call.ID = "call_" + shortHash(r.Text, len(req.Messages))
	r.ToolCalls, r.Text = []ToolCall{call}, ""
	return r, nil
}

// chatFor is the endpoint's Chat with the grammar for tools: a response_format JSON schema allowing
// exactly one call of one of them.
func (c *jsonCallChat) chatFor(tools []agent.ToolSpec) (Chat, error) {
	schema, err := toolCallSchema(tools)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(schema)
	key := hex.EncodeToString(sum[:8])
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.chats[key]; ok {
		return ch, nil
	}
	cfg := c.cfg
	cfg.ExtraBody = map[string]any{}
	for k, v := range c.cfg.ExtraBody {
		cfg.ExtraBody[k] = v
	}
	cfg.ExtraBody["response_format"] = map[string]any{"type": "json_schema",
		"json_schema": map[string]any{"name": "tool_call", "schema": json.RawMessage(schema)}}
	ch := NewOpenAIChat(cfg)
	c.chats[key] = ch
	return ch, nil
}

// toolCallSchema is the JSON schema of one call: {"tool": <a tool's name>, "args": <its parameters>}.
// It is written by hand, not marshalled from a map: llama.cpp's grammar keeps the schema's property
// order, and the model must name the tool before its arguments (each parameters schema keeps its own
// order too: xyz before gripper).
func toolCallSchema(tools []agent.ToolSpec) ([]byte, error) {
	if len(tools) == 0 {
		return nil, errors.New("tools arm: no tools to call")
	}
	alts := make([]string, 0, len(tools))
	for _, t := range tools {
		name, _ := json.Marshal(t.Name)
		var params bytes.Buffer
		if err := json.Compact(&params, toolSchema(t)); err != nil {
			return nil, fmt.Errorf("tool %s: its parameters are not JSON: %w", t.Name, err)
		}
		alts = append(alts, `{"type":"object","properties":{"tool":{"const":`+string(name)+`},"args":`+params.String()+
			`},"required":["tool","args"],"additionalProperties":false}`)
	}
	if len(alts) == 1 {
		return []byte(alts[0]), nil
	}
	return []byte(`{"anyOf":[` + strings.Join(alts, ",") + `]}`), nil
}

// jsonCallHistory is the conversation as plain chat: an assistant's calls become the JSON objects of
// the reply format, a tool's result a user message naming the call it answers.
func jsonCallHistory(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs))
	names := map[string]string{} // call id -> tool
	for _, m := range msgs {
		switch m.Role {
		case RoleAssistant:
			var lines []string
			if t := strings.TrimSpace(m.Text()); t != "" {
				lines = append(lines, t)
			}
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
				lines = append(lines, callLine(tc))
			}
			out = append(out, Message{Role: RoleAssistant, Parts: textParts(strings.Join(lines, "\n"))})
		case RoleTool:
			head := "Result of " + names[m.ToolCallID] + ":\n"
			if m.IsError {
				head = "Your call of " + names[m.ToolCallID] + " was refused:\n"
			}
			// One text part (sent as a plain string), then the result's images, if any.
			parts := []Part{{Text: head + m.Text()}}
			for _, p := range m.Parts {
				if p.Image != nil {
					parts = append(parts, p)
				}
			}
			out = append(out, Message{Role: RoleUser, Parts: parts})
		default:
			out = append(out, m)
		}
	}
	return out
}

// callLine is a call as the model writes it: {"tool": name, "args": {...}}.
func callLine(tc ToolCall) string {
	args := json.RawMessage(tc.Arguments)
	if !json.Valid(args) {
		args = json.RawMessage("{}")
	}
	var buf bytes.Buffer
	if json.Compact(&buf, args) == nil {
		args = buf.Bytes()
	}
	name, _ := json.Marshal(tc.Name)
	return `{"tool": ` + string(name) + `, "args": ` + string(args) + "}"
}

// ParseToolReply reads one tool call from a reply in the tools arm's compact format: a JSON object
// {"tool": NAME, "args": {...}}, bare, in a fenced code block or in <tool_call> tags ("name" for
// "tool" and "arguments" or "parameters" for "args" are read too, as models trained on other formats
// write them). The error says, in words for the model, what is wrong with the reply.
func ParseToolReply(text string, tools []agent.ToolSpec) (ToolCall, error) {
	body := strings.TrimSpace(text)
	if body == "" {
		return ToolCall{}, errors.New("your reply was empty")
	}
	body = unwrapReply(body)
	start := strings.IndexByte(body, '{')
	if start < 0 {
		return ToolCall{}, errors.New("your reply has no JSON object (no tool was called)")
	}
	dec := json.NewDecoder(strings.NewReader(body[start:]))
	dec.UseNumber()
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return ToolCall{}, fmt.Errorf("your reply's JSON is not valid (%s): it was cut off or malformed", jsonProblem(err))
	}
	if rest := strings.TrimSpace(body[start+int(dec.InputOffset()):]); strings.HasPrefix(rest, "{") {
		return ToolCall{}, errors.New("your reply has more than one JSON object: make one call per reply")
	}
	name, err := stringField(obj, "tool", "name")
	if err != nil {
		return ToolCall{}, err
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	if !slices.Contains(names, name) {
		return ToolCall{}, fmt.Errorf("there is no tool %q (the tools: %s)", name, strings.Join(names, ", "))
	}
	args := firstField(obj, "args", "arguments", "parameters")
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var argObj map[string]json.RawMessage
	if json.Unmarshal(args, &argObj) != nil {
		return ToolCall{}, fmt.Errorf(`"args" of %s must be a JSON object of its arguments, not %s`, name, clip(string(args), 40))
	}
	return ToolCall{Name: name, Arguments: string(args)}, nil
}

// unwrapReply is the inside of a fenced code block or of <tool_call> tags, when the reply has one.
func unwrapReply(s string) string {
	if i := strings.Index(s, "<tool_call>"); i >= 0 {
		s = s[i+len("<tool_call>"):]
		if j := strings.Index(s, "</tool_call>"); j >= 0 {
			s = s[:j]
		}
		return strings.TrimSpace(s)
	}
	if i := strings.Index(s, "```"); i >= 0 {
		s = s[i+3:]
		if nl := strings.IndexByte(s, '\n'); nl >= 0 && !strings.Contains(s[:nl], "{") {
			s = s[nl+1:] // the fence's language tag
		}
		if j := strings.Index(s, "```"); j >= 0 {
			s = s[:j]
		}
	}
	return strings.TrimSpace(s)
}

func stringField(obj map[string]json.RawMessage, keys ...string) (string, error) {
	raw := firstField(obj, keys...)
	if len(raw) == 0 {
		return "", fmt.Errorf(`your reply's JSON object has no %q key naming the tool`, keys[0])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || s == "" {
		return "", fmt.Errorf(`%q must be a tool's name as a string, not %s`, keys[0], clip(string(raw), 40))
	}
	return s, nil
}

func firstField(obj map[string]json.RawMessage, keys ...string) json.RawMessage {
	for _, k := range keys {
		if v, ok := obj[k]; ok {
			return v
		}
	}
	return nil
}

func jsonProblem(err error) string {
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return "it ends before the object closes"
	case errors.As(err, &syn):
		return fmt.Sprintf("%v at character %d", syn, syn.Offset)
	}
	return err.Error()
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "..."
	}
	return s
}

// shortHash names a call: the same reply at the same point of the conversation gets the same id.
func shortHash(text string, at int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d\x00%s", at, text)))
	return hex.EncodeToString(sum[:12])
}

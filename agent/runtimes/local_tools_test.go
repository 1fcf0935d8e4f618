package runtimes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
)

var parseTools = []agent.ToolSpec{
	{Name: "segment", Parameters: json.RawMessage(`{"type":"object","properties":{"name_or_prompt":{"type":"string"}},"required":["name_or_prompt"]}`)},
	{Name: "release", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
	{Name: "finish", Parameters: json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"},"summary":{"type":"string"}}}`)},
}

func TestParseToolReply(t *testing.T) {
	for _, c := range []struct {
		name, reply, tool, args string
		err                     string // a part of the error's text; "" : parses
	}{
		{"bare", `{"tool": "segment", "args": {"name_or_prompt": "bowl"}}`, "segment", `{"name_or_prompt": "bowl"}`, ""},
		{"fenced json", "I will look.\n```json\n{\"tool\": \"release\", \"args\": {}}\n```\n", "release", `{}`, ""},
		{"fenced no tag", "```\n{\"tool\": \"release\", \"args\": {}}\n```", "release", `{}`, ""},
		{"hermes tags", `<tool_call>{"name": "finish", "arguments": {"status": "success", "summary": "done"}}</tool_call>`,
			"finish", `{"status": "success", "summary": "done"}`, ""},
		{"parameters key", `{"name": "segment", "parameters": {"name_or_prompt": "plate"}}`, "segment", `{"name_or_prompt": "plate"}`, ""},
		{"no args", `{"tool": "release"}`, "release", `{}`, ""},
		{"null args", `{"tool": "release", "args": null}`, "release", `{}`, ""},
		{"exact numbers kept", `{"tool": "segment", "args": {"name_or_prompt": "x", "n": 0.10000000000000001}}`, "segment",
			`{"name_or_prompt": "x", "n": 0.10000000000000001}`, ""},
		{"empty", "  \n", "", "", "your reply was empty"},
		{"prose", "I think the block is at 0.5, 0.1.", "", "", "no JSON object"},
		{"cut off", `{"tool": "segment", "args": {"name_or_pro`, "", "", "ends before the object closes"},
		{"malformed", `{"tool": "segment", "args": {name_or_prompt: "bowl"}}`, "", "", "not valid"},
		{"two calls", `{"tool": "release", "args": {}} {"tool": "release", "args": {}}`, "", "", "one call per reply"},
		{"no tool key", `{"args": {"name_or_prompt": "bowl"}}`, "", "", `no "tool" key`},
		{"tool not a string", `{"tool": 3, "args": {}}`, "", "", `"tool" must be a tool's name`},
		{"unknown tool", `{"tool": "teleport", "args": {}}`, "", "", `no tool "teleport" (the tools: segment, release, finish)`},
		{"args not an object", `{"tool": "segment", "args": ["bowl"]}`, "", "", `"args" of segment must be a JSON object`},
	} {
		t.Run(c.name, func(t *testing.T) {
			call, err := ParseToolReply(c.reply, parseTools)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if call.Name != c.tool || call.Arguments != c.args {
				t.Fatalf("got %s %s, want %s %s", call.Name, call.Arguments, c.tool, c.args)
			}
		})
	}
}

func TestJSONCallHistory(t *testing.T) {
	msgs := []Message{
		{Role: RoleUser, Parts: textParts("prompt")},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "a", Name: "segment", Arguments: `{"name_or_prompt": "bowl"}`}}},
		{Role: RoleTool, ToolCallID: "a", Parts: textParts(`{"found": true}`)},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "b", Name: "release", Arguments: `not json`}}},
		{Role: RoleTool, ToolCallID: "b", IsError: true, Parts: textParts("budget spent")},
	}
	got := jsonCallHistory(msgs)
	want := []struct {
		role Role
		text string
	}{
		{RoleUser, "prompt"},
		{RoleAssistant, `{"tool": "segment", "args": {"name_or_prompt":"bowl"}}`},
		{RoleUser, "Result of segment:\n{\"found\": true}"},
		{RoleAssistant, `{"tool": "release", "args": {}}`},
		{RoleUser, "Your call of release was refused:\nbudget spent"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Role != w.role || got[i].Text() != w.text || len(got[i].ToolCalls) != 0 || got[i].ToolCallID != "" {
			t.Errorf("message %d: %s %q, want %s %q", i, got[i].Role, got[i].Text(), w.role, w.text)
		}
	}
	// Every call the model wrote parses back to itself (the history shows the format it must keep to).
	call, err := ParseToolReply(got[1].Text(), parseTools)
	if err != nil || call.Name != "segment" {
		t.Fatalf("round trip: %v %+v", err, call)
	}
}

func TestToolCallSchema(t *testing.T) {
	b, err := toolCallSchema(parseTools)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		AnyOf []struct {
			Properties struct {
				Tool struct{ Const string } `json:"tool"`
				Args json.RawMessage        `json:"args"`
			} `json:"properties"`
			Required []string `json:"required"`
		} `json:"anyOf"`
	}
	if err := json.Unmarshal(b, &s); err != nil || len(s.AnyOf) != 3 {
		t.Fatalf("%v %s", err, b)
	}
	if s.AnyOf[0].Properties.Tool.Const != "segment" || !strings.Contains(string(s.AnyOf[0].Properties.Args), "name_or_prompt") ||
		strings.Join(s.AnyOf[0].Required, ",") != "tool,args" {
		t.Fatalf("first alternative: %s", b)
	}
	if !strings.Contains(string(b), `"properties":{"tool":{"const":"segment"},"args":{`) {
		t.Errorf("the tool must come before its args (llama.cpp's grammar keeps the order): %s", b)
	}
	if _, err := toolCallSchema(nil); err == nil {
		t.Fatal("no tools: want an error")
	}
}

func TestPrimitivesArm(t *testing.T) {
	for _, c := range []struct {
		tools []string
		want  bool
	}{{[]string{"python", "finish"}, false}, {[]string{"run_program", "finish"}, false}, {[]string{"segment", "finish"}, true}, {nil, false}} {
		var specs []agent.ToolSpec
		for _, n := range c.tools {
			specs = append(specs, agent.ToolSpec{Name: n})
		}
		if got := primitivesArm(specs); got != c.want {
			t.Errorf("%v: %v, want %v", c.tools, got, c.want)
		}
	}
}

// TestJSONCallChat runs the tools arm's Chat against the scripted OpenAI-compatible server: the
// request carries no tools but the one-call grammar, the reply's JSON becomes the tool call, the
// history goes back as plain chat, and a cut-off reply is no call and says why. The request asks the
// embedded server for its repeat guard (llm/test_server.py tests the guard itself).
func TestJSONCallChat(t *testing.T) {
	srv := openaitest.New(
		openaitest.Step{Reply: openaitest.Reply{Content: `{"tool": "segment", "args": {"name_or_prompt": "bowl"}}`}},
		openaitest.Step{Reply: openaitest.Reply{Content: `{"tool": "release", "ar`}},
	)
	defer srv.Close()
	chat := newJSONCallChat(OpenAIConfig{BaseURL: srv.BaseURL(), APIKey: "k", Model: "m", ToolChoice: "required",
		ExtraBody: map[string]any{"code_block_tool": "python", "top_k": 20}, HTTPAttempts: 1})
	ctx := context.Background()
	history := []Message{{Role: RoleUser, Parts: textParts("prompt")}}
	r, err := chat.Reply(ctx, ChatRequest{Messages: history, Tools: parseTools})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "segment" || r.ToolCalls[0].Arguments != `{"name_or_prompt": "bowl"}` ||
		r.ToolCalls[0].ID == "" || r.Nudge != "" {
		t.Fatalf("reply %+v", r)
	}
	req := srv.Requests()[0].Body
	if _, has := req["tools"]; has {
		t.Error("the request carries tools: the chat template would render them again")
	}
	for _, k := range []string{"tool_choice", "code_block_tool"} {
		if _, has := req[k]; has {
			t.Errorf("the request carries %s", k)
		}
	}
	rf, _ := req["response_format"].(map[string]any)
	schema, _ := json.Marshal(rf["json_schema"])
	if rf["type"] != "json_schema" || !strings.Contains(string(schema), `"const":"release"`) || fmt.Sprint(req["top_k"]) != "20" ||
		req["repeat_guard"] != true {
		t.Errorf("request %v (schema %s)", req, schema)
	}
	history = append(history, Message{Role: RoleAssistant, ToolCalls: r.ToolCalls},
		Message{Role: RoleTool, ToolCallID: r.ToolCalls[0].ID, Parts: textParts(`{"found": true}`)})
	r, err = chat.Reply(ctx, ChatRequest{Messages: history, Tools: parseTools})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ToolCalls) != 0 || !strings.Contains(r.Nudge, "ends before the object closes") || !strings.Contains(r.Nudge, agent.ToolReplyFormat) {
		t.Fatalf("cut reply: %+v", r)
	}
	msgs := srv.Requests()[1].Messages()
	if len(msgs) != 3 || msgs[1]["role"] != "assistant" || msgs[1]["tool_calls"] != nil || msgs[2]["role"] != "user" ||
		!strings.HasPrefix(msgs[2]["content"].(string), "Result of segment:") {
		t.Fatalf("history sent: %v", msgs)
	}
}

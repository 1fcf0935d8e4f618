package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pyrualean/pyrualean/notebooks"
)

// Tool descriptions and schemas the model reads (the original's arms.ArmToolkit.get_tools_spec, reworded).
const (
	pythonDescription = "Run Python code in a persistent session in which `robo` (the robot), `np`, `math` and `time` " +
		"already exist; variables, functions and imports carry over from one call to the next. The result holds " +
		"stdout, stderr, the exception if one was raised, the value of a final expression, the robot state, and " +
		"the current camera images whenever the robot moved."
	finishDescription = "End the episode. Call it once the task predicate has fired (a result showed " +
		"terminated=true) or when you cannot make progress, and then stop."
)

var (
	pythonSchema = json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"Python source"}},"required":["code"]}`)
	// finishStatuses are the statuses finish accepts: its schema's enum, checked by callFinish.
	finishStatuses = []string{"success", "failure", "stuck"}
	finishSchema   = json.RawMessage(`{"type":"object","properties":{"status":{"type":"string","enum":` + jsonText(finishStatuses) +
		`},"summary":{"type":"string","description":"one or two sentences"}},"required":["status","summary"]}`)
)

// cellsToolkit is the cells arm: python(code) and finish.
type cellsToolkit struct{ e *Episode }

func (t *cellsToolkit) Tools() []ToolSpec {
	return []ToolSpec{
		{Name: "python", Description: pythonDescription, Parameters: pythonSchema, ReadOnly: true},
		{Name: "finish", Description: finishDescription, Parameters: finishSchema, ReadOnly: true},
	}
}

func (t *cellsToolkit) Call(ctx context.Context, name string, args json.RawMessage) (ToolResult, error) {
	name = StripToolPrefix(name)
	switch name {
	case "finish":
		return t.e.calls.callFinish(args)
	case "python":
		var a struct {
			Code *string `json:"code"`
		}
		if err := strictJSON(args, &a); err != nil || a.Code == nil {
			msg := "malformed arguments for python: expected a JSON object {\"code\": \"<python source>\"}"
			if err != nil {
				msg += "; " + err.Error()
			}
			return t.e.calls.refuse(msg), nil
		}
		return t.e.calls.call(ctx, agentCall{code: *a.Code, source: *a.Code, tool: "python", author: notebooks.AuthorAgent})
	default:
		return t.e.calls.refuse("unknown tool: " + name), nil
	}
}

// toolsToolkit is the tools arm: one function tool per primitive, plus finish.
type toolsToolkit struct{ e *Episode }

func (t *toolsToolkit) Tools() []ToolSpec {
	out := append([]ToolSpec{}, t.e.brief.tools...)
	return append(out, ToolSpec{Name: "finish", Description: finishDescription, Parameters: finishSchema, ReadOnly: true})
}

func (t *toolsToolkit) Call(ctx context.Context, name string, args json.RawMessage) (ToolResult, error) {
	name = StripToolPrefix(name)
	if name == "finish" {
		return t.e.calls.callFinish(args)
	}
	known := false
	for _, s := range t.e.brief.tools {
		if s.Name == name {
			known = true
		}
	}
	if !known {
		return t.e.calls.refuse("unknown tool: " + name), nil
	}
	var a map[string]any
	if len(bytes.TrimSpace(args)) == 0 {
		a = map[string]any{}
	} else if err := strictJSON(args, &a); err != nil || a == nil {
		msg := fmt.Sprintf("malformed arguments for %s: expected a JSON object of keyword arguments", name)
		if err != nil {
			msg += "; " + err.Error()
		}
		return t.e.calls.refuse(msg), nil
	}
	code, err := primitiveCell(name, a)
	if err != nil {
		return t.e.calls.refuse(fmt.Sprintf("malformed arguments for %s: %v", name, err)), nil
	}
	return t.e.calls.call(ctx, agentCall{code: code, source: code, tool: name, author: notebooks.AuthorTool, args: a})
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// strictJSON decodes a JSON object, keeping numbers exact and rejecting trailing data.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if dec.More() {
		return errors.New("invalid JSON: trailing data after the object")
	}
	return nil
}

// callFinish records the model's finish; it is never counted. Malformed arguments go back to the
// model as an error, as for python, and the episode goes on.
func (cl caller) callFinish(args json.RawMessage) (ToolResult, error) {
	e := cl.e
	var a struct {
		Status  *string `json:"status"`
		Summary *string `json:"summary"`
	}
	const want = `expected a JSON object {"status": "success" | "failure" | "stuck", "summary": "<one or two sentences>"}`
	if err := strictJSON(args, &a); err != nil || a.Status == nil || a.Summary == nil {
		msg := "malformed arguments for finish: " + want
		if err != nil {
			msg += "; " + err.Error()
		}
		return e.calls.refuse(msg), nil
	}
	if !slices.Contains(finishStatuses, *a.Status) {
		return e.calls.refuse(fmt.Sprintf("malformed arguments for finish: status %q is not one of %s; %s",
			*a.Status, strings.Join(finishStatuses, ", "), want)), nil
	}
	status, summary := *a.Status, *a.Summary
	terminated := e.book.setFinish(status, summary)
	_ = e.trace.AddMarkdown(fmt.Sprintf("**finish** — status `%s`\n\n%s", status, summary),
		notebooks.CellMeta{Author: notebooks.AuthorAgent, Tool: "finish", Finish: &notebooks.FinishMeta{Status: status, Summary: summary}}.Map())
	_ = e.book.save()
	text := encodeFeedback(struct {
		OK                    bool   `json:"ok"`
		Status                string `json:"status"`
		Summary               string `json:"summary"`
		EnvironmentTerminated bool   `json:"environment_terminated"`
	}{true, status, summary, terminated})
	return ToolResult{Text: text, Finished: true}, nil
}

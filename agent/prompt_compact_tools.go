package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The compact profile of the tools arm: the same facts, knowledge, task card and worked examples as the
// cells arm's compact profile, the examples written as the primitive calls the tools arm makes (with
// the results they gave), and one reply format a small model can keep to: one JSON object a turn.

// ToolReplyFormat is the reply the tools arm's compact profile asks for, one tool call a turn (the local
// runtime reads it back: runtimes.ParseToolReply).
const ToolReplyFormat = `{"tool": "<tool name>", "args": {"<argument>": <value>, ...}}`

// compactToolsPrompt is BuildPrompt for the tools arm under spec.ProfileCompact: contract, the tools
// (the examples' first, with their docs), the worked examples as calls, the knowledge, the task card;
// everything before the task card is the same for a task family (the local model's prompt cache).
func compactToolsPrompt(p PromptParts) string {
	parts := []string{compactToolsContract(p)}
	if len(p.Tools) > 0 {
		parts = append(parts, "# Tools (the robot's primitives)\n\n"+compactToolList(p.Tools, usedTools(p.Examples)))
	} else if ref := strings.TrimSpace(p.APIReference); ref != "" {
		parts = append(parts, "# Tools (the robot's primitives)\n\n"+ref)
	}
	if ex := callExamplesSection(p.Examples); ex != "" {
		parts = append(parts, ex)
	}
	for _, s := range []string{p.Knowledge, p.TaskCard} {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n") + "\n"
}

func compactToolsContract(p PromptParts) string {
	lines := []string{
		"# How you control the robot",
		"",
		"Each robot primitive is a tool. Every reply is exactly one tool call: one JSON object and nothing else,",
		ToolReplyFormat,
		"The robot runs it and the next message gives its result. One reply, one call.",
		imageNote(p),
		"",
		"# How to work",
		"",
		readCardStep("`segment`"),
		"2. Make the calls the worked examples below make (they solve OTHER tasks with the same tools): find " +
			"positions with `segment`, move above, lower, grasp or release. How this task's objects move (only " +
			"blocks can be picked; a drawer moves by its handle) is in the robot facts below the examples.",
		"3. Numbers come from results: copy positions from the `segment` result you got, never invent " +
			"coordinates. Read each result: if `terminated` is not true yet, fix what went wrong (an error, " +
			"`reached` false, a pick's `success` false) with the next call; never repeat a call unchanged.",
		"4. Success is decided by the simulator: results carry `terminated`. Once it is true, reply " +
			`{"tool": "finish", "args": {"status": "success", "summary": "..."}}` + ". If you cannot make " +
			`progress after fixing what you can, call finish with "status": "failure".`,
	}
	if n := endingNote(p); n != "" {
		lines = append(lines, strings.TrimPrefix(n, "- "))
	}
	return strings.Join(lines, "\n")
}

// usedTools are the tools the examples call, in order of first use.
func usedTools(examples []Example) []string {
	var out []string
	for _, ex := range examples {
		for _, c := range ex.Calls {
			if !slices.Contains(out, c.Tool) {
				out = append(out, c.Tool)
			}
		}
	}
	return out
}

// compactToolList lists the tools as call signatures: those named in first (in that order) with their
// descriptions, then every other tool as its signature only.
func compactToolList(tools []ToolSpec, first []string) string {
	var main, rest []string
	for _, name := range first {
		for _, t := range tools {
			if t.Name == name {
				main = append(main, toolSignature(t)+"\n    "+strings.ReplaceAll(toolDoc(t.Description), "\n", "\n    "))
			}
		}
	}
	for _, t := range tools {
		if !slices.Contains(first, t.Name) {
			rest = append(rest, toolSignature(t))
		}
	}
	out := strings.Join(main, "\n")
	if len(rest) > 0 {
		if out != "" {
			out += "\n\nOther tools (arguments only):\n"
		}
		out += strings.Join(rest, "\n")
	}
	return out
}

// toolDoc is a tool's description without the Python signature line it starts with (the signature
// above it says the same in the reply's terms).
func toolDoc(desc string) string {
	desc = strings.TrimSpace(desc)
	if first, rest, ok := strings.Cut(desc, "\n"); ok && strings.HasPrefix(first, "robo.") {
		desc = rest
	}
	lines := strings.Split(desc, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

// toolSignature is name(arg, arg=default, ...) from the tool's JSON Schema, its properties in the
// schema's own order; required arguments have no default.
func toolSignature(t ToolSpec) string {
	var schema struct {
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(t.Parameters, &schema)
	var args []string
	for _, p := range orderedProperties(t.Parameters) {
		a := p.name
		if !slices.Contains(schema.Required, p.name) {
			var d struct {
				Default json.RawMessage `json:"default"`
			}
			_ = json.Unmarshal(p.schema, &d)
			if len(d.Default) > 0 {
				a += "=" + string(d.Default)
			} else {
				a += "=null"
			}
		}
		args = append(args, a)
	}
	return t.Name + "(" + strings.Join(args, ", ") + ")"
}

type property struct {
	name   string
	schema json.RawMessage
}

// orderedProperties reads a JSON Schema's properties in the order written (a Go map would sort them,
// and the order is the primitive's own: xyz before gripper).
func orderedProperties(schema json.RawMessage) []property {
	var top map[string]json.RawMessage
	if json.Unmarshal(schema, &top) != nil || len(top["properties"]) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(top["properties"]))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []property
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return out
		}
		out = append(out, property{name, raw})
	}
	return out
}

// callExamplesSection writes each example as the calls it makes, each followed by its result, and the
// finish call once the simulator said terminated. Examples without calls are left out.
func callExamplesSection(examples []Example) string {
	var b strings.Builder
	for _, ex := range examples {
		if len(ex.Calls) == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("# Worked examples (other tasks, not yours: adapt, do not copy object names or numbers)")
		}
		fmt.Fprintf(&b, "\n\nExample task %q: %s", ex.Task, ex.Instruction)
		done := false
		for _, c := range ex.Calls {
			fmt.Fprintf(&b, "\n%s\nresult: %s", callJSON(c.Tool, c.Args), compactJSON(c.Result))
			var r struct {
				Terminated bool `json:"terminated"`
			}
			done = done || (json.Unmarshal(c.Result, &r) == nil && r.Terminated)
		}
		if done {
			args, _ := json.Marshal(map[string]string{"status": "success", "summary": ex.Instruction + ": done"})
			b.WriteString("\n" + callJSON("finish", args))
		}
	}
	return b.String()
}

// callJSON is one call in the reply format: {"tool": name, "args": {...}}.
func callJSON(tool string, args json.RawMessage) string {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	return `{"tool": ` + jsonText(tool) + `, "args": ` + compactJSON(args) + "}"
}

// compactJSON is JSON on one line with a space after each separator, as a person writes it.
func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	var out strings.Builder
	inString, escaped := false, false
	for _, r := range buf.String() {
		out.WriteRune(r)
		switch {
		case escaped:
			escaped = false
		case r == '\\' && inString:
			escaped = true
		case r == '"':
			inString = !inString
		case !inString && (r == ',' || r == ':'):
			out.WriteByte(' ')
		}
	}
	return out.String()
}

package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pyrualean/pyrualean/pylit"
)

// ParseToolSchemas reads `api --format tools`: a JSON list of OpenAI function tools
// ({"type":"function","function":{name,description,parameters}}) or of plain {name, description,
// parameters|input_schema} objects, or an object holding such a list under "tools".
func ParseToolSchemas(b []byte) ([]ToolSpec, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(b, &list); err != nil {
		var obj struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err2 := json.Unmarshal(b, &obj); err2 != nil || obj.Tools == nil {
			return nil, fmt.Errorf("tool schemas: not a JSON list of tools: %w", err)
		}
		list = obj.Tools
	}
	var out []ToolSpec
	for i, raw := range list {
		var t struct {
			Type     string `json:"type"`
			Function *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
			Name         string          `json:"name"`
			Description  string          `json:"description"`
			Parameters   json.RawMessage `json:"parameters"`
			InputSchema  json.RawMessage `json:"input_schema"`
			InputSchema2 json.RawMessage `json:"inputSchema"`
			ReadOnly     bool            `json:"read_only"`
			Stateful     *bool           `json:"stateful"`
			X            *struct {
				Stateful *bool `json:"stateful"`
			} `json:"x-pyrualean"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tool schemas[%d]: %w", i, err)
		}
		s := ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters, ReadOnly: t.ReadOnly}
		if t.Function != nil {
			s.Name, s.Description, s.Parameters = t.Function.Name, t.Function.Description, t.Function.Parameters
		}
		if len(s.Parameters) == 0 {
			s.Parameters = t.InputSchema
		}
		if len(s.Parameters) == 0 {
			s.Parameters = t.InputSchema2
		}
		if t.X != nil && t.X.Stateful != nil {
			t.Stateful = t.X.Stateful
		}
		if t.Stateful != nil {
			s.Stateful = *t.Stateful
			s.ReadOnly = !*t.Stateful
		}
		if s.Name == "" {
			return nil, fmt.Errorf("tool schemas[%d]: no name", i)
		}
		if !isIdentifier(s.Name) {
			return nil, fmt.Errorf("tool schemas[%d]: %q is not a Python identifier", i, s.Name)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("tool schemas: empty list")
	}
	return out, nil
}

// toolsReference lists the primitive tools for the tools arm's prompt.
func toolsReference(tools []ToolSpec) string {
	var b strings.Builder
	for _, t := range tools {
		fmt.Fprintf(&b, "- `%s`: %s\n", t.Name, firstParagraph(t.Description))
	}
	return b.String()
}

func firstParagraph(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i]
	}
	return strings.ReplaceAll(s, "\n", " ")
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return false
	}
	return true
}

// primitiveCell generates the cell the tools arm runs for one primitive call: robo.name(k=v, ...).
func primitiveCell(name string, args map[string]any) (string, error) {
	var parts []string
	for _, k := range sortedKeys(args) {
		if !isIdentifier(k) {
			return "", fmt.Errorf("argument name %q is not an identifier", k)
		}
		s, err := pylit.Literal(args[k])
		if err != nil {
			return "", fmt.Errorf("argument %s: %w", k, err)
		}
		parts = append(parts, k+"="+s)
	}
	return "robo." + name + "(" + strings.Join(parts, ", ") + ")", nil
}

package notebooks

import (
	"encoding/json"
	"fmt"
	"strings"
)

// upgradeV3 turns an nbformat 3 document (its JSON tree) into the nbformat 4.5 tree that
// nbformat.read(..., as_version=4) builds, following nbformat/v3/rwbase.py (rejoin_lines,
// strip_transient) and nbformat/v4/convert.py (upgrade, upgrade_cell, upgrade_output): worksheets
// are flattened into one cell list, code cells' input/prompt_number become source/execution_count,
// heading cells become one-line markdown headings, pyout/pyerr become execute_result/error and v3's
// short output keys (text, png, ...) move into a data bundle keyed by mime type. Cells get fresh
// ids, as nbformat's upgrade gives them.
//
// Unlike nbformat, which keeps a text cell's "rendered" HTML and so produces a v4 notebook its own
// validator then rejects, the transient render is dropped.
func upgradeV3(top map[string]any) (map[string]any, error) {
	meta, err := objectField(top, "metadata")
	if err != nil {
		return nil, err
	}
	if meta == nil {
		meta = map[string]any{}
	}
	for k := range top {
		switch k {
		case "metadata", "nbformat", "nbformat_minor", "worksheets", "orig_nbformat", "orig_nbformat_minor":
		default:
			return nil, fmt.Errorf("%w: unknown top-level key %q in an nbformat 3 notebook", ErrFormat, k)
		}
	}
	delete(meta, "name")
	delete(meta, "signature")
	worksheets, ok := top["worksheets"].([]any)
	if !ok && top["worksheets"] != nil {
		return nil, fmt.Errorf("%w: worksheets is %s, not a list", ErrFormat, jsonKind(top["worksheets"]))
	}
	cells := []any{}
	for w, rw := range worksheets {
		ws, ok := rw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: worksheet %d is %s, not an object", ErrFormat, w, jsonKind(rw))
		}
		wcells, ok := ws["cells"].([]any)
		if !ok {
			return nil, fmt.Errorf("%w: worksheet %d: cells is %s, not a list", ErrFormat, w, jsonKind(ws["cells"]))
		}
		for i, rc := range wcells {
			c, err := upgradeCellV3(rc)
			if err != nil {
				return nil, fmt.Errorf("worksheet %d cell %d: %w", w, i, err)
			}
			cells = append(cells, c)
		}
	}
	return map[string]any{
		"metadata":       meta,
		"nbformat":       json.Number("4"),
		"nbformat_minor": json.Number("5"),
		"cells":          cells,
	}, nil
}

func upgradeCellV3(v any) (map[string]any, error) {
	c, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: cell is %s, not an object", ErrFormat, jsonKind(v))
	}
	if c["metadata"] == nil {
		c["metadata"] = map[string]any{}
	}
	delete(c, "trusted") // strip_transient: where the transient value used to be stored
	c["id"] = NewCellID()
	switch c["cell_type"] {
	case CellCode:
		delete(c, "language")
		if collapsed, ok := c["collapsed"]; ok {
			m, ok := c["metadata"].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%w: metadata is %s, not an object", ErrFormat, jsonKind(c["metadata"]))
			}
			m["collapsed"] = collapsed
			delete(c, "collapsed")
		}
		src, err := joinLinesV3(c["input"], "input")
		if err != nil {
			return nil, err
		}
		delete(c, "input")
		c["source"] = src
		c["execution_count"] = c["prompt_number"]
		delete(c, "prompt_number")
		outs, ok := c["outputs"].([]any)
		if !ok {
			return nil, fmt.Errorf("%w: outputs is %s, not a list", ErrFormat, jsonKind(c["outputs"]))
		}
		for j, o := range outs {
			uo, err := upgradeOutputV3(o)
			if err != nil {
				return nil, fmt.Errorf("output %d: %w", j, err)
			}
			outs[j] = uo
		}
	case "heading":
		src, err := joinLinesV3(c["source"], "source")
		if err != nil {
			return nil, err
		}
		level := 1
		if lv, ok := c["level"]; ok {
			n, err := optInt(c, "level")
			if err != nil || n == nil || *n < 1 {
				return nil, fmt.Errorf("%w: heading level %v is not a positive integer", ErrFormat, lv)
			}
			level = *n
		}
		delete(c, "level")
		delete(c, "rendered")
		c["cell_type"] = CellMarkdown
		c["source"] = strings.Repeat("#", level) + " " + strings.Join(pyLines(src), " ")
	case CellMarkdown, CellRaw, "html":
		src, err := joinLinesV3(c["source"], "source")
		if err != nil {
			return nil, err
		}
		delete(c, "rendered")
		c["source"] = src
		if c["cell_type"] == "html" {
			c["cell_type"] = CellMarkdown
		}
	default:
		return nil, fmt.Errorf("%w: unknown nbformat 3 cell_type %v", ErrFormat, c["cell_type"])
	}
	return c, nil
}

// v3MimeKeys is nbformat/v4/convert.py's _mime_map: v3's short output keys.
var v3MimeKeys = map[string]string{
	"text":       "text/plain",
	"html":       "text/html",
	"svg":        "image/svg+xml",
	"png":        "image/png",
	"jpeg":       "image/jpeg",
	"latex":      "text/latex",
	"json":       "application/json",
	"javascript": "application/javascript",
}

// v3Multiline are the output keys rejoin_lines joins (nbformat/v3/rwbase.py's _multiline_outputs).
var v3Multiline = []string{"text", "html", "svg", "latex", "javascript", "json"}

func upgradeOutputV3(v any) (map[string]any, error) {
	o, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: output is %s, not an object", ErrFormat, jsonKind(v))
	}
	for _, k := range v3Multiline {
		if l, ok := o[k].([]any); ok {
			s, err := joinLinesV3(l, k)
			if err != nil {
				return nil, err
			}
			o[k] = s
		}
	}
	switch o["output_type"] {
	case "pyout", OutputDisplayData:
		if o["metadata"] == nil {
			o["metadata"] = map[string]any{}
		}
		if o["output_type"] == "pyout" {
			o["output_type"] = OutputExecuteResult
			o["execution_count"] = o["prompt_number"]
			delete(o, "prompt_number")
		}
		data := map[string]any{}
		for k, val := range o {
			switch k {
			case "output_type", "execution_count", "metadata":
				continue
			}
			delete(o, k)
			if mime, ok := v3MimeKeys[k]; ok {
				k = mime
			}
			data[k] = val
		}
		if js, ok := data["application/json"]; ok {
			s, ok := js.(string)
			if !ok {
				return nil, fmt.Errorf("%w: json output is %s, not a string", ErrFormat, jsonKind(js))
			}
			parsed, err := decodeGeneric([]byte(s))
			if err != nil {
				return nil, fmt.Errorf("%w: json output: %w", ErrFormat, err)
			}
			data["application/json"] = parsed
		}
		o["data"] = data
		if m, ok := o["metadata"].(map[string]any); ok {
			for short, mime := range v3MimeKeys {
				if val, ok := m[short]; ok {
					m[mime] = val
					delete(m, short)
				}
			}
		}
	case "pyerr":
		o["output_type"] = OutputError
	case OutputStream:
		name := any("stdout")
		if s, ok := o["stream"]; ok {
			name = s
		}
		delete(o, "stream")
		o["name"] = name
	}
	return o, nil
}

// joinLinesV3 is nbformat 3's _join_lines: lists written by splitlines(True) are concatenated, lists
// written by the old splitlines() are joined with newlines.
func joinLinesV3(v any, name string) (string, error) {
	l, ok := v.([]any)
	if !ok {
		return multiline(v, name)
	}
	parts := make([]string, len(l))
	for i, x := range l {
		s, ok := x.(string)
		if !ok {
			return "", fmt.Errorf("%w: %s is %s, not a string or a list of strings", ErrFormat, name, jsonKind(v))
		}
		parts[i] = s
	}
	if len(parts) > 0 && (strings.HasSuffix(parts[0], "\n") || strings.HasSuffix(parts[0], "\r")) {
		return strings.Join(parts, ""), nil
	}
	return strings.Join(parts, "\n"), nil
}

// pyLines is Python's str.splitlines() (no line ends kept).
func pyLines(s string) []string {
	lines := splitLines(s)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimRight(l.(string), "\r\n\v\f\x1c\x1d\x1e\u0085\u2028\u2029")
	}
	return out
}

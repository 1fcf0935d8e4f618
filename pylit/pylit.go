// Package pylit renders Go values as Python text, in the two ways pyrualean needs: source literals for
// the cells it generates (Literal, Str: a double-quoted string, valid Python) and what Python's repr()
// and str() print, for text that must read as the original's f-strings do (Repr, Text, Quote).
//
// Values are decoded JSON: nil, bool, json.Number, float64, string, []any, map[string]any (keys
// sorted) and Object (keys in its own order).
package pylit

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Object is a JSON object that keeps its key order (a Python dict read as it was built).
type Object interface {
	Len() int
	At(i int) (key string, value any)
}

// Str is s as a Python string literal for generated source: JSON string syntax, which Python reads
// as the same str.
func Str(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Quote quotes s as Python's repr() quotes a str: single quotes unless s holds a ' and no ".
func Quote(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	var b strings.Builder
	b.WriteString(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case string(r) == q:
			b.WriteString(`\` + q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(q)
	return b.String()
}

// Literal renders v as Python source (strings as Str); a value of another type is an error.
func Literal(v any) (string, error) { return render(v, Str) }

// Repr renders v as Python's repr() prints it (strings as Quote); unknown types print with fmt.
func Repr(v any) string {
	s, err := render(v, Quote)
	if err != nil {
		return fmt.Sprint(v)
	}
	return s
}

// Text renders v as Python's str() prints it: a string as it is, anything else as Repr.
func Text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return Repr(v)
}

func render(v any, quote func(string) string) (string, error) {
	switch x := v.(type) {
	case nil:
		return "None", nil
	case bool:
		if x {
			return "True", nil
		}
		return "False", nil
	case json.Number:
		return x.String(), nil
	case float64:
		return fmt.Sprint(x), nil
	case string:
		return quote(x), nil
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			s, err := render(e, quote)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return renderDict(len(keys), func(i int) (string, any) { return keys[i], x[keys[i]] }, quote)
	case Object:
		return renderDict(x.Len(), x.At, quote)
	}
	return "", fmt.Errorf("pylit: unsupported value %T", v)
}

func renderDict(n int, at func(int) (string, any), quote func(string) string) (string, error) {
	parts := make([]string, n)
	for i := range n {
		k, v := at(i)
		s, err := render(v, quote)
		if err != nil {
			return "", err
		}
		parts[i] = quote(k) + ": " + s
	}
	return "{" + strings.Join(parts, ", ") + "}", nil
}

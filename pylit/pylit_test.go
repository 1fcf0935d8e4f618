package pylit

import (
	"encoding/json"
	"testing"
)

type pairs []string

func (p pairs) Len() int               { return len(p) / 2 }
func (p pairs) At(i int) (string, any) { return p[2*i], p[2*i+1] }

func TestRender(t *testing.T) {
	cases := []struct {
		name          string
		v             any
		literal, repr string
	}{
		{"none", nil, "None", "None"},
		{"bools", []any{true, false}, "[True, False]", "[True, False]"},
		{"numbers", []any{json.Number("-1e-3"), 2.5}, "[-1e-3, 2.5]", "[-1e-3, 2.5]"},
		{"string", "a\"b\n", `"a\"b\n"`, `'a"b\n'`},
		{"apostrophe", "it's", `"it's"`, `"it's"`},
		{"both quotes", `it's "x"`, `"it's \"x\""`, `'it\'s "x"'`},
		{"control", "a\x01", `"a\u0001"`, `'a\x01'`},
		{"map sorted", map[string]any{"b": 1.0, "a": "x"}, `{"a": "x", "b": 1}`, `{'a': 'x', 'b': 1}`},
		{"object ordered", pairs{"z", "1", "a", "2"}, `{"z": "1", "a": "2"}`, `{'z': '1', 'a': '2'}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Literal(c.v)
			if err != nil || got != c.literal {
				t.Errorf("Literal = %s (%v), want %s", got, err, c.literal)
			}
			if got := Repr(c.v); got != c.repr {
				t.Errorf("Repr = %s, want %s", got, c.repr)
			}
		})
	}
	if _, err := Literal(struct{}{}); err == nil {
		t.Error("Literal accepted a struct")
	}
	if Text("plain") != "plain" || Text([]any{"a"}) != "['a']" {
		t.Error("Text: a string prints as it is, others as repr")
	}
}

package agent

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestShallowIndent(t *testing.T) {
	doc := `{"cell":2,"stdout":"say \\\",{}[] \\\\","primitive_calls":[{"tool":"pick","kwargs":{"object":"red_block"},"xyz":[0.5,-0.1,0.2],"empty":[],"none":{}}],"state":{"eef_pos":[0.4,0,0.4]},"images":[]}`
	for _, tc := range []struct {
		depth int
		want  string
	}{
		{0, `{"cell": 2, "stdout": "say \\\",{}[] \\\\", "primitive_calls": [{"tool": "pick", "kwargs": {"object": "red_block"}, "xyz": [0.5, -0.1, 0.2], "empty": [], "none": {}}], "state": {"eef_pos": [0.4, 0, 0.4]}, "images": []}`},
		{2, `{
  "cell": 2,
  "stdout": "say \\\",{}[] \\\\",
  "primitive_calls": [
    {"tool": "pick", "kwargs": {"object": "red_block"}, "xyz": [0.5, -0.1, 0.2], "empty": [], "none": {}}
  ],
  "state": {
    "eef_pos": [0.4, 0, 0.4]
  },
  "images": []
}`},
	} {
		got, err := shallowIndent([]byte(doc), tc.depth)
		if err != nil || string(got) != tc.want {
			t.Errorf("depth %d: %v\n got %s\nwant %s", tc.depth, err, got, tc.want)
		}
	}
	if _, err := shallowIndent([]byte(`{"cut":"abc`), 2); err == nil {
		t.Error("a cut document was laid out")
	}
}

// FuzzShallowIndent: any JSON document keeps its meaning byte for byte at every depth, and a large depth
// is json.Indent's layout (so the default profile's results could use either).
func FuzzShallowIndent(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `"x"`, `1e3`, `{"a":[1,{"b":"}\"]"}],"c":{}}`, `[[[]],{"k":[null,true]}]`, `"\u2028<>&"`} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, doc string, depth int) {
		if !json.Valid([]byte(doc)) {
			if _, err := shallowIndent([]byte(doc), depth); err == nil {
				t.Fatalf("invalid JSON %q laid out", doc)
			}
			return
		}
		depth = max(0, depth%8)
		got, err := shallowIndent([]byte(doc), depth)
		if err != nil {
			t.Fatal(err)
		}
		var a, b bytes.Buffer
		json.Compact(&a, []byte(doc))
		json.Compact(&b, got)
		if a.String() != b.String() {
			t.Fatalf("depth %d changed the document:\n%s\n%s", depth, a.String(), b.String())
		}
		deep, _ := shallowIndent([]byte(doc), 1<<20)
		var ind bytes.Buffer
		json.Indent(&ind, a.Bytes(), "", "  ")
		if string(deep) != ind.String() {
			t.Fatalf("deep layout differs from json.Indent:\n%s\n%s", deep, ind.String())
		}
		if depth == 0 && bytes.Contains(got, []byte("\n")) { // JSON strings hold no raw newline
			t.Fatalf("depth 0 broke a line: %q", got)
		}
	})
}

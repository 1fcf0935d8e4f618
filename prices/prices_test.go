package prices

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLookupAndCost(t *testing.T) {
	tab := Table{"gpt-x": {Input: 2, CachedInput: 0.5, Output: 8}, "qwen*": {Input: 1, Output: 1}, "qwen2*": {Input: 3, Output: 3}}
	for _, c := range []struct {
		model string
		want  float64 // cost of 1M input (250k cached) + 1M output
		found bool
	}{
		{"gpt-x", 1.5 + 0.125 + 8, true},
		{"qwen2.5", 3*0.75 + 0 + 3, true}, // the longest prefix wins
		{"qwen3", 0.75 + 0 + 1, true},
		{"other", 0, false},
	} {
		p, ok := tab.Lookup(c.model)
		if ok != c.found {
			t.Fatalf("%s: found %v", c.model, ok)
		}
		if got := p.Cost(1_000_000, 250_000, 1_000_000); ok && got != c.want {
			t.Errorf("%s: cost %v, want %v", c.model, got, c.want)
		}
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "p.json")
	os.WriteFile(good, []byte(`{"m": {"input": 1, "cached_input": 0.1, "output": 2}}`), 0o644)
	tab, err := Read(good)
	if err != nil || tab["m"].Output != 2 {
		t.Fatalf("Read: %v %v", tab, err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[1]`), 0o644)
	if _, err := Read(bad); err == nil {
		t.Fatal("a JSON array is not a price table")
	}
	if _, err := Read(filepath.Join(dir, "none.json")); err == nil {
		t.Fatal("a missing file is an error")
	}
}

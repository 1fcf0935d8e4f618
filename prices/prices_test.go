package prices

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every shipped price is dated and cites where it came from; the original's planner has one, and the
// models served locally have none (unknown, never free).
func TestEmbeddedTable(t *testing.T) {
	tab, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse("2006-01-02", tab.AsOf); err != nil {
		t.Errorf("as_of %q: %v", tab.AsOf, err)
	}
	for name, p := range tab.Models {
		if len(p.Source) < 20 || p.AsOf == "" || p.Origin != OriginEmbedded {
			t.Errorf("%s: every entry needs a source and a date: %+v", name, p)
		}
		if _, err := time.Parse("2006-01-02", p.AsOf); err != nil || p.AsOf > tab.AsOf {
			t.Errorf("%s: as_of %q (table %s)", name, p.AsOf, tab.AsOf)
		}
		if p.Input <= 0 || p.Output <= 0 || p.CachedInput > p.Input {
			t.Errorf("%s: implausible %+v", name, p)
		}
	}
	for _, c := range []struct {
		model         string
		ok            bool
		in, cached, o float64
	}{
		{"gpt-6-astra", true, 10, 1, 50},
		{"openai/gpt-6-astra", true, 10, 1, 50},
		{"gpt-6-astra-2026-09-03", true, 10, 1, 50},
		{"gpt-6-astra-fast", false, 0, 0, 0}, // a different price: never borrowed from a neighbour
		{"claude-opus-5-5", true, 4, 0.2, 20},
		{"claude-opus-5", true, 5, 0.5, 25},
		{"qwen2.5-coder-1.5b", false, 0, 0, 0},
		{"DAGroup-PKU/PyRUA-Lean-Coder-v0.1-4B", false, 0, 0, 0},
		{"", false, 0, 0, 0},
		{"replay", false, 0, 0, 0},
	} {
		p, ok := tab.Lookup(c.model)
		if ok != c.ok || p.Input != c.in || p.CachedInput != c.cached || p.Output != c.o {
			t.Errorf("Lookup(%q) = %+v, %v; want %v %v/%v/%v", c.model, p, ok, c.ok, c.in, c.cached, c.o)
		}
	}
	if why := tab.Why("qwen2.5-coder-1.5b"); !strings.Contains(why, "locally") {
		t.Errorf("Why(local model) = %q", why)
	}
	if why := tab.Why("mystery-9"); !strings.Contains(why, "--prices") {
		t.Errorf("Why(mystery) = %q", why)
	}
}

func TestCost(t *testing.T) {
	p := Price{Input: 10, CachedInput: 1, Output: 50}
	for _, c := range []struct {
		in, cached, out int
		want            float64
	}{
		{1_000_000, 0, 0, 10},
		{1_000_000, 400_000, 0, 6 + 0.4},
		{0, 0, 20_000, 1},
		{1_230_000, 1_000_000, 10_000, 2.3 + 1 + 0.5},
		{100, 500, 0, 0.0001}, // cached above input (a runtime's bad count) charges no negative fresh input
	} {
		if got := p.Cost(c.in, c.cached, c.out); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Cost(%d, %d, %d) = %v, want %v", c.in, c.cached, c.out, got, c.want)
		}
	}
}

// --prices files: the dated format and play's flat one; they override and extend the shipped table.
func TestReadAndMerge(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	flat := write("flat.json", `{"gpt-6-astra": {"input": 20, "output": 60}, "qwen2.5-coder-1.5b": {"input": 0, "cached_input": 0, "output": 0}, "my-*": {"input": 1, "output": 2}}`)
	ft, err := Read(flat)
	if err != nil {
		t.Fatal(err)
	}
	m := base.Merge(ft)
	if p, ok := m.Lookup("gpt-6-astra"); !ok || p.Input != 20 || p.CachedInput != 20 || p.Origin != flat {
		t.Errorf("override: %+v %v (a missing cached_input is charged as input)", p, ok)
	}
	if p, ok := m.Lookup("qwen2.5-coder-1.5b"); !ok || p.Cost(1000, 0, 1000) != 0 {
		t.Errorf("a user's explicit 0 is a price: %+v %v", p, ok)
	}
	if p, ok := m.Lookup("my-model-7"); !ok || p.Output != 2 {
		t.Errorf("prefix key: %+v %v", p, ok)
	}
	if p, ok := m.Lookup("claude-opus-5"); !ok || p.Origin != OriginEmbedded {
		t.Errorf("shipped entries stay: %+v %v", p, ok)
	}
	dated := write("dated.json", `{"schema": "pyrualean-prices-v1", "as_of": "2026-12-01", "models": {"m": {"input": 1, "cached_input": 0.1, "output": 3, "source": "invoice"}}}`)
	dt, err := Read(dated)
	if err != nil || dt.Models["m"].AsOf != "2026-12-01" || dt.Models["m"].Source != "invoice" {
		t.Errorf("dated file: %+v %v", dt, err)
	}
	for name, body := range map[string]string{
		"negative.json":  `{"m": {"input": -1, "output": 1}}`,
		"no-output.json": `{"m": {"input": 1}}`,
		"garbage.json":   `{"m": `,
		"schema.json":    `{"schema": "other", "models": {}}`,
		"typo.json":      `{"models": {}, "unkown": {}}`,
		"both.json":      `{"models": {"m": {"input": 1, "output": 1}}, "unknown": {"m": "why"}}`,
	} {
		if _, err := Read(write(name, body)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: want an error naming the file, got %v", name, err)
		}
	}
	if _, err := Read(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file: no error")
	}
}

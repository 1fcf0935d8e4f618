// Package prices prices LLM calls: a model's dollars per million tokens, a table of them by model name,
// and the table read from a file (--prices). It is a leaf: episode specs carry a table, the runtimes
// price each call with it, summaries price runs after the fact.
package prices

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Price is a model's price in US dollars per million tokens. Cached input is priced separately.
type Price struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	Output      float64 `json:"output"`
}

// Cost prices one call or a run: input includes the cached tokens, which are charged at the cached rate.
func (p Price) Cost(input, cached, output int) float64 {
	fresh := max(input-cached, 0)
	return (float64(fresh)*p.Input + float64(cached)*p.CachedInput + float64(output)*p.Output) / 1e6
}

// Table maps model names to prices; a key ending in "*" matches by prefix.
type Table map[string]Price

// Lookup finds a model's price: an exact key first, then the longest matching prefix key.
func (t Table) Lookup(model string) (Price, bool) {
	if p, ok := t[model]; ok {
		return p, true
	}
	best, found := "", false
	var bp Price
	for k, p := range t {
		if pre, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(model, pre) && len(pre) >= len(best) {
			best, bp, found = pre, p, true
		}
	}
	return bp, found
}

// Read reads a JSON file {"model": {"input": 1.25, "cached_input": 0.125, "output": 10}, ...}.
func Read(path string) (Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	var t Table
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("price table %s: %w", path, err)
	}
	return t, nil
}

package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Usage is one LLM call's (or one episode's) token accounting. InputTokens includes cached tokens
// (seed §5); ReasoningTokens are part of OutputTokens.
type Usage struct {
	Calls           int `json:"calls"`
	InputTokens     int `json:"input_tokens"`
	CachedTokens    int `json:"cached_input_tokens"`
	OutputTokens    int `json:"output_tokens"`
	ReasoningTokens int `json:"reasoning_output_tokens"`
}

// Add accumulates o into u.
func (u *Usage) Add(o Usage) {
	u.Calls += o.Calls
	u.InputTokens += o.InputTokens
	u.CachedTokens += o.CachedTokens
	u.OutputTokens += o.OutputTokens
	u.ReasoningTokens += o.ReasoningTokens
}

// Price is a model's price in US dollars per million tokens. Cached input is priced separately.
type Price struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	Output      float64 `json:"output"`
}

// Cost prices a usage. Cached tokens are part of InputTokens and charged at the cached rate.
func (p Price) Cost(u Usage) float64 {
	fresh := max(u.InputTokens-u.CachedTokens, 0)
	return (float64(fresh)*p.Input + float64(u.CachedTokens)*p.CachedInput + float64(u.OutputTokens)*p.Output) / 1e6
}

// PriceTable maps model names to prices; a key ending in "*" matches by prefix.
type PriceTable map[string]Price

// Lookup finds a model's price: an exact key first, then the longest matching prefix key.
func (t PriceTable) Lookup(model string) (Price, bool) {
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

// ReadPriceTable reads a JSON file {"model": {"input": 1.25, "cached_input": 0.125, "output": 10}, ...}.
func ReadPriceTable(path string) (PriceTable, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	var t PriceTable
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("price table %s: %w", path, err)
	}
	return t, nil
}

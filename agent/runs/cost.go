package runs

import (
	"sort"
	"strings"

	"github.com/pyrualean/pyrualean/prices"
)

// Where a row's cost comes from (Row.CostSource).
const (
	CostRecorded  = "recorded"     // result.json's cost_usd: the run's own prices, or the agent CLI's bill
	CostPrices    = "prices"       // the row's tokens at a price table's rates
	CostNoLLM     = "no LLM calls" // nothing was spent, at any price
	CostUnknownAs = "unknown: "    // prefix of the reason the price is unknown
)

// PriceRows fills each row's cost from its tokens. Precedence: a price from a user's file (--prices)
// over the cost result.json recorded (the prices the run was given, or an agent CLI's own bill) over
// the shipped dated table. An episode that made no LLM call costs nothing at any price; any other
// episode without a price has an unknown cost (nil), never $0.
func PriceRows(rows []Row, t *prices.Table) {
	for i := range rows {
		r := &rows[i]
		p, priced := t.Lookup(r.Model)
		recorded := r.CostSource == CostRecorded && r.Cost != nil
		switch {
		case priced && p.Origin != prices.OriginEmbedded:
		case recorded:
			continue
		case priced:
		case r.LLMCalls == 0 && r.InTok == 0 && r.OutTok == 0:
			zero := 0.0
			r.Cost, r.CostSource = &zero, CostNoLLM
			continue
		default:
			r.Cost, r.CostSource = nil, CostUnknownAs+t.Why(r.Model)
			continue
		}
		c := p.Cost(r.InTok, r.Cached, r.OutTok)
		r.Cost, r.CostSource = &c, CostPrices
	}
}

// ModelPrice is one model's price as a table used it, for the table's footnote.
type ModelPrice struct {
	Model    string        `json:"model"`
	Episodes int           `json:"episodes"`
	Price    *prices.Price `json:"price,omitempty"`    // nil: the table had none
	Recorded int           `json:"recorded,omitempty"` // episodes whose recorded cost was kept
	Unknown  string        `json:"unknown,omitempty"`  // why there is no price
}

// PricesUsed lists the models of the rows with the price each was charged at (sorted by model).
func PricesUsed(rows []Row, t *prices.Table) []ModelPrice {
	by := map[string]*ModelPrice{}
	for _, r := range rows {
		if r.CostSource == CostNoLLM {
			continue
		}
		m := by[r.Model]
		if m == nil {
			m = &ModelPrice{Model: r.Model}
			if p, ok := t.Lookup(r.Model); ok {
				m.Price = &p
			}
			by[r.Model] = m
		}
		m.Episodes++
		switch {
		case r.CostSource == CostRecorded:
			m.Recorded++
		case strings.HasPrefix(r.CostSource, CostUnknownAs):
			m.Unknown = strings.TrimPrefix(r.CostSource, CostUnknownAs)
		}
	}
	var out []ModelPrice
	for _, m := range by {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

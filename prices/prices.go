// Package prices is the one home of LLM token prices: a dated table shipped with pyrualean
// (prices.json, every entry citing where its number came from), files that override or extend it
// (--prices), lookup by model name, and the cost of a token count. A model with no price is
// unknown, never free: Lookup says so, and callers show "unknown".
package prices

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
)

//go:embed prices.json
var embedded []byte

// Schema names the dated table format (prices.json).
const Schema = "pyrualean-prices-v1"

// OriginEmbedded marks prices from the table shipped with pyrualean; a file's prices carry its path.
const OriginEmbedded = "embedded"

// Price is a model's price in US dollars per million tokens. Cached input is part of the input
// tokens (as every runtime here counts them) and charged at its own rate.
type Price struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	Output      float64 `json:"output"`
	AsOf        string  `json:"as_of,omitempty"`
	Source      string  `json:"source,omitempty"`
	Note        string  `json:"note,omitempty"`
	Origin      string  `json:"origin,omitempty"` // "embedded" or the file it came from
}

// Cost prices a token count: input includes cached, which is charged at the cached rate.
func (p Price) Cost(input, cached, output int) float64 {
	fresh := max(input-cached, 0)
	return (float64(fresh)*p.Input + float64(min(cached, input))*p.CachedInput + float64(output)*p.Output) / 1e6
}

// Table is a set of prices. Unknown names models known to have no price, with the reason.
type Table struct {
	AsOf    string            `json:"as_of,omitempty"`
	Note    string            `json:"note,omitempty"`
	Models  map[string]Price  `json:"models"`
	Unknown map[string]string `json:"unknown,omitempty"`
}

// Embedded is the dated table shipped with pyrualean.
func Embedded() (*Table, error) {
	t, err := parse(embedded, OriginEmbedded)
	if err != nil {
		return nil, fmt.Errorf("embedded price table: %w", err)
	}
	return t, nil
}

// Read reads a price file: the dated format of prices.json ({"as_of", "models": {name: {input,
// cached_input, output, source}}}) or play's flat one ({name: {input, cached_input, output}}). A
// missing cached_input is charged as input (never less than the truth).
func Read(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	t, err := parse(b, path)
	if err != nil {
		return nil, fmt.Errorf("price table %s: %w", path, err)
	}
	return t, nil
}

// entry is one price as written: a missing cached_input is told apart from 0.
type entry struct {
	Input       *float64 `json:"input"`
	CachedInput *float64 `json:"cached_input"`
	Output      *float64 `json:"output"`
	AsOf        string   `json:"as_of"`
	Source      string   `json:"source"`
	Note        string   `json:"note"`
}

type dated struct {
	Schema  string            `json:"schema"`
	AsOf    string            `json:"as_of"`
	Unit    string            `json:"unit"`
	Note    string            `json:"note"`
	Models  map[string]entry  `json:"models"`
	Unknown map[string]string `json:"unknown"`
}

func parse(b []byte, origin string) (*Table, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, err
	}
	var d dated
	if _, ok := probe["models"]; ok {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			return nil, err
		}
		if d.Schema != "" && d.Schema != Schema {
			return nil, fmt.Errorf("schema %q, want %q", d.Schema, Schema)
		}
	} else if err := json.Unmarshal(b, &d.Models); err != nil {
		return nil, fmt.Errorf("want {\"models\": {...}} or {model: {input, cached_input, output}}: %w", err)
	}
	t := &Table{AsOf: d.AsOf, Note: d.Note, Models: map[string]Price{}, Unknown: map[string]string{}}
	for name, e := range d.Models {
		p, err := e.price(origin, d.AsOf)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", name, err)
		}
		t.Models[name] = p
	}
	for name, why := range d.Unknown {
		if _, ok := t.Models[name]; ok {
			return nil, fmt.Errorf("%q is both priced and unknown", name)
		}
		t.Unknown[name] = why
	}
	return t, nil
}

func (e entry) price(origin, asOf string) (Price, error) {
	if e.Input == nil || e.Output == nil {
		return Price{}, errors.New("needs input and output (US dollars per million tokens)")
	}
	cached := e.Input
	if e.CachedInput != nil {
		cached = e.CachedInput
	}
	for _, v := range []float64{*e.Input, *cached, *e.Output} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return Price{}, fmt.Errorf("price %v: want a finite number >= 0", v)
		}
	}
	if e.AsOf != "" {
		asOf = e.AsOf
	}
	return Price{Input: *e.Input, CachedInput: *cached, Output: *e.Output, AsOf: asOf, Source: e.Source, Note: e.Note, Origin: origin}, nil
}

// Merge returns t with o's prices over it: o's entries replace t's of the same name, and a model o
// prices is no longer unknown.
func (t *Table) Merge(o *Table) *Table {
	out := &Table{AsOf: t.AsOf, Note: t.Note, Models: map[string]Price{}, Unknown: map[string]string{}}
	for k, v := range t.Models {
		out.Models[k] = v
	}
	for k, v := range t.Unknown {
		out.Unknown[k] = v
	}
	for k, v := range o.Models {
		out.Models[k] = v
		delete(out.Unknown, k)
	}
	for k, v := range o.Unknown {
		if _, priced := o.Models[k]; !priced {
			delete(out.Models, k)
			out.Unknown[k] = v
		}
	}
	return out
}

// dateSuffix is a dated snapshot's tail: -2026-09-03 or -20260903.
var dateSuffix = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8})$`)

// candidates are the names a model is looked up by, in order: as given, without a dated-snapshot
// suffix, and without a provider prefix ("openai/gpt-6-astra").
func candidates(model string) []string {
	out := []string{model}
	if s := dateSuffix.ReplaceAllString(model, ""); s != model {
		out = append(out, s)
	}
	if i := strings.LastIndexByte(model, '/'); i >= 0 && i < len(model)-1 {
		bare := model[i+1:]
		out = append(out, bare)
		if s := dateSuffix.ReplaceAllString(bare, ""); s != bare {
			out = append(out, s)
		}
	}
	return out
}

// Lookup finds a model's price: by name (as given, without a date suffix, without a provider
// prefix), then by the longest key ending in "*" that prefixes it. A model the table lists as
// unknown, or does not list, has no price.
func (t *Table) Lookup(model string) (Price, bool) {
	if t == nil || model == "" {
		return Price{}, false
	}
	for _, c := range candidates(model) {
		if _, unknown := t.Unknown[c]; unknown {
			return Price{}, false
		}
		if p, ok := t.Models[c]; ok {
			return p, true
		}
	}
	best, found := "", false
	var bp Price
	for k, p := range t.Models {
		if pre, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(model, pre) && (!found || len(pre) > len(best)) {
			best, bp, found = pre, p, true
		}
	}
	return bp, found
}

// Why says why a model has no price: the table's reason, or that it is not in the table.
func (t *Table) Why(model string) string {
	if t != nil {
		for _, c := range candidates(model) {
			if why, ok := t.Unknown[c]; ok {
				return why
			}
		}
	}
	if model == "" {
		return "no model recorded"
	}
	return "not in the price table; give one with --prices FILE"
}

// Names lists the priced models, sorted.
func (t *Table) Names() []string {
	var out []string
	for k := range t.Models {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

package runs

import (
	"sort"

	"github.com/pyrualean/pyrualean/prices"
)

// AllBenchmarks labels the table's pooled row (every instance of every benchmark, as the paper's "All").
const AllBenchmarks = "All"

// Table is the paper's "Code cells against tool calling" table: per benchmark (robot/suite) and
// over all of them, each system's success rate with its Wilson interval and the paired difference,
// and LLM calls, input tokens and cost as means per episode over the jointly solved instances,
// left -> right, with paired-bootstrap intervals of the left/right ratio.
type Table struct {
	Left  string     `json:"left"`  // the systems as named (e.g. "tools", "cells")
	Right string     `json:"right"` //
	Rows  []TableRow `json:"rows"`  // benchmarks in name order, then "All"
	// Bootstrap describes the intervals: resamples of the instances from a fixed seed.
	Bootstrap      string         `json:"bootstrap"`
	UnmatchedLeft  int            `json:"unmatched_left"` // instances one system ran and the other did not (not in the table)
	UnmatchedRight int            `json:"unmatched_right"`
	Duplicates     int            `json:"duplicates"` // instances a system ran more than once (the first is used)
	Infra          []InfraEpisode `json:"infrastructure_failures"`
	NotFinal       NotFinal       `json:"not_final"`
	Prices         []ModelPrice   `json:"prices,omitempty"`
	PricesAsOf     string         `json:"prices_as_of,omitempty"`
}

// TableRow is one benchmark of the table.
type TableRow struct {
	Benchmark     string `json:"benchmark"`
	Instances     int    `json:"instances"` // paired instances
	JointlySolved int    `json:"jointly_solved"`
	Left          Side   `json:"left"`
	Right         Side   `json:"right"`
	// SuccessDiff is right - left success (a fraction) over the instances both have an outcome for.
	SuccessDiff *Interval  `json:"success_diff"`
	LLMCalls    PairedMean `json:"llm_calls"`
	InputTokens PairedMean `json:"input_tokens"`
	Cost        PairedMean `json:"cost_usd"`
}

// Side is one system's episodes of a benchmark, counted as the original (count.go).
type Side struct {
	Episodes int       `json:"episodes"`
	Counted  int       `json:"counted"` // the success-rate denominator
	Solved   int       `json:"solved"`
	Success  *Interval `json:"success"` // Wilson 95%
	Infra    int       `json:"infrastructure_failures"`
	Unknown  int       `json:"unknown_outcome"`
	Running  int       `json:"running"`
}

// PairedMean is a per-episode mean over the jointly solved instances, left -> right, with the
// paired-bootstrap interval of left/right. For cost, Unpriced counts the jointly solved instances
// whose cost is unknown on either side: then the means and the ratio are unknown (nil).
type PairedMean struct {
	Left     *float64  `json:"left"`
	Right    *float64  `json:"right"`
	Ratio    *Interval `json:"ratio"`
	Unpriced int       `json:"unpriced,omitempty"`
}

// InfraEpisode is an infrastructure failure to rerun.
type InfraEpisode struct {
	System string `json:"system"`
	Key    string `json:"key"`
	Kind   string `json:"kind"`
	Path   string `json:"path"`
}

// NotFinal says why the table may still change: episodes eval would run again (Retryable), still
// running, or never run (Pending, from a suite's manifest).
type NotFinal struct {
	Retryable int `json:"retryable"`
	Running   int `json:"running"`
	Pending   int `json:"pending"`
}

// Final says whether nothing is left to run.
func (n NotFinal) Final() bool { return n.Retryable == 0 && n.Running == 0 && n.Pending == 0 }

// TableOptions are what a table needs besides the rows.
type TableOptions struct {
	// Retryable says whether a rerun would run the episode again (eval's rule); nil: none would.
	Retryable func(Row) bool
	Pending   int           // episodes planned and never run
	Prices    *prices.Table // for the footnote of prices used; nil: none
}

// BuildTable makes the paper's table from paired instances.
func BuildTable(pg Pairing, left, right string, opt TableOptions) Table {
	t := Table{Left: left, Right: right, Bootstrap: bootstrapText(), UnmatchedLeft: len(pg.UnmatchedLeft),
		UnmatchedRight: len(pg.UnmatchedRight), Duplicates: len(pg.Duplicates), Infra: []InfraEpisode{}, NotFinal: NotFinal{Pending: opt.Pending}}
	by := map[string][]Pair{}
	var rows []Row
	for _, p := range pg.Pairs {
		by[p.Benchmark] = append(by[p.Benchmark], p)
		rows = append(rows, p.Left, p.Right)
		for _, s := range []struct {
			name string
			r    Row
		}{{left, p.Left}, {right, p.Right}} {
			t.notFinal(s.r, opt)
			if k := Infra(s.r); k != "" {
				t.Infra = append(t.Infra, InfraEpisode{System: s.name, Key: p.Key, Kind: k, Path: s.r.Path})
			}
		}
	}
	var names []string
	for b := range by {
		names = append(names, b)
	}
	sort.Strings(names)
	for _, b := range names {
		t.Rows = append(t.Rows, tableRow(b, by[b]))
	}
	t.Rows = append(t.Rows, tableRow(AllBenchmarks, pg.Pairs))
	if opt.Prices != nil {
		t.Prices, t.PricesAsOf = PricesUsed(rows, opt.Prices), opt.Prices.AsOf
	}
	return t
}

func (t *Table) notFinal(r Row, opt TableOptions) {
	switch {
	case Outcome(r) == OutcomeRunning:
		t.NotFinal.Running++
	case opt.Retryable != nil && opt.Retryable(r):
		t.NotFinal.Retryable++
	}
}

func tableRow(bench string, pairs []Pair) TableRow {
	tr := TableRow{Benchmark: bench, Instances: len(pairs)}
	var ls, rs []Row
	var lk, rk []float64 // outcomes of the instances both sides have one for
	for _, p := range pairs {
		ls, rs = append(ls, p.Left), append(rs, p.Right)
		if Counted(p.Left) && Counted(p.Right) {
			lk, rk = append(lk, b2f(Solved(p.Left))), append(rk, b2f(Solved(p.Right)))
		}
	}
	tr.Left, tr.Right = side(ls), side(rs)
	tr.SuccessDiff = BootstrapDiff(lk, rk, BootstrapResamples)
	joint := jointlySolved(pairs)
	tr.JointlySolved = len(joint)
	tr.LLMCalls = pairedMean(joint, func(r Row) (float64, bool) { return float64(r.LLMCalls), true })
	tr.InputTokens = pairedMean(joint, func(r Row) (float64, bool) { return float64(r.InTok), true })
	tr.Cost = pairedMean(joint, func(r Row) (float64, bool) {
		if r.Cost == nil {
			return 0, false
		}
		return *r.Cost, true
	})
	return tr
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func side(rows []Row) Side {
	s := Side{Episodes: len(rows)}
	for _, r := range rows {
		switch Outcome(r) {
		case OutcomeSolved:
			s.Solved++
			s.Counted++
		case OutcomeFailed:
			s.Counted++
		case OutcomeUnknown:
			s.Unknown++
		case OutcomeRunning:
			s.Running++
		}
		if Infra(r) != "" {
			s.Infra++
		}
	}
	s.Success = Wilson(s.Solved, s.Counted)
	return s
}

// pairedMean averages val over the pairs on each side; any pair without a value (an unknown price)
// makes the figure unknown, counted in Unpriced.
func pairedMean(pairs []Pair, val func(Row) (float64, bool)) PairedMean {
	var pm PairedMean
	var l, r []float64
	for _, p := range pairs {
		lv, lok := val(p.Left)
		rv, rok := val(p.Right)
		if !lok || !rok {
			pm.Unpriced++
			continue
		}
		l, r = append(l, lv), append(r, rv)
	}
	if len(pairs) == 0 || pm.Unpriced > 0 {
		return pm
	}
	lm, rm := mean(l), mean(r)
	pm.Left, pm.Right = &lm, &rm
	pm.Ratio = BootstrapRatio(l, r, BootstrapResamples)
	return pm
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func bootstrapText() string {
	return "95% intervals: Wilson for success rates; paired bootstrap over instances (2000 resamples, fixed seed) for the success difference and the left/right ratios"
}

// SystemTable is one system's part of the paper's table, for a summary of a single system: per
// benchmark its success rate and, over its own solved episodes, mean LLM calls, input tokens and cost.
type SystemTable struct {
	System     string         `json:"system"`
	Rows       []SystemRow    `json:"rows"`
	Infra      []InfraEpisode `json:"infrastructure_failures"`
	NotFinal   NotFinal       `json:"not_final"`
	Prices     []ModelPrice   `json:"prices,omitempty"`
	PricesAsOf string         `json:"prices_as_of,omitempty"`
}

// SystemRow is one benchmark of a system table.
type SystemRow struct {
	Benchmark string `json:"benchmark"`
	Side
	PerSolved *Means `json:"per_solved"` // nil when none solved
	Unpriced  int    `json:"unpriced,omitempty"`
}

// BuildSystemTable makes one system's table from its rows.
func BuildSystemTable(system string, rows []Row, opt TableOptions) SystemTable {
	t := SystemTable{System: system, Infra: []InfraEpisode{}, NotFinal: NotFinal{Pending: opt.Pending}}
	by := map[string][]Row{}
	var tmp Table
	for _, r := range rows {
		by[Benchmark(r)] = append(by[Benchmark(r)], r)
		tmp.notFinal(r, opt)
		if k := Infra(r); k != "" {
			t.Infra = append(t.Infra, InfraEpisode{System: r.System, Key: InstanceKey(r), Kind: k, Path: r.Path})
		}
	}
	t.NotFinal.Retryable, t.NotFinal.Running = tmp.NotFinal.Retryable, tmp.NotFinal.Running
	var names []string
	for b := range by {
		names = append(names, b)
	}
	sort.Strings(names)
	for _, b := range append(names, AllBenchmarks) {
		rs := by[b]
		if b == AllBenchmarks {
			rs = rows
		}
		sr := SystemRow{Benchmark: b, Side: side(rs)}
		var solved []Row
		for _, r := range rs {
			if Solved(r) {
				solved = append(solved, r)
			}
		}
		if len(solved) > 0 {
			sr.PerSolved, sr.Unpriced = means(solved), unpriced(solved)
		}
		t.Rows = append(t.Rows, sr)
	}
	if opt.Prices != nil {
		t.Prices, t.PricesAsOf = PricesUsed(rows, opt.Prices), opt.Prices.AsOf
	}
	return t
}

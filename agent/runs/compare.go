package runs

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// ComparisonProtocol is the original's name for a strict pairing: one episode per system and key.
const ComparisonProtocol = "pyrualean-paired-v2"

// Comparison pairs two sets of runs by (robot, task, seed) and compares them on jointly solved episodes.
type Comparison struct {
	Protocol           string    `json:"protocol"`
	Pairs              int       `json:"pairs"`
	JointlySolved      int       `json:"jointly_solved"`
	LeftSR             *float64  `json:"left_success_rate"`
	RightSR            *float64  `json:"right_success_rate"`
	NativeSuccessDelta *float64  `json:"native_success_delta"`
	Left               *Means    `json:"left"`
	Right              *Means    `json:"right"`
	Ratios             Ratios    `json:"ratios"` // left / right
	Delta              Delta     `json:"delta"`  // right - left
	UnmatchedLeft      []string  `json:"unmatched_left"`
	UnmatchedRight     []string  `json:"unmatched_right"`
	Duplicates         []string  `json:"duplicates"`
	Episodes           []PairRow `json:"episodes"`
}

// Ratios are left/right on jointly solved episodes (how many times more the left side spent).
type Ratios struct {
	LLMCalls    *float64 `json:"llm_calls"`
	InputTokens *float64 `json:"input_tokens"`
	CostUSD     *float64 `json:"cost_usd"`
}

// Delta is right - left on jointly solved episodes.
type Delta struct {
	LLMCalls    float64  `json:"llm_calls"`
	InputTokens float64  `json:"input_tokens"`
	CostUSD     *float64 `json:"cost_usd"`
}

// PairRow is one paired episode.
type PairRow struct {
	Key       string `json:"key"`
	LeftOK    *bool  `json:"left_ok"`
	RightOK   *bool  `json:"right_ok"`
	LeftPath  string `json:"left_path"`
	RightPath string `json:"right_path"`
}

// Pair is one instance both systems ran.
type Pair struct {
	Key         string `json:"key"`
	Benchmark   string `json:"benchmark"`
	Left, Right Row
}

// Pairing is the outcome of pairing two systems' rows by instance key.
type Pairing struct {
	Pairs          []Pair
	UnmatchedLeft  []string // keys only the left system ran
	UnmatchedRight []string
	Duplicates     []string // "left KEY" / "right KEY": a system ran the instance more than once
}

// PairRows pairs left and right rows by InstanceKey, in key order. A key a side holds twice is
// ambiguous: it is reported, and its first row is the one paired.
func PairRows(left, right []Row) Pairing {
	p := Pairing{UnmatchedLeft: []string{}, UnmatchedRight: []string{}, Duplicates: []string{}}
	index := func(rows []Row, side string) map[string]Row {
		m := map[string]Row{}
		for _, r := range rows {
			k := InstanceKey(r)
			if _, dup := m[k]; dup {
				p.Duplicates = append(p.Duplicates, side+" "+k)
				continue
			}
			m[k] = r
		}
		return m
	}
	lm, rm := index(left, "left"), index(right, "right")
	var keys []string
	for k := range lm {
		if _, ok := rm[k]; ok {
			keys = append(keys, k)
		} else {
			p.UnmatchedLeft = append(p.UnmatchedLeft, k)
		}
	}
	for k := range rm {
		if _, ok := lm[k]; !ok {
			p.UnmatchedRight = append(p.UnmatchedRight, k)
		}
	}
	sort.Strings(keys)
	sort.Strings(p.UnmatchedLeft)
	sort.Strings(p.UnmatchedRight)
	for _, k := range keys {
		p.Pairs = append(p.Pairs, Pair{Key: k, Benchmark: Benchmark(lm[k]), Left: lm[k], Right: rm[k]})
	}
	return p
}

// jointlySolved are the pairs both systems solved.
func jointlySolved(pairs []Pair) []Pair {
	var out []Pair
	for _, p := range pairs {
		if Solved(p.Left) && Solved(p.Right) {
			out = append(out, p)
		}
	}
	return out
}

// Compare pairs left and right rows. Duplicated keys make the pairing ambiguous and are reported.
func Compare(left, right []Row) Comparison {
	pg := PairRows(left, right)
	c := Comparison{Protocol: ComparisonProtocol, UnmatchedLeft: pg.UnmatchedLeft, UnmatchedRight: pg.UnmatchedRight,
		Duplicates: pg.Duplicates, Episodes: []PairRow{}}
	var pl, pr, jl, jr []Row
	for _, p := range pg.Pairs {
		c.Episodes = append(c.Episodes, PairRow{Key: p.Key, LeftOK: p.Left.OK, RightOK: p.Right.OK, LeftPath: p.Left.Path, RightPath: p.Right.Path})
		pl, pr = append(pl, p.Left), append(pr, p.Right)
	}
	for _, p := range jointlySolved(pg.Pairs) {
		jl, jr = append(jl, p.Left), append(jr, p.Right)
	}
	c.Pairs = len(pg.Pairs)
	c.JointlySolved = len(jl)
	c.LeftSR, c.RightSR = Summarize(pl).NativeSR, Summarize(pr).NativeSR
	if c.LeftSR != nil && c.RightSR != nil {
		d := *c.RightSR - *c.LeftSR
		c.NativeSuccessDelta = &d
	}
	if len(jl) > 0 {
		c.Left, c.Right = means(jl), means(jr)
		c.Ratios.LLMCalls = ratio(c.Left.LLMCalls, c.Right.LLMCalls)
		c.Ratios.InputTokens = ratio(c.Left.InputTokens, c.Right.InputTokens)
		c.Delta.LLMCalls = c.Right.LLMCalls - c.Left.LLMCalls
		c.Delta.InputTokens = c.Right.InputTokens - c.Left.InputTokens
		if c.Left.CostUSD != nil && c.Right.CostUSD != nil {
			c.Ratios.CostUSD = ratio(*c.Left.CostUSD, *c.Right.CostUSD)
			d := *c.Right.CostUSD - *c.Left.CostUSD
			c.Delta.CostUSD = &d
		}
	}
	return c
}

func ratio(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	v := a / b
	return &v
}

// WriteComparisonTable prints the original's headline table: left -> right on jointly solved episodes.
func WriteComparisonTable(w io.Writer, c Comparison) {
	pct := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100**p)
	}
	fmt.Fprintf(w, "pairs %d  jointly solved %d  success %s -> %s\n", c.Pairs, c.JointlySolved, pct(c.LeftSR), pct(c.RightSR))
	if c.Left == nil {
		fmt.Fprintln(w, "no jointly solved episodes: nothing to compare on cost")
	} else {
		rt := func(p *float64) string {
			if p == nil {
				return "-"
			}
			return fmt.Sprintf("%.2fx", *p)
		}
		fmt.Fprintf(w, "%-26s %14s %14s %10s\n", "per jointly solved episode", "left", "right", "left/right")
		fmt.Fprintf(w, "%-26s %14.1f %14.1f %10s\n", "LLM calls", c.Left.LLMCalls, c.Right.LLMCalls, rt(c.Ratios.LLMCalls))
		fmt.Fprintf(w, "%-26s %14.0f %14.0f %10s\n", "input tokens", c.Left.InputTokens, c.Right.InputTokens, rt(c.Ratios.InputTokens))
		fmt.Fprintf(w, "%-26s %14s %14s %10s\n", "cost", fmtCost(c.Left.CostUSD, -1), fmtCost(c.Right.CostUSD, -1), rt(c.Ratios.CostUSD))
	}
	for _, k := range c.UnmatchedLeft {
		fmt.Fprintf(w, "unmatched left: %s\n", k)
	}
	for _, k := range c.UnmatchedRight {
		fmt.Fprintf(w, "unmatched right: %s\n", k)
	}
	for _, k := range c.Duplicates {
		fmt.Fprintf(w, "duplicate: %s\n", k)
	}
}

// Default systems of a comparison: the paper's "tool calling -> cells".
const (
	DefaultLeftSystem  = "tools"
	DefaultRightSystem = "cells"
)

// MatchSystem says whether spec names the row's system: the whole system ("pyrualean:cells",
// "rpent:tools"), its arm ("cells", "tools"), or its name ("pyrualean", "rpent"), optionally
// followed by "@MODEL" to take one model's episodes only.
func MatchSystem(spec string, r Row) bool {
	name, model, withModel := strings.Cut(spec, "@")
	if withModel && r.Model != model {
		return false
	}
	sys, arm, _ := strings.Cut(r.System, ":")
	return name == r.System || name == arm || name == sys
}

// SplitSystems takes the rows each spec names; a row both name goes to neither and is returned in
// both (a comparison of a system with itself is refused by the caller).
func SplitSystems(rows []Row, left, right string) (l, r, both []Row) {
	for _, row := range rows {
		ml, mr := MatchSystem(left, row), MatchSystem(right, row)
		switch {
		case ml && mr:
			both = append(both, row)
		case ml:
			l = append(l, row)
		case mr:
			r = append(r, row)
		}
	}
	return l, r, both
}

// Systems lists the distinct systems of rows, sorted.
func Systems(rows []Row) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rows {
		if !seen[r.System] {
			seen[r.System] = true
			out = append(out, r.System)
		}
	}
	sort.Strings(out)
	return out
}

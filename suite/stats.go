package suite

import (
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/pyrualean/pyrualean/agent/runs"
	"github.com/pyrualean/pyrualean/spec"
)

// Interval is an estimate with its 95% confidence interval.
type Interval struct {
	Value float64 `json:"value"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
}

func (iv *Interval) String() string {
	if iv == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f [%.2f, %.2f]", iv.Value, iv.Lo, iv.Hi)
}

// Wilson is the 95% Wilson score interval of k successes in n trials; nil when n is 0.
func Wilson(k, n int) *Interval {
	if n == 0 {
		return nil
	}
	const z = 1.959963984540054
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	centre := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return &Interval{Value: p, Lo: max(0, centre-half), Hi: min(1, centre+half)}
}

// BootstrapRatio is mean(left)/mean(right) over paired samples with a 95% percentile interval from
// resampling the pairs (fixed seed: the same runs give the same interval). nil without pairs or when
// the right side sums to zero.
func BootstrapRatio(left, right []float64, resamples int) *Interval {
	n := len(left)
	if n == 0 || n != len(right) {
		return nil
	}
	ratio := func(idx func(i int) int) (float64, bool) {
		var l, r float64
		for i := range n {
			j := idx(i)
			l += left[j]
			r += right[j]
		}
		if r == 0 {
			return 0, false
		}
		return l / r, true
	}
	point, ok := ratio(func(i int) int { return i })
	if !ok {
		return nil
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var rs []float64
	for range resamples {
		if v, ok := ratio(func(int) int { return rng.IntN(n) }); ok {
			rs = append(rs, v)
		}
	}
	if len(rs) == 0 {
		return &Interval{Value: point, Lo: point, Hi: point}
	}
	sort.Float64s(rs)
	q := func(p float64) float64 { return rs[min(len(rs)-1, int(p*float64(len(rs))))] }
	return &Interval{Value: point, Lo: q(0.025), Hi: q(0.975)}
}

// Record is one episode of the suite with its run folder's row.
type Record struct {
	EpisodeState
	Row runs.Row `json:"row"`
}

// Group is the episodes that differ only in arm, task and seed: one robot, suite, runtime, model and
// settings. Its arms are compared pairwise.
func (e Episode) Group() string {
	parts := strings.Split(e.ID, "/")
	return strings.Join([]string{parts[0], parts[1], parts[5], parts[6]}, "/")
}

// ArmStats is one arm's success rate.
type ArmStats struct {
	Arm      string    `json:"arm"`
	Episodes int       `json:"episodes"`
	Known    int       `json:"known"` // episodes with an outcome (the success-rate denominator)
	Solved   int       `json:"solved"`
	Success  *Interval `json:"success_rate"` // Wilson
}

// Paired is the cells-vs-tools comparison of a group on jointly solved episodes: the seed's table,
// plus bootstrap intervals of the cells/tools ratios.
type Paired struct {
	runs.Comparison
	LLMCallsRatio    *Interval `json:"llm_calls_ratio"`
	InputTokensRatio *Interval `json:"input_tokens_ratio"`
	CostRatio        *Interval `json:"cost_ratio"`
}

// FamilyStats is one task family's arms within a group.
type FamilyStats struct {
	Family string     `json:"family"`
	Arms   []ArmStats `json:"arms"`
}

// GroupStats is a group's results.
type GroupStats struct {
	Group    string        `json:"group"`
	Arms     []ArmStats    `json:"arms"`
	Paired   *Paired       `json:"paired,omitempty"`
	Families []FamilyStats `json:"families"`
}

// Results are a suite's statistics.
type Results struct {
	Episodes int          `json:"episodes"`
	Finished int          `json:"finished"`
	Summary  runs.Summary `json:"summary"`
	Groups   []GroupStats `json:"groups"`
}

// LoadRecords reads every episode of the manifest with its run folder's row (episodes without a
// result.json yet have a zero row).
func LoadRecords(dir string, m *Manifest) []Record {
	var out []Record
	for _, id := range m.Order {
		st := m.Episodes[id]
		rec := Record{EpisodeState: *st}
		if row, err := runs.LoadRun(filepath.Join(dir, filepath.FromSlash(st.Dir))); err == nil {
			rec.Row = row
			rec.Status, rec.Success = row.Status, row.OK
		}
		out = append(out, rec)
	}
	return out
}

func armStats(arm string, recs []Record) ArmStats {
	var rows []runs.Row
	for _, r := range recs {
		rows = append(rows, r.Row)
	}
	s := runs.Summarize(rows)
	return ArmStats{Arm: arm, Episodes: len(recs), Known: s.NativeSRDenominator, Solved: s.Solved, Success: Wilson(s.Solved, s.NativeSRDenominator)}
}

func byArm(recs []Record) []ArmStats {
	arms := map[string][]Record{}
	for _, r := range recs {
		arms[r.Arm] = append(arms[r.Arm], r)
	}
	var out []ArmStats
	for _, a := range slices.Sorted(maps.Keys(arms)) {
		out = append(out, armStats(a, arms[a]))
	}
	return out
}

// Analyze computes the suite's results: overall summary, and per group the arms' success rates,
// the paired comparison and a per-family breakdown.
func Analyze(recs []Record) Results {
	res := Results{Episodes: len(recs)}
	var rows []runs.Row
	groups := map[string][]Record{}
	for _, r := range recs {
		if r.Row.Path == "" || Retryable(r.Status) {
			continue
		}
		res.Finished++
		rows = append(rows, r.Row)
		groups[r.Group()] = append(groups[r.Group()], r)
	}
	res.Summary = runs.Summarize(rows)
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		recs := groups[g]
		gs := GroupStats{Group: g, Arms: byArm(recs)}
		fams := map[string][]Record{}
		for _, r := range recs {
			fams[r.Family] = append(fams[r.Family], r)
		}
		for _, f := range slices.Sorted(maps.Keys(fams)) {
			gs.Families = append(gs.Families, FamilyStats{Family: f, Arms: byArm(fams[f])})
		}
		gs.Paired = pair(recs)
		res.Groups = append(res.Groups, gs)
	}
	return res
}

// pair compares the cells arm (left) with the tools arm (right) of a group.
func pair(recs []Record) *Paired {
	var left, right []runs.Row
	byPath := map[string]runs.Row{}
	for _, r := range recs {
		byPath[r.Row.Path] = r.Row
		switch r.Arm {
		case spec.ArmCells:
			left = append(left, r.Row)
		case spec.ArmTools:
			right = append(right, r.Row)
		}
	}
	if len(left) == 0 || len(right) == 0 {
		return nil
	}
	p := &Paired{Comparison: runs.Compare(left, right)}
	var lc, rc, lt, rt, lcost, rcost []float64
	costs := true
	for _, e := range p.Episodes {
		if e.LeftOK == nil || e.RightOK == nil || !*e.LeftOK || !*e.RightOK {
			continue
		}
		l, r := byPath[e.LeftPath], byPath[e.RightPath]
		lc, rc = append(lc, float64(l.LLMCalls)), append(rc, float64(r.LLMCalls))
		lt, rt = append(lt, float64(l.InTok)), append(rt, float64(r.InTok))
		if l.Cost == nil || r.Cost == nil {
			costs = false
		} else {
			lcost, rcost = append(lcost, *l.Cost), append(rcost, *r.Cost)
		}
	}
	p.LLMCallsRatio = BootstrapRatio(lc, rc, 2000)
	p.InputTokensRatio = BootstrapRatio(lt, rt, 2000)
	if costs {
		p.CostRatio = BootstrapRatio(lcost, rcost, 2000)
	}
	return p
}

// WriteResults prints the seed's summarize table, then per group the arms with Wilson intervals,
// the paired comparison with bootstrap intervals, and the per-family success rates.
func WriteResults(w io.Writer, recs []Record, res Results) {
	var rows []runs.Row
	for _, r := range recs {
		if r.Row.Path != "" && !Retryable(r.Status) {
			rows = append(rows, r.Row)
		}
	}
	runs.WriteSummaryTable(w, rows, res.Summary)
	if res.Finished < res.Episodes {
		fmt.Fprintf(w, "unfinished: %d of %d episodes (run the same command again to resume)\n", res.Episodes-res.Finished, res.Episodes)
	}
	for _, g := range res.Groups {
		fmt.Fprintf(w, "\n== %s\n", g.Group)
		for _, a := range g.Arms {
			fmt.Fprintf(w, "  %-6s success %s (%d/%d, Wilson 95%%)\n", a.Arm, pctInterval(a.Success), a.Solved, a.Known)
		}
		if p := g.Paired; p != nil {
			fmt.Fprintln(w, "  cells (left) vs tools (right), paired by task and seed:")
			var b strings.Builder
			runs.WriteComparisonTable(&b, p.Comparison)
			for line := range strings.SplitSeq(strings.TrimRight(b.String(), "\n"), "\n") {
				fmt.Fprintln(w, "    "+line)
			}
			if p.JointlySolved > 0 {
				fmt.Fprintf(w, "    cells/tools ratio, bootstrap 95%%: llm calls %s  input tokens %s  cost %s\n",
					p.LLMCallsRatio, p.InputTokensRatio, p.CostRatio)
			}
		}
		if len(g.Families) > 1 {
			fmt.Fprintln(w, "  per family:")
			for _, f := range g.Families {
				var parts []string
				for _, a := range f.Arms {
					parts = append(parts, fmt.Sprintf("%s %s (%d/%d)", a.Arm, pctInterval(a.Success), a.Solved, a.Known))
				}
				fmt.Fprintf(w, "    %-14s %s\n", f.Family, strings.Join(parts, "  "))
			}
		}
	}
}

func pctInterval(iv *Interval) string {
	if iv == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%% [%.0f, %.0f]", 100*iv.Value, 100*iv.Lo, 100*iv.Hi)
}

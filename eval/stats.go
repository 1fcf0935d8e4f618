package eval

import (
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pyrualean/pyrualean/agent/runs"
	"github.com/pyrualean/pyrualean/atomicfile"
	"github.com/pyrualean/pyrualean/prices"
	"github.com/pyrualean/pyrualean/spec"
)

// Interval is an estimate with its 95% confidence interval (agent/runs is its home).
type Interval = runs.Interval

// Wilson is the 95% Wilson score interval of k successes in n trials (runs.Wilson).
func Wilson(k, n int) *Interval { return runs.Wilson(k, n) }

// BootstrapRatio is mean(left)/mean(right) over paired samples with a seeded 95% bootstrap
// interval (runs.BootstrapRatio).
func BootstrapRatio(left, right []float64, resamples int) *Interval {
	return runs.BootstrapRatio(left, right, resamples)
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

// Setup is what one paper table holds across benchmarks: one runtime-model and settings.
func (e Episode) Setup() string {
	parts := strings.Split(e.ID, "/")
	return strings.Join(parts[5:7], "/") // without a sample part: a group's samples share a setup
}

// ArmStats is one arm's success rate, counted as the original counts (agent/runs count.go): every
// episode with a result is in the denominator, infrastructure failures included.
type ArmStats struct {
	Arm      string    `json:"arm"`
	Episodes int       `json:"episodes"`
	Known    int       `json:"known"` // episodes with an outcome (the success-rate denominator)
	Solved   int       `json:"solved"`
	Infra    int       `json:"infrastructure_failures"` // failed episodes eval or a person may rerun
	Success  *Interval `json:"success_rate"`            // Wilson
}

// Paired is the cells-vs-tools comparison of a group on jointly solved episodes: the original's table,
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

// PaperTable is the paper's table (tool calling -> cells, per benchmark) of one runtime-model and
// settings.
type PaperTable struct {
	Setup string `json:"setup"` // runtime-model/settings
	runs.Table
}

// Results are a suite's statistics.
type Results struct {
	Episodes int `json:"episodes"`
	// Finished episodes are in a final state: eval would not run them again.
	Finished int `json:"finished"`
	// Retryable episodes ended in a status eval runs again (boot_error, planner_error, interrupted):
	// they count as failed, and the figures are not final until a rerun.
	Retryable int `json:"retryable"`
	// Pending episodes never ran (no readable result): they are in no figure.
	Pending int          `json:"pending"`
	Summary runs.Summary `json:"summary"`
	Groups  []GroupStats `json:"groups"`
	Tables  []PaperTable `json:"paper_tables"`
}

// LoadRecords reads every episode of the manifest with its run folder's row (episodes without a
// result.json yet have a zero row); costs are priced with the shipped price table.
func LoadRecords(dir string, m *Manifest) []Record {
	return LoadRecordsPriced(dir, m, shippedPrices())
}

// shippedPrices is the shipped price table; nil if it does not parse (a broken build: every cost
// then reads unknown rather than wrong; prices' own tests keep it parsing).
func shippedPrices() *prices.Table {
	t, err := prices.Embedded()
	if err != nil {
		return nil
	}
	return t
}

// LoadRecordsPriced is LoadRecords with a price table of the caller's (e.g. with --prices over it).
func LoadRecordsPriced(dir string, m *Manifest, t *prices.Table) []Record {
	var out []Record
	for _, id := range m.Order {
		st := m.Episodes[id]
		rec := Record{EpisodeState: *st}
		if row, err := runs.LoadRun(filepath.Join(dir, filepath.FromSlash(st.Dir))); err == nil {
			rows := []runs.Row{row}
			runs.PriceRows(rows, t)
			rec.Row = rows[0]
			rec.Status, rec.Success = row.Status, row.OK
		}
		out = append(out, rec)
	}
	return out
}

// ran says whether the episode has a run folder with a result.
func (r Record) ran() bool { return r.Row.Path != "" }

func armStats(arm string, recs []Record) ArmStats {
	var rows []runs.Row
	for _, r := range recs {
		rows = append(rows, r.Row)
	}
	s := runs.Summarize(rows)
	infra := 0
	for _, n := range s.Infra {
		infra += n
	}
	return ArmStats{Arm: arm, Episodes: len(recs), Known: s.NativeSRDenominator, Solved: s.Solved, Infra: infra, Success: Wilson(s.Solved, s.NativeSRDenominator)}
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

// Analyze computes the suite's results: overall summary, per group the arms' success rates, the
// paired comparison and a per-family breakdown, and per runtime-model and settings the paper's
// table. Every episode that ran is counted (as the original: an infrastructure failure is a failed
// episode); those eval would run again are counted in Retryable, and the tables say they are not final.
func Analyze(recs []Record) Results { return AnalyzeWith(recs, shippedPrices()) }

// AnalyzeWith is Analyze naming the price table the records were priced with (for the tables' footnotes).
func AnalyzeWith(recs []Record, t *prices.Table) Results {
	res := Results{Episodes: len(recs)}
	var rows []runs.Row
	groups := map[string][]Record{}
	setups := map[string][]Record{}
	for _, r := range recs {
		setups[r.Setup()] = append(setups[r.Setup()], r)
		switch {
		case !r.ran():
			res.Pending++
			continue
		case Retryable(r.Status):
			res.Retryable++
		default:
			res.Finished++
		}
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
	for _, s := range slices.Sorted(maps.Keys(setups)) {
		if pt := paperTable(setups[s], t); pt != nil {
			res.Tables = append(res.Tables, PaperTable{Setup: s, Table: *pt})
		}
	}
	return res
}

// paperTable is tools -> cells over one setup's episodes; nil unless both arms ran.
func paperTable(recs []Record, pt *prices.Table) *runs.Table {
	var tools, cells []runs.Row
	pending := 0
	for _, r := range recs {
		switch {
		case !r.ran():
			pending++
		case r.Arm == spec.ArmTools:
			tools = append(tools, r.Row)
		case r.Arm == spec.ArmCells:
			cells = append(cells, r.Row)
		}
	}
	if len(tools) == 0 || len(cells) == 0 {
		return nil
	}
	t := runs.BuildTable(runs.PairRows(tools, cells), spec.ArmTools, spec.ArmCells, runs.TableOptions{
		Retryable: func(r runs.Row) bool { return Retryable(r.Status) }, Pending: pending, Prices: pt})
	return &t
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
	p.LLMCallsRatio = BootstrapRatio(lc, rc, runs.BootstrapResamples)
	p.InputTokensRatio = BootstrapRatio(lt, rt, runs.BootstrapResamples)
	if costs {
		p.CostRatio = BootstrapRatio(lcost, rcost, runs.BootstrapResamples)
	}
	return p
}

// WriteResults prints the original's summarize table, then per group the arms with Wilson intervals,
// the paired comparison with bootstrap intervals, the per-family success rates, and the paper's
// table per runtime-model and settings.
func WriteResults(w io.Writer, recs []Record, res Results) {
	var rows []runs.Row
	for _, r := range recs {
		if r.ran() {
			rows = append(rows, r.Row)
		}
	}
	runs.WriteSummaryTable(w, rows, res.Summary)
	if res.Pending+res.Retryable > 0 {
		fmt.Fprintf(w, "not final: %d of %d episodes never ran, %d end in a status eval runs again (counted as failed until then); run the same command again to resume\n",
			res.Pending, res.Episodes, res.Retryable)
	}
	for _, g := range res.Groups {
		fmt.Fprintf(w, "\n== %s\n", g.Group)
		for _, a := range g.Arms {
			fmt.Fprintf(w, "  %-6s success %s (%d/%d, Wilson 95%%)", a.Arm, pctInterval(a.Success), a.Solved, a.Known)
			if a.Infra > 0 {
				fmt.Fprintf(w, "  infrastructure failures %d (counted as failed)", a.Infra)
			}
			fmt.Fprintln(w)
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
	for _, t := range res.Tables {
		fmt.Fprintf(w, "\n== paper table, %s\n", t.Setup)
		runs.WriteTable(w, t.Table, runs.FormatText)
	}
}

func pctInterval(iv *Interval) string {
	if iv == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%% [%.0f, %.0f]", 100*iv.Value, 100*iv.Lo, 100*iv.Hi)
}

// SaveResults reads a suite's records, computes its statistics and writes them to results.json (whole,
// atomically).
func SaveResults(dir string, m *Manifest) ([]Record, Results, error) {
	recs := LoadRecords(dir, m)
	res := Analyze(recs)
	if err := atomicfile.WriteJSON(filepath.Join(dir, "results.json"), res); err != nil {
		return recs, res, fmt.Errorf("results.json: %w", err)
	}
	return recs, res, nil
}

package runs

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Output formats of the tables.
const (
	FormatText     = "text"
	FormatMarkdown = "md"
	FormatLaTeX    = "latex"
	FormatCSV      = "csv"
	FormatJSON     = "json"
)

// Formats lists the formats WriteTable takes.
func Formats() []string {
	return []string{FormatText, FormatMarkdown, FormatLaTeX, FormatCSV, FormatJSON}
}

// maxListed bounds the infrastructure failures listed by path in text and Markdown (all are in JSON).
const maxListed = 20

// Grid is a table's cells and notes as printed: the text, Markdown and LaTeX writers and the HTML
// report all show these cells, so a figure is formatted in one place.
type Grid struct {
	Title  string
	Header []string
	Rows   [][]string
	Notes  []string // a note starting with two spaces is an item of the note before it
	Right  []bool   // right-aligned columns (numbers)
}

// TableGrid is the paper's table as cells (format: the writer it is for; LaTeX lists fewer paths).
func TableGrid(t Table, format string) Grid { return tableGrid(t, format) }

// SystemGrid is one system's table as cells.
func SystemGrid(t SystemTable, format string) Grid { return systemGrid(t, format) }

// WriteTable prints the paper's table in a format (text, md, latex, csv, json).
func WriteTable(w io.Writer, t Table, format string) error {
	switch format {
	case FormatJSON:
		return writeJSON(w, t)
	case FormatCSV:
		return writeTableCSV(w, t)
	}
	return writeGrid(w, tableGrid(t, format), format)
}

// WriteSystemTable prints one system's table in a format (text, md, latex, csv, json).
func WriteSystemTable(w io.Writer, t SystemTable, format string) error {
	return WriteSystemTables(w, []SystemTable{t}, format)
}

// WriteSystemTables prints several systems' tables: one after the other, one CSV (a system column
// tells them apart) or one JSON array.
func WriteSystemTables(w io.Writer, ts []SystemTable, format string) error {
	switch format {
	case FormatJSON:
		return writeJSON(w, ts)
	case FormatCSV:
		return writeSystemCSV(w, ts)
	}
	for i, t := range ts {
		if i > 0 {
			io.WriteString(w, "\n")
		}
		if err := writeGrid(w, systemGrid(t, format), format); err != nil {
			return err
		}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func tableGrid(t Table, format string) Grid {
	g := Grid{
		Title: fmt.Sprintf("Code cells against tool calling: %s → %s, per benchmark (robot/suite)", t.Left, t.Right),
		Header: []string{"benchmark", "n", "jointly solved", "success " + t.Left + " (%)", "success " + t.Right + " (%)",
			"difference (points)", "LLM calls", "input tokens", "cost (US$)"},
		Right: []bool{false, true, true},
	}
	for _, r := range t.Rows {
		g.Rows = append(g.Rows, []string{r.Benchmark, strconv.Itoa(r.Instances), strconv.Itoa(r.JointlySolved),
			pctCell(r.Left.Success), pctCell(r.Right.Success), diffCell(r.SuccessDiff),
			pairedCell(r.LLMCalls, r.JointlySolved, fmtCalls), pairedCell(r.InputTokens, r.JointlySolved, fmtTokens),
			pairedCell(r.Cost, r.JointlySolved, fmtUSD)})
	}
	g.Notes = append(g.Notes,
		fmt.Sprintf("n: instances both systems ran (same robot, suite:task, seed). LLM calls, input tokens and cost: means per episode over the jointly solved instances, %s → %s, then %s/%s with its interval.", t.Left, t.Right, t.Left, t.Right),
		"Success counts every episode as the original does: a crash, a timeout, a boot, planner or infrastructure failure is a failed episode; only an RPent run without states.json has an unknown outcome (left out, counted).",
		t.Bootstrap+".")
	g.Notes = append(g.Notes, sidesNotes(t)...)
	g.Notes = append(g.Notes, infraNotes(t.Infra, format)...)
	g.Notes = append(g.Notes, notFinalNote(t.NotFinal)...)
	if t.UnmatchedLeft+t.UnmatchedRight+t.Duplicates > 0 {
		g.Notes = append(g.Notes, fmt.Sprintf("NOT PAIRED: %d instance(s) only %s ran, %d only %s ran, %d run more than once (first one used); they are not in the table.",
			t.UnmatchedLeft, t.Left, t.UnmatchedRight, t.Right, t.Duplicates))
	}
	g.Notes = append(g.Notes, pricesNote(t.Prices, t.PricesAsOf)...)
	return g
}

// sidesNotes says what each side left out of its denominator.
func sidesNotes(t Table) []string {
	if len(t.Rows) == 0 {
		return nil
	}
	all := t.Rows[len(t.Rows)-1]
	var out []string
	for _, s := range []struct {
		name string
		side Side
	}{{t.Left, all.Left}, {t.Right, all.Right}} {
		if s.side.Unknown > 0 || s.side.Running > 0 {
			out = append(out, fmt.Sprintf("%s: %d episode(s) with an unknown outcome and %d still running are outside its success denominator.", s.name, s.side.Unknown, s.side.Running))
		}
	}
	return out
}

func systemGrid(t SystemTable, format string) Grid {
	g := Grid{
		Title:  fmt.Sprintf("%s per benchmark (robot/suite)", t.System),
		Header: []string{"benchmark", "episodes", "success (%)", "infrastructure failures", "LLM calls per solved", "input tokens per solved", "cost per solved (US$)"},
		Right:  []bool{false, true, false, true},
	}
	for _, r := range t.Rows {
		calls, toks, cost := "—", "—", "—"
		if m := r.PerSolved; m != nil {
			calls, toks = fmtCalls(m.LLMCalls), fmtTokens(m.InputTokens)
			cost = unknownCost(r.Unpriced, m.Episodes)
			if m.CostUSD != nil {
				cost = fmtUSD(*m.CostUSD)
			}
		}
		g.Rows = append(g.Rows, []string{r.Benchmark, strconv.Itoa(r.Episodes), pctCell(r.Success), strconv.Itoa(r.Infra), calls, toks, cost})
	}
	g.Notes = append(g.Notes, "Success counts every episode as the original does (failures of every kind in the denominator); means are over the system's own solved episodes. Success: Wilson 95% interval.")
	g.Notes = append(g.Notes, infraNotes(t.Infra, format)...)
	g.Notes = append(g.Notes, notFinalNote(t.NotFinal)...)
	g.Notes = append(g.Notes, pricesNote(t.Prices, t.PricesAsOf)...)
	return g
}

func pctCell(iv *Interval) string {
	if iv == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f [%.1f, %.1f]", 100*iv.Value, 100*iv.Lo, 100*iv.Hi)
}

func diffCell(iv *Interval) string {
	if iv == nil {
		return "—"
	}
	return fmt.Sprintf("%+.1f [%+.1f, %+.1f]", 100*iv.Value, 100*iv.Lo, 100*iv.Hi)
}

func pairedCell(pm PairedMean, joint int, f func(float64) string) string {
	switch {
	case joint == 0:
		return "— (none jointly solved)"
	case pm.Left == nil || pm.Right == nil:
		return unknownCost(pm.Unpriced, joint)
	}
	s := f(*pm.Left) + " → " + f(*pm.Right)
	if pm.Ratio != nil {
		s += fmt.Sprintf(" (%.2f× [%.2f, %.2f])", pm.Ratio.Value, pm.Ratio.Lo, pm.Ratio.Hi)
	}
	return s
}

func unknownCost(unpriced, of int) string {
	return fmt.Sprintf("unknown (%d of %d without a price)", unpriced, of)
}

func fmtCalls(v float64) string { return fmt.Sprintf("%.1f", v) }

// fmtTokens writes token counts as the paper does: 273k, 1.23M.
func fmtTokens(v float64) string {
	switch {
	case v < 1000:
		return fmt.Sprintf("%.0f", v)
	case v < 10_000:
		return fmt.Sprintf("%.2fk", v/1e3)
	case v < 100_000:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v < 999_500:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.2fM", v/1e6)
}

func fmtUSD(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v >= 1:
		return fmt.Sprintf("$%.2f", v)
	case v >= 0.01:
		return fmt.Sprintf("$%.3f", v)
	}
	return fmt.Sprintf("$%.4f", v)
}

// infraNotes say which episodes failed for reasons outside the policy, so a user knows what to rerun.
func infraNotes(eps []InfraEpisode, format string) []string {
	if len(eps) == 0 {
		return nil
	}
	by := map[string]map[string]int{}
	for _, e := range eps {
		if by[e.System] == nil {
			by[e.System] = map[string]int{}
		}
		by[e.System][e.Kind]++
	}
	var parts []string
	for _, s := range sortedKeys(by) {
		parts = append(parts, fmt.Sprintf("%s %s", s, counts(by[s])))
	}
	out := []string{fmt.Sprintf("Infrastructure failures, counted as failed episodes (as the original): %s. "+
		"To rerun: eval runs boot_error, planner_error and interrupted episodes again when the same eval command runs again "+
		"(up to --retries times each run); an error before any action needs a fixed setup and a new run.", strings.Join(parts, "; "))}
	if format == FormatLaTeX {
		return out
	}
	for i, e := range eps {
		if i == maxListed {
			out = append(out, fmt.Sprintf("  ... and %d more (--format json lists all)", len(eps)-maxListed))
			break
		}
		out = append(out, fmt.Sprintf("  %s %s %s: %s", e.System, e.Kind, e.Key, e.Path))
	}
	return out
}

func notFinalNote(n NotFinal) []string {
	if n.Final() {
		return nil
	}
	return []string{fmt.Sprintf("NOT FINAL: %d episode(s) end in a status eval runs again (boot_error, planner_error, interrupted: run the same eval command again), %d still running, %d never ran.",
		n.Retryable, n.Running, n.Pending)}
}

func pricesNote(ps []ModelPrice, asOf string) []string {
	if len(ps) == 0 {
		return nil
	}
	var parts []string
	for _, p := range ps {
		name := p.Model
		if name == "" {
			name = "(no model recorded)"
		}
		switch {
		case p.Unknown != "":
			parts = append(parts, fmt.Sprintf("%s: unknown (%s)", name, p.Unknown))
		case p.Price != nil:
			s := fmt.Sprintf("%s: %g/%g/%g", name, p.Price.Input, p.Price.CachedInput, p.Price.Output)
			if p.Price.Origin != "" {
				s += " from " + p.Price.Origin
			}
			if p.Price.AsOf != "" {
				s += " as of " + p.Price.AsOf
			}
			if p.Recorded > 0 {
				s += fmt.Sprintf(" (%d episode(s) keep the cost they recorded)", p.Recorded)
			}
			parts = append(parts, s)
		default:
			parts = append(parts, fmt.Sprintf("%s: the cost each episode recorded", name))
		}
	}
	head := "Prices, US$ per million input/cached input/output tokens"
	if asOf != "" {
		head += " (shipped table as of " + asOf + "; --prices FILE overrides)"
	}
	return []string{head + ": " + strings.Join(parts, "; ") + "."}
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// writeGrid prints a grid as aligned text, a Markdown table or a LaTeX tabular.
func writeGrid(w io.Writer, g Grid, format string) error {
	switch format {
	case FormatText, "":
		return writeText(w, g)
	case FormatMarkdown:
		return writeMarkdown(w, g)
	case FormatLaTeX:
		return writeLaTeX(w, g)
	}
	return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats(), ", "))
}

func writeText(w io.Writer, g Grid) error {
	width := make([]int, len(g.Header))
	for i, h := range g.Header {
		width[i] = len([]rune(h))
	}
	for _, r := range g.Rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(cells []string) string {
		var b strings.Builder
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i < len(g.Right) && g.Right[i] {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
			if i < len(cells)-1 {
				b.WriteString("  ")
			}
		}
		return strings.TrimRight(b.String(), " ")
	}
	var b strings.Builder
	b.WriteString(g.Title + "\n")
	b.WriteString(line(g.Header) + "\n")
	total := 2 * (len(width) - 1)
	for _, n := range width {
		total += n
	}
	b.WriteString(strings.Repeat("-", total) + "\n")
	for _, r := range g.Rows {
		b.WriteString(line(r) + "\n")
	}
	for _, n := range g.Notes {
		b.WriteString(n + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeMarkdown(w io.Writer, g Grid) error {
	esc := func(s string) string {
		return strings.ReplaceAll(s, "|", `\|`)
	}
	var b strings.Builder
	b.WriteString("**" + esc(g.Title) + "**\n\n")
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + esc(c) + " |")
		}
		b.WriteString("\n")
	}
	row(g.Header)
	b.WriteString("|")
	for i := range g.Header {
		if i < len(g.Right) && g.Right[i] {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, r := range g.Rows {
		if r[0] == AllBenchmarks {
			r = append([]string{"**" + AllBenchmarks + "**"}, r[1:]...)
		}
		row(r)
	}
	b.WriteString("\n")
	for _, n := range g.Notes {
		if strings.HasPrefix(n, "  ") {
			b.WriteString("  - " + esc(strings.TrimSpace(n)) + "\n")
		} else {
			b.WriteString("\n" + esc(n) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// latexEscape makes a cell safe in a LaTeX tabular, arrows and times as math.
func latexEscape(s string) string {
	return strings.NewReplacer(`\`, `\textbackslash{}`, "&", `\&`, "%", `\%`, "$", `\$`, "#", `\#`, "_", `\_`,
		"{", `\{`, "}", `\}`, "~", `\textasciitilde{}`, "^", `\textasciicircum{}`,
		"→", `$\rightarrow$`, "->", `$\rightarrow$`, "×", `$\times$`, "—", "--").Replace(s)
}

func writeLaTeX(w io.Writer, g Grid) error {
	var b strings.Builder
	b.WriteString("% " + g.Title + " (needs \\usepackage{booktabs})\n")
	b.WriteString(`\begin{tabular}{`)
	for i := range g.Header {
		if i < len(g.Right) && g.Right[i] {
			b.WriteString("r")
		} else {
			b.WriteString("l")
		}
	}
	b.WriteString("}\n\\toprule\n")
	row := func(cells []string) {
		var cs []string
		for _, c := range cells {
			cs = append(cs, latexEscape(c))
		}
		b.WriteString(strings.Join(cs, " & ") + ` \\` + "\n")
	}
	row(g.Header)
	b.WriteString("\\midrule\n")
	for _, r := range g.Rows {
		if r[0] == AllBenchmarks {
			b.WriteString("\\midrule\n")
		}
		row(r)
	}
	b.WriteString("\\bottomrule\n\\end{tabular}\n")
	for _, n := range g.Notes {
		b.WriteString("% " + strings.ReplaceAll(n, "\n", " ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func num(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'g', 8, 64)
}

func ivCols(iv *Interval) []string {
	if iv == nil {
		return []string{"", "", ""}
	}
	return []string{num(&iv.Value), num(&iv.Lo), num(&iv.Hi)}
}

func sideCols(s Side) []string {
	return append([]string{strconv.Itoa(s.Episodes), strconv.Itoa(s.Counted), strconv.Itoa(s.Solved)},
		append(ivCols(s.Success), strconv.Itoa(s.Infra), strconv.Itoa(s.Unknown), strconv.Itoa(s.Running))...)
}

var sideHeader = []string{"episodes", "counted", "solved", "success", "success_lo", "success_hi", "infra_failures", "unknown_outcome", "running"}

func prefixed(p string, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, p+n)
	}
	return out
}

func pairedCols(pm PairedMean) []string {
	return append([]string{num(pm.Left), num(pm.Right)}, append(ivCols(pm.Ratio), strconv.Itoa(pm.Unpriced))...)
}

var pairedHeader = []string{"left", "right", "ratio", "ratio_lo", "ratio_hi", "unpriced"}

// writeTableCSV writes one line per benchmark with every figure as a plain number (empty: unknown).
func writeTableCSV(w io.Writer, t Table) error {
	cw := csv.NewWriter(w)
	head := []string{"benchmark", "left_system", "right_system", "instances", "jointly_solved"}
	head = append(head, prefixed("left_", sideHeader)...)
	head = append(head, prefixed("right_", sideHeader)...)
	head = append(head, "success_diff", "success_diff_lo", "success_diff_hi")
	head = append(head, prefixed("llm_calls_", pairedHeader)...)
	head = append(head, prefixed("input_tokens_", pairedHeader)...)
	head = append(head, prefixed("cost_usd_", pairedHeader)...)
	head = append(head, "final")
	cw.Write(head)
	for _, r := range t.Rows {
		rec := []string{r.Benchmark, t.Left, t.Right, strconv.Itoa(r.Instances), strconv.Itoa(r.JointlySolved)}
		rec = append(rec, sideCols(r.Left)...)
		rec = append(rec, sideCols(r.Right)...)
		rec = append(rec, ivCols(r.SuccessDiff)...)
		rec = append(rec, pairedCols(r.LLMCalls)...)
		rec = append(rec, pairedCols(r.InputTokens)...)
		rec = append(rec, pairedCols(r.Cost)...)
		rec = append(rec, strconv.FormatBool(t.NotFinal.Final()))
		cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

func writeSystemCSV(w io.Writer, ts []SystemTable) error {
	cw := csv.NewWriter(w)
	head := append([]string{"system", "benchmark"}, sideHeader...)
	head = append(head, "per_solved_episodes", "per_solved_llm_calls", "per_solved_input_tokens", "per_solved_cost_usd", "unpriced", "final")
	cw.Write(head)
	for _, t := range ts {
		writeSystemRecords(cw, t)
	}
	cw.Flush()
	return cw.Error()
}

func writeSystemRecords(cw *csv.Writer, t SystemTable) {
	for _, r := range t.Rows {
		rec := append([]string{t.System, r.Benchmark}, sideCols(r.Side)...)
		if m := r.PerSolved; m != nil {
			rec = append(rec, strconv.Itoa(m.Episodes), num(&m.LLMCalls), num(&m.InputTokens), num(m.CostUSD))
		} else {
			rec = append(rec, "0", "", "", "")
		}
		rec = append(rec, strconv.Itoa(r.Unpriced), strconv.FormatBool(t.NotFinal.Final()))
		cw.Write(rec)
	}
}

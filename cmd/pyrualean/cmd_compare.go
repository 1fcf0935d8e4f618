package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pyrualean/pyrualean/agent/runs"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/prices"
)

// cmdCompare pairs two systems' episodes by (robot, suite:task, seed) and prints the paper's table:
// success tool calling -> cells, and LLM calls, input tokens and cost on the jointly solved
// instances, per benchmark and over all. It takes the original's form (several paths, pooled, and
// --left-system / --right-system, --output) and plain `compare LEFT RIGHT` (a system per path). As
// the original, it exits 2 when a key is unmatched or duplicated, naming the keys.
func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pyrualean compare [--left-system S] [--right-system S] [--format F] [--output FILE] [--prices FILE] PATH...\n\n"+
			"Pairs two systems' episodes by (robot, suite:task, seed) and prints the paper's table. PATH: run folders,\n"+
			"folders above them, eval eval folders, RPent run folders. A system S is a system (pyrualean:cells,\n"+
			"rpent:tools), an arm (cells, tools) or a name (pyrualean, rpent), optionally S@MODEL. Without\n"+
			"--left-system/--right-system, two paths are one system each (LEFT RIGHT), any other number holds\n"+
			"both: tools on the left, cells on the right. Exit status: 0; 1 when no episode pairs; 2 when a key is\n"+
			"unmatched or duplicated (the keys are named); 64 on bad usage.")
		fs.PrintDefaults()
	}
	o := addTableFlags(fs)
	leftSys := fs.String("left-system", "", "the left system (default "+runs.DefaultLeftSystem+"; the paper's tool calling)")
	rightSys := fs.String("right-system", "", "the right system (default "+runs.DefaultRightSystem+")")
	output := fs.String("output", "", "also write the output to FILE (as the original's --output)")
	if err := fs.Parse(interleaved(args, fs)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "pyrualean compare: %v\n", err)
		return exitUsage
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "pyrualean compare: %v\n", err)
		return exitUsage
	}
	paths := fs.Args()
	if len(paths) == 0 {
		fmt.Fprintln(stderr, "pyrualean compare: give the run folders to compare (see --help)")
		return exitUsage
	}
	tab, err := o.prices()
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean compare: --prices: %v\n", err)
		return exitUsage
	}
	side, code := compareSides(paths, *leftSys, *rightSys, tab, stderr)
	if code >= 0 {
		return code
	}
	c := runs.Compare(side.left, side.right)
	pg := runs.PairRows(side.left, side.right)
	table := runs.BuildTable(pg, side.lname, side.rname, runs.TableOptions{Retryable: suiteRetryable, Pending: pendingIn(paths), Prices: tab})
	var out bytes.Buffer
	switch o.format {
	case runs.FormatText:
		runs.WriteComparisonTable(&out, c)
		out.WriteString("\n")
		runs.WriteTable(&out, table, runs.FormatText)
	case runs.FormatJSON:
		writeIndented(&out, compareJSON{Comparison: c, Systems: []string{side.lname, side.rname}, Pairing: pairingOf(c, side), Table: table})
	default:
		runs.WriteTable(&out, table, o.format)
	}
	stdout.Write(out.Bytes())
	if *output != "" {
		if err := os.WriteFile(*output, out.Bytes(), 0o644); err != nil {
			fmt.Fprintf(stderr, "pyrualean compare: --output: %v\n", err)
			return exitFailed
		}
	}
	return compareExit(c, side, stderr)
}

// sides are the two systems' rows and names.
type sides struct {
	left, right  []runs.Row
	lname, rname string
	byPath       bool
	input        int // episodes read
}

// compareSides reads the paths and splits them into the two systems; code >= 0 ends the command.
func compareSides(paths []string, leftSys, rightSys string, tab *prices.Table, stderr io.Writer) (sides, int) {
	load := func(ps []string) []runs.Row {
		rows, errs := runs.LoadRuns(ps)
		for _, e := range errs {
			fmt.Fprintf(stderr, "pyrualean compare: %s: %s\n", e.Path, e.Err)
		}
		runs.PriceRows(rows, tab)
		return rows
	}
	if len(paths) == 2 && leftSys == "" && rightSys == "" {
		s := sides{left: load(paths[:1]), right: load(paths[1:]), byPath: true}
		s.lname, s.rname = sideName(s.left, paths[0]), sideName(s.right, paths[1])
		s.input = len(s.left) + len(s.right)
		return s, -1
	}
	named := leftSys != "" || rightSys != ""
	if leftSys == "" {
		leftSys = runs.DefaultLeftSystem
	}
	if rightSys == "" {
		rightSys = runs.DefaultRightSystem
	}
	rows := load(paths)
	s := sides{lname: leftSys, rname: rightSys, input: len(rows)}
	var both []runs.Row
	s.left, s.right, both = runs.SplitSystems(rows, leftSys, rightSys)
	if len(both) > 0 {
		fmt.Fprintf(stderr, "pyrualean compare: --left-system %s and --right-system %s both name %s: name two different systems\n", leftSys, rightSys, both[0].System)
		return s, exitUsage
	}
	if systems := runs.Systems(rows); !named && len(systems) < 2 {
		fmt.Fprintf(stderr, "pyrualean compare: a comparison needs two systems and %s holds %s: give LEFT RIGHT paths, or name the systems with --left-system and --right-system\n",
			strings.Join(paths, " "), orNone(systems))
		return s, exitUsage
	}
	if len(s.left) == 0 || len(s.right) == 0 {
		fmt.Fprintf(stderr, "pyrualean compare: no episodes of %q and %d of %q among the systems found (%s); name them with --left-system and --right-system\n",
			leftSys, len(s.right), rightSys, strings.Join(runs.Systems(rows), ", "))
		if len(s.left) != 0 {
			fmt.Fprintf(stderr, "pyrualean compare: (%d episodes of %q, none of %q)\n", len(s.left), leftSys, rightSys)
		}
		return s, exitFailed
	}
	return s, -1
}

func orNone(systems []string) string {
	if len(systems) == 0 {
		return "no episodes"
	}
	return "only " + strings.Join(systems, ", ")
}

// sideName names a side read from one path: its system when it holds one, else the path.
func sideName(rows []runs.Row, path string) string {
	if sys := runs.Systems(rows); len(sys) == 1 {
		if _, arm, ok := strings.Cut(sys[0], ":"); ok && strings.HasPrefix(sys[0], "pyrualean:") {
			return arm
		}
		return sys[0]
	}
	return filepath.Base(filepath.Clean(path))
}

// compareExit reports an invalid pairing as the original does (exit 2) and names the fix.
func compareExit(c runs.Comparison, s sides, stderr io.Writer) int {
	bad := false
	if len(c.Duplicates) > 0 {
		fmt.Fprintf(stderr, "pyrualean compare: duplicate (robot, task, seed) keys make the pairing ambiguous: %s\n", strings.Join(c.Duplicates, ", "))
		for _, side := range []struct {
			name string
			rows []runs.Row
		}{{"left", s.left}, {"right", s.right}} {
			if sys := runs.Systems(side.rows); len(sys) > 1 {
				fmt.Fprintf(stderr, "pyrualean compare: the %s side holds several systems (%s): name one with --%s-system\n", side.name, strings.Join(sys, ", "), side.name)
			}
		}
		bad = true
	}
	if len(c.UnmatchedLeft) > 0 {
		fmt.Fprintf(stderr, "pyrualean compare: unmatched on the left (no such episode on the right): %s\n", strings.Join(c.UnmatchedLeft, ", "))
		bad = true
	}
	if len(c.UnmatchedRight) > 0 {
		fmt.Fprintf(stderr, "pyrualean compare: unmatched on the right (no such episode on the left): %s\n", strings.Join(c.UnmatchedRight, ", "))
		bad = true
	}
	switch {
	case bad:
		return exitEpisodeError
	case c.Pairs == 0:
		return exitFailed
	}
	return 0
}

// compareJSON is compare --format json: our comparison's keys, the original's "systems" and
// "pairing" beside them, and the paper's table.
type compareJSON struct {
	runs.Comparison
	Systems []string   `json:"systems"`
	Pairing pairing    `json:"pairing"`
	Table   runs.Table `json:"table"`
}

// pairing is the original's pairing record.
type pairing struct {
	Valid           bool     `json:"valid"`
	MatchedEpisodes int      `json:"matched_episodes"`
	InputEpisodes   int      `json:"input_episodes"`
	DuplicateKeys   []string `json:"duplicate_keys"`
	UnmatchedKeys   []string `json:"unmatched_keys"`
	KeyDefinition   []string `json:"key_definition"`
	SystemsBy       string   `json:"systems_by"` // "path" (LEFT RIGHT) or "system" (--left-system/--right-system)
}

func pairingOf(c runs.Comparison, s sides) pairing {
	by := "system"
	if s.byPath {
		by = "path"
	}
	return pairing{
		Valid:           c.Pairs > 0 && len(c.Duplicates) == 0 && len(c.UnmatchedLeft) == 0 && len(c.UnmatchedRight) == 0,
		MatchedEpisodes: c.Pairs, InputEpisodes: s.input, DuplicateKeys: c.Duplicates,
		UnmatchedKeys: slices.Concat(c.UnmatchedLeft, c.UnmatchedRight), KeyDefinition: []string{"robot", "task", "seed"}, SystemsBy: by,
	}
}

// tableOpts are the flags summarize and compare share.
type tableOpts struct {
	format     string
	asJSON     bool
	pricesFile string
}

func addTableFlags(fs *flag.FlagSet) *tableOpts {
	o := &tableOpts{}
	fs.StringVar(&o.format, "format", runs.FormatText, "output: "+strings.Join(runs.Formats(), ", ")+" (md, latex and csv print the paper's table only)")
	fs.BoolVar(&o.asJSON, "json", false, "the same as --format json")
	fs.StringVar(&o.pricesFile, "prices", "", "a price file over the shipped table (JSON: {\"models\": {NAME: {input, cached_input, output, source}}} or play's {NAME: {input, cached_input, output}}; US$ per million tokens)")
	return o
}

func (o *tableOpts) check() error {
	if o.asJSON {
		if o.format != runs.FormatText && o.format != runs.FormatJSON {
			return fmt.Errorf("--json and --format %s disagree", o.format)
		}
		o.format = runs.FormatJSON
	}
	if !slices.Contains(runs.Formats(), o.format) {
		return fmt.Errorf("--format %q: want one of %s", o.format, strings.Join(runs.Formats(), ", "))
	}
	return nil
}

// prices is the shipped table with --prices over it.
func (o *tableOpts) prices() (*prices.Table, error) {
	t, err := prices.Embedded()
	if err != nil {
		return nil, err
	}
	if o.pricesFile == "" {
		return t, nil
	}
	user, err := prices.Read(o.pricesFile)
	if err != nil {
		return nil, err
	}
	return t.Merge(user), nil
}

// suiteRetryable is eval's rule: an episode in this status runs again when the same eval runs again.
func suiteRetryable(r runs.Row) bool { return eval.Retryable(r.Status) }

// pendingIn counts the episodes eval eval folders among paths planned and never ran (no readable
// result.json): a table over them is not final.
func pendingIn(paths []string) int {
	n := 0
	for _, p := range paths {
		if !runs.IsSuiteDir(p) {
			continue
		}
		man, err := eval.ReadManifest(p)
		if err != nil {
			continue
		}
		for _, id := range man.Order {
			if _, err := os.Stat(filepath.Join(p, filepath.FromSlash(man.Episodes[id].Dir), "result.json")); err != nil {
				n++
			}
		}
	}
	return n
}

// interleaved moves flags after the paths to the front (compare PATH... --format md), as users
// type them; a "--" ends the flags.
func interleaved(args []string, fs *flag.FlagSet) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(append(flags, "--"), rest...)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func writeIndented(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

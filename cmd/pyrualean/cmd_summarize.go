package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/pyrualean/pyrualean/agent/runs"
)

// cmdSummarize tabulates run folders: the original's columns plus LLM calls and cost, the aggregates
// counted as the original counts, and the paper's table (tool calling -> cells on jointly solved
// instances) when both systems are there, else each system's own table. Missing or corrupt folders
// are reported by name; the others are still summarised. Reading never writes: a killed play's
// folder is reported as interrupted and left as it is.
func cmdSummarize(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("summarize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pyrualean summarize [--format F] [--prices FILE] [--strict] PATH...\n\n"+
			"Tabulates run folders (PATH: a run folder, any folder above run folders, an eval eval folder, an RPent\n"+
			"run folder). Every episode counts as the original counts it (a crash, timeout, boot or planner failure is a\n"+
			"failed episode). Exit status: 0, 1 when no run folder could be read (or, with --strict, when any could\n"+
			"not), 64 on bad usage.")
		fs.PrintDefaults()
	}
	o := addTableFlags(fs)
	strict := fs.Bool("strict", false, "exit 1 when any path is missing or any result.json is corrupt")
	leftSys := fs.String("left-system", runs.DefaultLeftSystem, "the paper table's left system (see compare)")
	rightSys := fs.String("right-system", runs.DefaultRightSystem, "the paper table's right system")
	if err := fs.Parse(interleaved(args, fs)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "pyrualean summarize: %v\n", err)
		return exitUsage
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "pyrualean summarize: %v\n", err)
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "pyrualean summarize: give one or more run folders (or folders holding them)")
		return exitUsage
	}
	tab, err := o.prices()
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean summarize: --prices: %v\n", err)
		return exitUsage
	}
	rows, errs := runs.LoadRuns(fs.Args())
	for _, e := range errs {
		fmt.Fprintf(stderr, "pyrualean summarize: %s: %s\n", e.Path, e.Err)
	}
	runs.PriceRows(rows, tab)
	sum := runs.Summarize(rows)
	opts := runs.TableOptions{Retryable: suiteRetryable, Pending: pendingIn(fs.Args()), Prices: tab}
	paper, systems := summaryTables(rows, *leftSys, *rightSys, opts)
	switch o.format {
	case runs.FormatJSON:
		if rows == nil {
			rows = []runs.Row{}
		}
		if errs == nil {
			errs = []runs.LoadError{}
		}
		writeIndented(stdout, summaryJSON{Summary: sum, Rows: rows, Errors: errs, Table: paper, SystemTables: systems})
	case runs.FormatText:
		runs.WriteSummaryTable(stdout, rows, sum)
		if len(rows) > 0 {
			fmt.Fprintln(stdout)
		}
		writeSummaryTables(stdout, paper, systems, runs.FormatText)
	default:
		writeSummaryTables(stdout, paper, systems, o.format)
	}
	switch {
	case len(rows) == 0:
		return exitFailed
	case len(errs) > 0 && *strict:
		fmt.Fprintf(stderr, "pyrualean summarize: %d path(s) could not be read (--strict)\n", len(errs))
		return exitFailed
	case len(errs) > 0:
		fmt.Fprintf(stderr, "pyrualean summarize: %d path(s) could not be read; the table leaves them out (--strict makes this exit 1)\n", len(errs))
	}
	return 0
}

// summaryTables is the paper's table when the rows hold both systems, each without the other's
// episodes twice; otherwise one table per system.
func summaryTables(rows []runs.Row, left, right string, opt runs.TableOptions) (*runs.Table, []runs.SystemTable) {
	l, r, both := runs.SplitSystems(rows, left, right)
	if len(l) > 0 && len(r) > 0 && len(both) == 0 {
		if pg := runs.PairRows(l, r); len(pg.Duplicates) == 0 && len(pg.Pairs) > 0 {
			t := runs.BuildTable(pg, left, right, opt)
			return &t, nil
		}
	}
	var out []runs.SystemTable
	for _, sys := range runs.Systems(rows) {
		var rs []runs.Row
		for _, row := range rows {
			if row.System == sys {
				rs = append(rs, row)
			}
		}
		out = append(out, runs.BuildSystemTable(sys, rs, opt))
	}
	return nil, out
}

func writeSummaryTables(w io.Writer, paper *runs.Table, systems []runs.SystemTable, format string) {
	if paper != nil {
		runs.WriteTable(w, *paper, format)
		return
	}
	if len(systems) > 0 {
		runs.WriteSystemTables(w, systems, format)
	}
}

// summaryJSON is summarize --json: the original's keys at the top level (runs.Summary: "episodes" is a
// count, as the original's), the per-episode rows and the unreadable paths beside them, and the paper's
// table (or, with one system, its own table).
type summaryJSON struct {
	runs.Summary
	Rows         []runs.Row         `json:"rows"`
	Errors       []runs.LoadError   `json:"errors"`
	Table        *runs.Table        `json:"paper_table,omitempty"`
	SystemTables []runs.SystemTable `json:"system_tables,omitempty"`
}

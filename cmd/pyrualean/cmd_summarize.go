package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/pyrualean/pyrualean/agent/runs"
)

// cmdSummarize tabulates run folders: the seed's columns plus LLM calls and cost, then aggregates.
// Missing or corrupt folders are reported by name; the others are still summarised. Reading never
// writes: a killed play's folder is reported as interrupted and left as it is.
func cmdSummarize(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("summarize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pyrualean summarize [--json] [--strict] PATH...\n\n"+
			"Tabulates run folders (PATH: a run folder or any folder above run folders). Exit status: 0,\n"+
			"1 when no run folder could be read (or, with --strict, when any could not), 64 on bad usage.")
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, `print the seed's summary keys ("episodes" a count, "native_sr", "statuses", "mean_*", ...) with ours beside them ("rows", "errors", "solved", "per_solved", ...)`)
	strict := fs.Bool("strict", false, "exit 1 when any path is missing or any result.json is corrupt")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "pyrualean summarize: %v\n", err)
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "pyrualean summarize: give one or more run folders (or folders holding them)")
		return exitUsage
	}
	rows, errs := runs.LoadRuns(fs.Args())
	for _, e := range errs {
		fmt.Fprintf(stderr, "pyrualean summarize: %s: %s\n", e.Path, e.Err)
	}
	sum := runs.Summarize(rows)
	if *asJSON {
		if rows == nil {
			rows = []runs.Row{}
		}
		if errs == nil {
			errs = []runs.LoadError{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(summaryJSON{Summary: sum, Rows: rows, Errors: errs})
	} else {
		runs.WriteSummaryTable(stdout, rows, sum)
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

// summaryJSON is summarize --json: the seed's keys at the top level (runs.Summary: "episodes" is a
// count, as the seed's), the per-episode rows and the unreadable paths beside them.
type summaryJSON struct {
	runs.Summary
	Rows   []runs.Row       `json:"rows"`
	Errors []runs.LoadError `json:"errors"`
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/pyrualean/pyrualean/agent"
)

// cmdSummarize tabulates run folders: the seed's columns plus LLM calls and cost, then aggregates.
// Missing or corrupt folders are reported by name; the others are still summarised.
func cmdSummarize(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("summarize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, `print {"episodes":[...], "summary":{...}, "errors":[...]}`)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "pyrualean summarize: %v\n", err)
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "pyrualean summarize: give one or more run folders (or folders holding them)")
		return 2
	}
	rows, errs := agent.LoadRuns(fs.Args())
	for _, e := range errs {
		fmt.Fprintf(stderr, "pyrualean summarize: %s: %s\n", e.Path, e.Err)
	}
	sum := agent.Summarize(rows)
	if *asJSON {
		if rows == nil {
			rows = []agent.Row{}
		}
		if errs == nil {
			errs = []agent.LoadError{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"episodes": rows, "summary": sum, "errors": errs})
	} else {
		agent.WriteSummaryTable(stdout, rows, sum)
	}
	if len(rows) == 0 {
		return 1
	}
	return 0
}

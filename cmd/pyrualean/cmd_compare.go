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

// cmdCompare pairs two sets of runs by (robot, task, seed) and reports, on jointly solved episodes,
// LLM calls, input tokens and cost left -> right (the seed's headline table).
func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the comparison as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "pyrualean compare: %v\n", err)
		return 2
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "pyrualean compare: usage: pyrualean compare [--json] LEFT RIGHT")
		return 2
	}
	left, lerrs := agent.LoadRuns([]string{fs.Arg(0)})
	right, rerrs := agent.LoadRuns([]string{fs.Arg(1)})
	for _, e := range append(lerrs, rerrs...) {
		fmt.Fprintf(stderr, "pyrualean compare: %s: %s\n", e.Path, e.Err)
	}
	c := agent.Compare(left, right)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(c)
	} else {
		agent.WriteComparisonTable(stdout, c)
	}
	switch {
	case len(c.Duplicates) > 0:
		fmt.Fprintln(stderr, "pyrualean compare: duplicate (robot, task, seed) keys make the pairing ambiguous")
		return 2
	case c.Pairs == 0:
		return 1
	}
	return 0
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pyrualean/pyrualean/agent/runs"
)

// cmdCompare pairs two sets of runs by (robot, suite:task, seed) and reports, on jointly solved
// episodes, LLM calls, input tokens and cost left -> right (the seed's headline table). As the seed,
// it exits 2 when a key is unmatched or duplicated, naming the keys.
func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pyrualean compare [--json] LEFT RIGHT\n\n"+
			"Pairs two sets of run folders by (robot, suite:task, seed). Exit status: 0; 1 when no episode\n"+
			"pairs; 2 when a key is unmatched or duplicated (the keys are named); 64 on bad usage.")
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print the comparison as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "pyrualean compare: %v\n", err)
		return exitUsage
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "pyrualean compare: usage: pyrualean compare [--json] LEFT RIGHT")
		return exitUsage
	}
	left, lerrs := runs.LoadRuns([]string{fs.Arg(0)})
	right, rerrs := runs.LoadRuns([]string{fs.Arg(1)})
	for _, e := range append(lerrs, rerrs...) {
		fmt.Fprintf(stderr, "pyrualean compare: %s: %s\n", e.Path, e.Err)
	}
	c := runs.Compare(left, right)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(c)
	} else {
		runs.WriteComparisonTable(stdout, c)
	}
	bad := false
	if len(c.Duplicates) > 0 {
		fmt.Fprintf(stderr, "pyrualean compare: duplicate (robot, task, seed) keys make the pairing ambiguous: %s\n", strings.Join(c.Duplicates, ", "))
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

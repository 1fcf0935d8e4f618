package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pyrualean/pyrualean/rollouts"
)

// cmdRollouts is `pyrualean rollouts export PATH... --format F --out FILE`.
func cmdRollouts(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "export" {
		fmt.Fprintln(stderr, "usage: pyrualean rollouts export PATH... --format chat|trl|verifiers --out FILE.jsonl")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return 0
		}
		return exitUsage
	}
	fs := flag.NewFlagSet("rollouts export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	format := fs.String("format", "chat", "record format: "+strings.Join(rollouts.Formats, ", ")+" (README \"Training\" names the library each feeds)")
	out := fs.String("out", "", "the JSONL file to write (images go to FILE's name with .images)")
	// flags may come after the paths: parse the paths out first
	var paths, rest []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--format" || a == "-format" || a == "--out" || a == "-out":
			if i+1 < len(args) {
				rest = append(rest, a, args[i+1])
				i++
			} else {
				rest = append(rest, a)
			}
		case strings.HasPrefix(a, "-"):
			rest = append(rest, a)
		default:
			paths = append(paths, a)
		}
	}
	if code, ok := parseFlags(fs, rest, stdout, stderr); !ok {
		return code
	}
	switch {
	case len(paths) == 0:
		fmt.Fprintln(stderr, "pyrualean rollouts export: name run folders or suite folders to export")
		return exitUsage
	case *out == "":
		fmt.Fprintln(stderr, "pyrualean rollouts export: --out FILE.jsonl is required")
		return exitUsage
	}
	rs, errs := rollouts.Load(paths)
	for _, e := range errs {
		fmt.Fprintf(stderr, "pyrualean rollouts export: %s: %s\n", e.Path, e.Err)
	}
	n, err := rollouts.Export(rs, rollouts.Options{Format: *format, Out: *out})
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean rollouts export: %v\n", err)
		if strings.HasPrefix(err.Error(), "format ") {
			return exitUsage
		}
		return 1
	}
	groups := map[string]bool{}
	solved := 0
	for _, r := range rs {
		groups[r.Group] = true
		if r.Reward == 1 {
			solved++
		}
	}
	fmt.Fprintf(stdout, "%d records (%s) in %d groups, %d solved of %d rollouts -> %s\n", n, *format, len(groups), solved, len(rs), *out)
	if n == 0 {
		return 1
	}
	return 0
}

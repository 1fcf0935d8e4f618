package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/pyrualean/pyrualean/kernel"
)

// cmdKernelspecs lists the kernelspecs jupyter_client would find: name, language, path.
func cmdKernelspecs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kernelspecs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "pyrualean kernelspecs: %v (usage: pyrualean kernelspecs [--json])\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "pyrualean kernelspecs: takes no arguments (usage: pyrualean kernelspecs [--json])")
		return 2
	}
	specs, err := kernel.FindSpecs()
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean kernelspecs: %v\n", err)
		return 1
	}
	if *asJSON {
		type row struct {
			Name, Language, DisplayName, Path, InterruptMode string
		}
		rows := make([]row, 0, len(specs))
		for _, s := range specs {
			rows = append(rows, row{s.Name, s.Language, s.DisplayName, s.ResourceDir, s.InterruptMode})
		}
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLANGUAGE\tPATH")
	for _, s := range specs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Language, s.ResourceDir)
	}
	tw.Flush()
	return 0
}

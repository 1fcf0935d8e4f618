package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/pyrualean/pyrualean/report"
)

// cmdReport writes a eval folder's self-contained HTML report: the paper's table per runtime-model
// and settings, the results and plots per group, every episode linking its trace, the settings.
func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("html", "report.html", "the HTML file to write")
	traces := fs.Bool("traces", true, "render each episode's trace to HTML (nbconvert) and link it; false links the .ipynb")
	o := &tableOpts{}
	fs.StringVar(&o.pricesFile, "prices", "", "a price file over the shipped table (see summarize --help)")
	// The eval folder comes first (report DIR --html OUT), so parse the flags after it too.
	var dir string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "pyrualean report: %v\n", err)
		return exitUsage
	}
	if dir == "" && fs.NArg() == 1 {
		dir = fs.Arg(0)
	} else if fs.NArg() > 0 || dir == "" {
		fmt.Fprintln(stderr, "pyrualean report: usage: pyrualean report SUITE_DIR [--html OUT] [--traces=false] [--prices FILE]")
		return exitUsage
	}
	pt, err := o.prices()
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean report: --prices: %v\n", err)
		return exitUsage
	}
	if err := report.Write(ctx, report.Options{SuiteDir: dir, Out: *out, Traces: *traces, Prices: pt}); err != nil {
		fmt.Fprintf(stderr, "pyrualean report: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, *out)
	return 0
}

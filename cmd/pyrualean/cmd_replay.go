package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/replay"
)

// cmdReplay re-executes an episode trace in a fresh kernel and reports cell by cell whether it
// reproduces: exit 0 reproduced, 1 diverged (or the replay could not finish), 2 bad usage.
func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "write the replayed notebook here")
	until := fs.Int("until", -1, "replay only up to this cell index (0-based, in the notebook's cell list)")
	kernelName := fs.String("kernel", "", "kernelspec to use (default: the trace's metadata.kernelspec.name)")
	timeout := fs.Duration("timeout", 10*time.Minute, "per-cell timeout")
	numTol := fs.Float64("num-tol", 1e-4, "allowed difference of numbers in text and JSON (absolute, relative above 1)")
	imgTol := fs.Float64("img-tol", 0.01, "allowed mean absolute pixel difference of images (0..1)")
	verbose := fs.Bool("v", false, "log kernel activity to stderr")
	asJSON := fs.Bool("json", false, "print the report as one JSON object instead of text")
	sealed := fs.String("sealed", replay.SealAuto, "run the trace's code sealed, as play does: auto (where this machine can), on (or fail), off (unsandboxed, recorded)")
	usage := func() {
		fmt.Fprintln(stderr, "usage: pyrualean replay TRACE.ipynb [--out NEW.ipynb] [--until N] [--kernel NAME] [--timeout D] [--num-tol X] [--img-tol X] [--sealed auto|on|off] [--json]")
	}
	// Flags may come before or after the trace path.
	var paths []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage()
				return 0
			}
			fmt.Fprintf(stderr, "pyrualean replay: %v\n", err)
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(paths) != 1 {
		fmt.Fprintf(stderr, "pyrualean replay: want exactly one trace, got %d\n", len(paths))
		usage()
		return 2
	}
	if *sealed != replay.SealAuto && *sealed != replay.SealOn && *sealed != replay.SealOff {
		fmt.Fprintf(stderr, "pyrualean replay: --sealed %q: want auto, on or off\n", *sealed)
		return 2
	}
	if *numTol < 0 || *imgTol < 0 || *imgTol > 1 {
		fmt.Fprintln(stderr, "pyrualean replay: tolerances must be non-negative (--img-tol at most 1)")
		return 2
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	opts := replay.Options{
		Until: *until, Out: *out, KernelName: *kernelName, CellTimeout: *timeout, Logger: logger, Sealed: *sealed,
		Tolerances: notebooks.Tolerances{Number: *numTol, Image: *imgTol},
	}
	if !*asJSON {
		opts.OnCell = func(c replay.CellReport) { fmt.Fprintln(stdout, c.Line()) }
	}
	if *numTol == 0 {
		opts.Tolerances.Number = 1e-300 // exact, as asked (0 would mean the default)
	}
	if *imgTol == 0 {
		opts.Tolerances.Image = 1e-300
	}
	rep, err := replay.Run(ctx, paths[0], opts)
	summary := func() {
		if *asJSON {
			b, jerr := rep.JSON()
			if jerr != nil {
				fmt.Fprintf(stderr, "pyrualean replay: %v\n", jerr)
				return
			}
			fmt.Fprintln(stdout, string(b))
			return
		}
		fmt.Fprintln(stdout, rep.Verdict())
		if *out != "" {
			fmt.Fprintf(stdout, "replayed notebook: %s\n", *out)
		}
	}
	if err != nil {
		if errors.Is(err, replay.ErrBadTrace) {
			fmt.Fprintf(stderr, "pyrualean replay: %v\n", err)
			return 2
		}
		if rep != nil {
			summary()
		}
		fmt.Fprintf(stderr, "pyrualean replay: %v\n", err)
		return 1
	}
	summary()
	if !rep.Reproduced() {
		return 1
	}
	return 0
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pyrualean/pyrualean/agent/tokenbench"
	"github.com/pyrualean/pyrualean/agent/tokencount"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// benchTokens replays each tabletop reference solution through both arms against the scripted
// server and compares input tokens counted with an embedded BPE tokenizer.
func benchTokens(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench tokens", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	robot := fs.String("robot", robotapi.DefaultRobot, "robot whose reference solutions to replay")
	tasks := fs.String("tasks", "", "comma-separated tasks (default: all)")
	seed := fs.Int("seed", 0, "episode seed")
	encoding := fs.String("encoding", tokencount.O200k, "o200k_base or cl100k_base")
	images := fs.String("images", spec.ImagesOnMotion, "image policy for both arms: on-motion, on-demand or none")
	out := fs.String("out", "", "keep the run folders here (default: a temporary directory)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "pyrualean bench tokens: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pyrualean bench tokens: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *encoding != tokencount.O200k && *encoding != tokencount.CL100k {
		fmt.Fprintf(stderr, "pyrualean bench tokens: --encoding %q: want o200k_base or cl100k_base\n", *encoding)
		return 2
	}
	if *images != spec.ImagesOnMotion && *images != spec.ImagesOnDemand && *images != spec.ImagesNone {
		fmt.Fprintf(stderr, "pyrualean bench tokens: --images %q: want on-motion, on-demand or none\n", *images)
		return 2
	}
	o := tokenbench.Options{Robot: *robot, Seed: *seed, Encoding: *encoding, Images: *images, Out: *out}
	if *tasks != "" {
		o.Tasks = strings.Split(*tasks, ",")
	}
	rep, err := tokenbench.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench tokens: %v\n", err)
		return 1
	}
	if *asJSON {
		return printJSON(stdout, rep)
	} else {
		tokenbench.WriteTable(stdout, rep)
	}
	return 0
}

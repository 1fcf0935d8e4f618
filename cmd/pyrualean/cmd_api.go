package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// cmdAPI prints the robot API reference the agent sees (text) or its JSON tool schemas (tools).
func cmdAPI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	robot := fs.String("robot", robotapi.DefaultRobot, "robot name")
	primitives := fs.String("primitives", spec.PrimitivesFull, "primitive set: full | no-vla | paper (no privileged primitives)")
	format := fs.String("format", robotapi.FormatText, "output: text | tools (JSON function schemas)")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "pyrualean api: %v (usage: pyrualean api [--robot NAME] [--primitives full|no-vla|paper] [--format text|tools])\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pyrualean api: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	probe := spec.New() // primitive sets have their home in spec's table
	if err := probe.Set("primitives", *primitives); err != nil {
		fmt.Fprintf(stderr, "pyrualean api: %v\n", err)
		return 2
	}
	ref, err := robotapi.Reference(ctx, *robot, *primitives, *format)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean api: %v\n", err)
		if errors.Is(err, robotapi.ErrBadArgument) {
			return 2
		}
		return 1
	}
	fmt.Fprint(stdout, ref)
	return 0
}

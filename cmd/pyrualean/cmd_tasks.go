package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/pyrualean/pyrualean/robotapi"
)

// cmdTasks lists a robot's tasks: name, family, instruction and reference-solution path.
func cmdTasks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tasks", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	robot := fs.String("robot", robotapi.DefaultRobot, "robot name")
	asJSON := fs.Bool("json", false, "print a JSON list of {name, family, instruction, solution}")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "pyrualean tasks: %v (usage: pyrualean tasks [--robot NAME] [--json])\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pyrualean tasks: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	tasks, err := robotapi.Tasks(ctx, *robot)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean tasks: %v\n", err)
		if errors.Is(err, robotapi.ErrBadArgument) {
			return 2
		}
		return 1
	}
	if *asJSON {
		if tasks == nil {
			tasks = []robotapi.Task{}
		}
		return printJSON(stdout, tasks)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tFAMILY\tINSTRUCTION\tSOLUTION")
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Family, t.Instruction, t.Solution)
	}
	tw.Flush()
	return 0
}

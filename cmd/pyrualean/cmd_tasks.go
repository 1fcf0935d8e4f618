package main

import (
	"context"
	"fmt"
	"io"
)

// cmdTasks is filled in by the robotapi work; until then it says so plainly.
func cmdTasks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean tasks: not built yet")
	return 2
}

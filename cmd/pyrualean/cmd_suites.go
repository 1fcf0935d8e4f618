package main

import (
	"context"
	"fmt"
	"io"
)

// cmdSuites is filled in by the robotapi work; until then it says so plainly.
func cmdSuites(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean suites: not built yet")
	return 2
}

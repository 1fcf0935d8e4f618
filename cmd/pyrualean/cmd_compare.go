package main

import (
	"context"
	"fmt"
	"io"
)

// cmdCompare is filled in by the agent work; until then it says so plainly.
func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean compare: not built yet")
	return 2
}

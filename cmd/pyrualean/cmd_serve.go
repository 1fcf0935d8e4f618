package main

import (
	"context"
	"fmt"
	"io"
)

// cmdServe is filled in by the gateway work; until then it says so plainly.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean serve: not built yet")
	return 2
}

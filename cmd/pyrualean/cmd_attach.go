package main

import (
	"context"
	"fmt"
	"io"
)

// cmdAttach is filled in by the gateway work; until then it says so plainly.
func cmdAttach(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean attach: not built yet")
	return 2
}

package main

import (
	"context"
	"fmt"
	"io"
)

// cmdModels is filled in by the models work; until then it says so plainly.
func cmdModels(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean models: not built yet")
	return 2
}

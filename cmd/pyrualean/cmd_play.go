package main

import (
	"context"
	"fmt"
	"io"
)

// cmdPlay is filled in by the agent work; until then it says so plainly.
func cmdPlay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean play: not built yet")
	return 2
}

package main

import (
	"context"
	"fmt"
	"io"
)

// cmdSummarize is filled in by the agent work; until then it says so plainly.
func cmdSummarize(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean summarize: not built yet")
	return 2
}

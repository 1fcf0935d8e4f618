package main

import (
	"context"
	"fmt"
	"io"
)

// cmdReplay is filled in by the notebooks work; until then it says so plainly.
func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean replay: not built yet")
	return 2
}

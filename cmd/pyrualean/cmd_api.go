package main

import (
	"context"
	"fmt"
	"io"
)

// cmdAPI is filled in by the robotapi work; until then it says so plainly.
func cmdAPI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean api: not built yet")
	return 2
}

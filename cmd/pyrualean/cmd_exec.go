package main

import (
	"context"
	"fmt"
	"io"
)

// cmdExec is filled in by the kernel work; until then it says so plainly.
func cmdExec(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean exec: not built yet")
	return 2
}

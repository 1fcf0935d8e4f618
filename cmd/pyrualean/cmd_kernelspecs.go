package main

import (
	"context"
	"fmt"
	"io"
)

// cmdKernelspecs is filled in by the kernel work; until then it says so plainly.
func cmdKernelspecs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean kernelspecs: not built yet")
	return 2
}

package main

import (
	"context"
	"fmt"
	"io"
)

func benchKernel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean bench kernel: not built yet")
	return 2
}

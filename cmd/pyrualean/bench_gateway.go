package main

import (
	"context"
	"fmt"
	"io"
)

func benchGateway(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean bench gateway: not built yet")
	return 2
}

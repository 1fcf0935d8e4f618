package main

import (
	"context"
	"fmt"
	"io"
)

func benchTokens(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean bench tokens: not built yet")
	return 2
}

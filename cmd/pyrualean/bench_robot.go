package main

import (
	"context"
	"fmt"
	"io"
)

func benchRobot(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean bench robot: not built yet")
	return 2
}

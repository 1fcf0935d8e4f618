package main

import (
	"context"
	"fmt"
	"io"
)

// cmdMCP is filled in by the mcp work; until then it says so plainly.
func cmdMCP(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pyrualean mcp: not built yet")
	return 2
}

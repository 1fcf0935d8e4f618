package main

import (
	"context"
	"fmt"
	"io"
)

// cmdBench dispatches to one benchmark; each lives in bench_<name>.go and owns its flags.
func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	benches := map[string]func(context.Context, []string, io.Writer, io.Writer) int{
		"kernel":  benchKernel,
		"robot":   benchRobot,
		"tokens":  benchTokens,
		"gateway": benchGateway,
		"suite":   benchSuite,
		"ray":     benchRay,
		"local":   benchLocal,
		"openenv": benchOpenEnv,
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: pyrualean bench kernel|robot|tokens|gateway|suite|ray|local|openenv [--json]")
		return 2
	}
	b, ok := benches[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "pyrualean bench: unknown benchmark %q (kernel, robot, tokens, gateway, suite, ray, local, openenv)\n", args[0])
		return 2
	}
	return b(ctx, args[1:], stdout, stderr)
}

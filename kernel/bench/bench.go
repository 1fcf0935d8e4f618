// Package bench holds what `pyrualean bench kernel` and the kernel package's benchmarks run: the
// Python peers our kernel client is timed against, and the cells they time.
package bench

import (
	_ "embed"
	"fmt"
)

// ClientPy is client.py: jupyter_client's BlockingKernelClient or a minimal raw pyzmq client (the
// floor), driven one cell at a time over stdin/stdout.
//
//go:embed client.py
var ClientPy []byte

// FloodCell prints mb lines of 1 MB, each flushed (one iopub message each, as a cell printing over
// time sends them), then "FINAL". With toDevNull the lines go to /dev/null inside the kernel instead:
// what producing them costs Python alone.
func FloodCell(mb int, toDevNull bool) string {
	sink := "contextlib.nullcontext()"
	if toDevNull {
		sink = "contextlib.redirect_stdout(open(os.devnull, 'w'))"
	}
	return fmt.Sprintf("import contextlib, os\n_line = 'x' * 999_999\nwith %s:\n    for _ in range(%d):\n        print(_line, flush=True)\nprint('FINAL')", sink, mb)
}

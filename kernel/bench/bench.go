// Package bench holds the Python peers that `pyrualean bench kernel` times our kernel client against.
package bench

import _ "embed"

// ClientPy is client.py: jupyter_client's BlockingKernelClient or a minimal raw pyzmq client (the
// floor), driven one cell at a time over stdin/stdout.
//
//go:embed client.py
var ClientPy []byte

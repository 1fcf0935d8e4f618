package gateway

import (
	"context"
	"errors"
)

// kernelHandle is what the gateway needs from one running kernel: the long-lived client (send,
// subscribe to everything it receives) and the process controls. kernel_adapter.go implements it over
// *kernel.Kernel; keeping it narrow keeps the fan-out logic independent of the ZeroMQ side.
type kernelHandle interface {
	// send forwards a client's message unchanged (re-signed by the kernel client).
	send(m *wireMsg) error
	// subscribe returns every message the kernel client receives, on all channels.
	subscribe(buffer int) (<-chan *wireMsg, func())
	// kernelSession asks the kernel for a kernel_info reply and returns its header.session.
	kernelSession(ctx context.Context) (string, error)
	interrupt(ctx context.Context) error
	restart(ctx context.Context) error
	shutdown(ctx context.Context) error
	done() <-chan struct{}
	err() error
	pid() int
}

// specInfo is one kernelspec as the gateway lists it.
type specInfo struct {
	Name, ResourceDir, DisplayName, Language, InterruptMode string
	Argv                                                    []string
	Env                                                     map[string]string
	Metadata                                                map[string]any
}

// launchFunc starts a kernel for a spec with extra environment and working directory.
type launchFunc func(ctx context.Context, spec specInfo, env map[string]string, dir string) (kernelHandle, error)

// Errors the handlers map to HTTP statuses.
var (
	ErrNoSuchKernel  = errors.New("no such kernel")
	ErrNoSuchSpec    = errors.New("no such kernelspec")
	ErrTooManyKernel = errors.New("maximum number of kernels reached")
	ErrForbidden     = errors.New("not allowed on this kernel")
)

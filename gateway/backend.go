package gateway

import (
	"context"
	"errors"

	"github.com/pyrualean/pyrualean/kernel"
)

// Kernel is what the gateway serves: *kernel.Kernel, or anything with its long-lived client and the
// process controls (a live episode's kernel, added with AddKernel). One client per kernel is fanned
// out to every socket (kernel_adapter.go converts its messages); the controls back the REST actions.
type Kernel interface {
	Client() *kernel.Client
	Interrupt(ctx context.Context) error
	Restart(ctx context.Context) error
	Shutdown(ctx context.Context) error
	Done() <-chan struct{}
	Err() error
	Pid() int
}

// Forwarder is a Kernel that takes its clients' messages itself instead of having the gateway send
// them: a live episode's kernel queues a person's cell behind the agent's and follows it as the
// person's (agent.PersonKernel). The gateway still fans every reply out to every socket.
type Forwarder interface {
	Forward(ch kernel.Channel, m *kernel.Message) error
}

// specInfo is one kernelspec as the gateway lists it.
type specInfo struct {
	Name, ResourceDir, DisplayName, Language, InterruptMode string
	Argv                                                    []string
	Env                                                     map[string]string
	Metadata                                                map[string]any
}

// launchFunc starts a kernel for a spec with extra environment and working directory.
type launchFunc func(ctx context.Context, spec specInfo, env map[string]string, dir string) (Kernel, error)

// Errors the handlers map to HTTP statuses.
var (
	ErrNoSuchKernel  = errors.New("no such kernel")
	ErrNoSuchSpec    = errors.New("no such kernelspec")
	ErrTooManyKernel = errors.New("maximum number of kernels reached")
	ErrForbidden     = errors.New("not allowed on this kernel")
)

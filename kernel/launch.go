package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// LaunchOptions configure Launch.
type LaunchOptions struct {
	Env          map[string]string // added to the process environment and the spec's env
	Dir          string            // working directory (default: ours)
	Logger       *slog.Logger
	ReadyTimeout time.Duration // default 60 s
	// IPC, when set, makes the kernel listen on ipc sockets IPC-<n> instead of loopback TCP: a kernel
	// in its own network namespace (a sealed kernel) has no loopback shared with us.
	IPC string
}

// ErrShutdown is Err of a kernel that was shut down on purpose.
var ErrShutdown = errors.New("kernel: kernel shut down")

// Kernel is a kernel process we launched, with its client. Its process runs in its own process group
// so that an interrupt or a kill reaches the kernel's children too.
type Kernel struct {
	spec     Spec
	opts     LaunchOptions
	log      *slog.Logger
	connFile string
	info     ConnectionInfo
	client   *Client

	mu      sync.Mutex // guards proc and the life-cycle fields
	proc    *process
	stopped bool // shutdown requested or done
	err     error
	done    chan struct{}
	life    sync.Mutex // serialises Restart and Shutdown
}

// process is one run of the kernel's argv; exited closes when Wait returns.
type process struct {
	cmd      *exec.Cmd
	exited   chan struct{}
	state    *os.ProcessState
	waitErr  error
	expected bool // we stopped it (restart/shutdown): not a death
	stderr   *tailBuffer
	starting bool // an exit now is a failed start, reported by startOnce, not a death
}

// Launch starts a kernel from spec and returns once it is ready: its iopub subscription is live
// (so no output of the first cell is lost) and it answers on shell. ctx bounds the start only; the
// kernel then lives until Shutdown (or until this process dies: ipykernel watches JPY_PARENT_PID).
func Launch(ctx context.Context, spec Spec, opts LaunchOptions) (*Kernel, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	ci, err := newConnectionInfo()
	if err != nil {
		return nil, err
	}
	ci.KernelName = spec.Name
	if opts.IPC != "" {
		ci.Transport, ci.IP = "ipc", opts.IPC
	}
	connFile, err := writeConnectionFile(ci)
	if err != nil {
		return nil, err
	}
	c, err := newClient(ci, opts.Logger.With("kernel", spec.Name))
	if err != nil {
		os.Remove(connFile)
		return nil, err
	}
	k := &Kernel{spec: spec, opts: opts, log: c.log, connFile: connFile, info: ci, client: c, done: make(chan struct{})}
	c.interruptFn = k.Interrupt
	c.onHBLost = func() {} // our own process is watched by Wait; a busy machine may delay pings
	if err := k.start(ctx); err != nil {
		c.Close()
		os.Remove(connFile)
		return nil, err
	}
	go c.heartbeat(3 * time.Second)
	return k, nil
}

// start runs the process and waits until the client is ready on it. Free ports are only free until
// someone binds them (another kernel starting, or an outgoing connection's ephemeral port), so a
// kernel that fails with "Address already in use", or whose ports turn out to reach another kernel
// (ErrPortCollision), is started again on fresh ports, as jupyter_client's restarter does.
func (k *Kernel) start(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := k.startOnce(ctx)
		if err == nil {
			return nil
		}
		taken := strings.Contains(err.Error(), "Address already in use") || errors.Is(err, ErrPortCollision)
		if attempt == 5 || !taken || ctx.Err() != nil {
			return err
		}
		k.log.Info("kernel: port taken; retrying on fresh ports", "attempt", attempt)
		ci, cerr := newConnectionInfo()
		if cerr != nil {
			return err
		}
		ci.KernelName, ci.Key = k.spec.Name, k.info.Key // the client's session keeps signing with the key
		if cerr := rewriteConnectionFile(k.connFile, ci); cerr != nil {
			return err
		}
		k.info = ci
		k.client.mu.Lock()
		k.client.info = ci
		k.client.mu.Unlock()
	}
}

func (k *Kernel) startOnce(ctx context.Context) error {
	p, err := k.spawn()
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.proc = p
	k.mu.Unlock()
	go k.watch(p)

	rctx, cancel := context.WithTimeoutCause(ctx, k.opts.ReadyTimeout, fmt.Errorf("kernel: not ready after %v", k.opts.ReadyTimeout))
	defer cancel()
	dctx, dcancel := context.WithCancelCause(rctx)
	defer dcancel(nil)
	go func() {
		select {
		case <-p.exited:
			dcancel(p.deathError())
		case <-dctx.Done():
		}
	}()
	if err := k.client.connect(dctx); err != nil {
		k.kill(p)
		<-p.exited
		if cause := context.Cause(dctx); cause != nil && errors.Is(cause, ErrKernelDied) {
			return fmt.Errorf("kernel: %s did not start: %w", k.spec.Name, cause)
		}
		return fmt.Errorf("kernel: %s did not start: %w%s", k.spec.Name, err, p.stderr.suffix())
	}
	k.mu.Lock()
	p.starting = false
	k.mu.Unlock()
	select {
	case <-p.exited: // died right after answering; watch left it to us
		return fmt.Errorf("kernel: %s did not start: %w", k.spec.Name, p.deathError())
	default:
	}
	p.stderr.reset() // the start-up banner is no clue to a later death
	return nil
}

// spawn starts the kernel process from the spec's argv with {connection_file} filled in.
func (k *Kernel) spawn() (*process, error) {
	argv := make([]string, len(k.spec.Argv))
	for i, a := range k.spec.Argv {
		a = strings.ReplaceAll(a, "{connection_file}", k.connFile)
		argv[i] = strings.ReplaceAll(a, "{resource_dir}", k.spec.ResourceDir)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = k.opts.Dir
	cmd.Env = kernelEnv(k.spec.Env, k.opts.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	tail := &tailBuffer{max: 8 << 10}
	cmd.Stderr = tail
	cmd.Stdout = tail
	// The kernel's children may keep our pipe open; do not let them hold Wait.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kernel: start %s: %w", k.spec.Name, err)
	}
	k.log.Debug("kernel: started", "pid", cmd.Process.Pid, "connection_file", k.connFile)
	return &process{cmd: cmd, exited: make(chan struct{}), stderr: tail, starting: true}, nil
}

// kernelEnv is our environment, then the spec's env (with ${VAR} expanded from ours), then extra.
func kernelEnv(specEnv, extra map[string]string) []string {
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	// As jupyter_client does: ipykernel then exits by itself if we die without shutting it down.
	set("JPY_PARENT_PID", strconv.Itoa(os.Getpid()))
	for k, v := range specEnv {
		set(k, os.Expand(v, func(name string) string { return env[name] }))
	}
	for k, v := range extra {
		set(k, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+env[k])
	}
	return out
}

// watch waits for the process. An exit we did not ask for is a death: the kernel is done, pending
// requests fail with the cause, and what is left of its process group is killed.
func (k *Kernel) watch(p *process) {
	err := p.cmd.Wait()
	k.mu.Lock()
	p.state, p.waitErr = p.cmd.ProcessState, err
	expected := p.expected || p.starting
	current := k.proc == p
	k.mu.Unlock()
	close(p.exited)
	if expected || !current {
		return
	}
	derr := p.deathError()
	k.log.Warn("kernel: died", "err", derr)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	k.finish(derr)
}

// deathError names how the process ended.
func (p *process) deathError() error {
	cause := "exited"
	if st := p.state; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			cause = "killed by signal " + ws.Signal().String()
			if ws.Signal() == syscall.SIGKILL {
				cause += " (SIGKILL: killed, possibly out of memory)"
			}
		} else {
			cause = fmt.Sprintf("exited with code %d", st.ExitCode())
		}
	} else if p.waitErr != nil {
		cause = p.waitErr.Error()
	}
	return fmt.Errorf("%w: pid %d %s%s", ErrKernelDied, p.cmd.Process.Pid, cause, p.stderr.suffix())
}

// finish ends the kernel's life once.
func (k *Kernel) finish(err error) {
	k.mu.Lock()
	if k.err != nil {
		k.mu.Unlock()
		return
	}
	k.err = err
	close(k.done)
	k.mu.Unlock()
	k.client.markDead(err)
	os.Remove(k.connFile)
}

// Client returns the kernel's long-lived client.
func (k *Kernel) Client() *Client { return k.client }

// Spec returns the kernelspec it was launched from.
func (k *Kernel) Spec() Spec { return k.spec }

// ConnectionFile returns the path of its connection file (removed at shutdown).
func (k *Kernel) ConnectionFile() string { return k.connFile }

// Pid returns the current process id.
func (k *Kernel) Pid() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.proc.cmd.Process.Pid
}

// Done is closed when the kernel died or was shut down.
func (k *Kernel) Done() <-chan struct{} { return k.done }

// Err says why Done is closed: ErrKernelDied wrapped with the cause, or ErrShutdown.
func (k *Kernel) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// Interrupt interrupts the running cell: SIGINT to the process group, or interrupt_request on control
// when the kernelspec's interrupt_mode is "message".
func (k *Kernel) Interrupt(ctx context.Context) error {
	if err := k.Err(); err != nil {
		return err
	}
	if k.spec.InterruptMode == "message" {
		return k.client.InterruptRequest(ctx)
	}
	k.mu.Lock()
	pid := k.proc.cmd.Process.Pid
	k.mu.Unlock()
	if err := syscall.Kill(-pid, syscall.SIGINT); err != nil {
		return fmt.Errorf("kernel: interrupt: %w", err)
	}
	return nil
}

// Restart stops the kernel process and starts a fresh one on the same ports and key. The Client keeps
// working (its sockets are reconnected); requests pending at the restart fail with ErrRestarted.
// A kernel that died or was shut down stays so (Done is final): launch a new one instead.
func (k *Kernel) Restart(ctx context.Context) error { return k.restart(ctx, false) }

// restart with now kills the old process instead of asking it to stop (jupyter_client's now=True).
func (k *Kernel) restart(ctx context.Context, now bool) error {
	k.life.Lock()
	defer k.life.Unlock()
	if err := k.Err(); err != nil {
		return err
	}
	k.mu.Lock()
	old := k.proc
	old.expected = true
	k.mu.Unlock()
	k.client.beginRestart()
	defer k.client.endRestart()
	k.client.restarts.Add(1)
	if now {
		k.kill(old)
		<-old.exited
	} else {
		k.stop(ctx, old, true)
	}
	if err := k.start(ctx); err != nil {
		k.finish(fmt.Errorf("%w: restart failed: %v", ErrKernelDied, err))
		return err
	}
	return nil
}

// Shutdown asks the kernel to stop (shutdown_request on control), then SIGTERM after 2.5 s and
// SIGKILL after 5 s, kills what is left of its process group, and closes the client.
func (k *Kernel) Shutdown(ctx context.Context) error {
	k.life.Lock()
	defer k.life.Unlock()
	k.mu.Lock()
	p := k.proc
	if k.stopped || k.err != nil {
		k.mu.Unlock()
		if p != nil {
			<-p.exited
		}
		return nil
	}
	k.stopped = true
	p.expected = true
	k.mu.Unlock()
	k.stop(ctx, p, false)
	k.finish(ErrShutdown)
	return nil
}

// stop ends process p politely, then firmly.
func (k *Kernel) stop(ctx context.Context, p *process, restart bool) {
	select {
	case <-p.exited:
	default:
		if m, err := newMessage("shutdown_request", k.client.session.ID, map[string]bool{"restart": restart}); err == nil {
			rctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
			_, err = k.client.request(rctx, Control, m, true)
			cancel()
			k.log.Debug("kernel: shutdown_request answered", "err", err)
		}
	}
	pid := p.cmd.Process.Pid
	for _, step := range []struct {
		wait time.Duration
		sig  syscall.Signal
	}{{2500 * time.Millisecond, syscall.SIGTERM}, {2500 * time.Millisecond, syscall.SIGKILL}} {
		t := time.NewTimer(step.wait)
		select {
		case <-p.exited:
			t.Stop()
			_ = syscall.Kill(-pid, syscall.SIGKILL) // leftovers in the group
			return
		case <-t.C:
			k.log.Warn("kernel: not stopped; signalling", "signal", step.sig)
			_ = syscall.Kill(-pid, step.sig)
		}
	}
	<-p.exited
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// kill ends p at once (a failed start).
func (k *Kernel) kill(p *process) {
	k.mu.Lock()
	p.expected = true
	k.mu.Unlock()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// tailBuffer keeps the last max bytes the kernel wrote to stdout/stderr, for death messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) reset() {
	t.mu.Lock()
	t.b = nil
	t.mu.Unlock()
}

// suffix returns the last lines of output as "; output: ..." or "".
func (t *tailBuffer) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return "; kernel output: " + strings.Join(lines, " | ")
}

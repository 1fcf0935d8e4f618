package robotserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/seal"
)

// ForkerOptions say how to start a Forker.
type ForkerOptions struct {
	Root   string            // repository root; required
	Python string            // interpreter; default robotapi.Python(Root)
	Env    map[string]string // as Options.Env: a server whose environment differs in PYTHONPATH or MUJOCO_GL is exec'd
	Logger *slog.Logger
	// Robots are the robots whose modules are imported before any fork (default: the default robot).
	Robots []string
}

// Forker is a long-lived Python process that has imported the robot server's modules once and forks a
// server per Launch (Options.Forker): ~0.3 CPU-s of imports saved per sealed episode. A forked server is
// what an exec'd one is (own session and process group, the same limits, environment and folder, only its
// stdio), so a Server works the same either way. The forker's socket is in a folder only we may enter.
type Forker struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	dir     string
	sock    string
	env     map[string]string // the forker's own environment's pinned variables
	log     *slog.Logger
	exited  chan struct{}
	stderr  *tail
	once    sync.Once
	closed  atomic.Bool
	exitErr error
	dialed  bool // another process started it and keeps it (DialForker)
}

// StartForker starts a forker and returns once it listens (its imports done).
func StartForker(ctx context.Context, o ForkerOptions) (*Forker, error) {
	if o.Root == "" {
		return nil, errors.New("robotserver: forker: no repository root")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	python := o.Python
	if python == "" {
		python = robotapi.Python(o.Root)
	}
	dir, err := os.MkdirTemp("", "pyrualean-forker-") // 0700: only we may connect
	if err != nil {
		return nil, fmt.Errorf("robotserver: forker folder: %w", err)
	}
	f := &Forker{dir: dir, sock: filepath.Join(dir, "fork.sock"), log: o.Logger, exited: make(chan struct{}),
		stderr: &tail{max: 16 << 10}}
	args := []string{"-m", "pyrualean_robot.served.forker", "--socket", f.sock}
	robots := o.Robots
	if len(robots) == 0 {
		robots = []string{robotapi.DefaultRobot}
	}
	for _, r := range robots {
		args = append(args, "--preload-robot", r)
	}
	env := serverEnv(Options{Root: o.Root, Env: o.Env})
	f.env = pinnedEnv(env)
	cmd := exec.Command(python, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a Ctrl-C to our group is ours to handle
	cmd.Stderr = f.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if f.stdin, err = cmd.StdinPipe(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("robotserver: start forker %s: %w", python, err)
	}
	f.cmd = cmd
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.TrimSpace(sc.Text()) == "ready" {
				close(ready)
				signalled = true
				continue
			}
			f.log.Debug("robot forker", "stdout", sc.Text())
		}
	}()
	go func() {
		f.exitErr = cmd.Wait()
		close(f.exited)
	}()
	select {
	case <-ready:
		return f, nil
	case <-f.exited:
		f.Close()
		return nil, fmt.Errorf("robotserver: forker exited before it was ready (%v): %s", f.exitErr, f.stderr.String())
	case <-ctx.Done():
		f.Close()
		return nil, fmt.Errorf("robotserver: start forker: %w", context.Cause(ctx))
	}
}

// DialForker uses a forker another process of ours started and keeps (a Ray node's, shared by
// the `pyrualean episode` processes the node runs one after another): sock must be a socket we
// own in a folder only we may enter. Close forgets it; the forker runs on for its owner. A forker
// gone since is found at the next fork, whose server is then exec'd.
func DialForker(o ForkerOptions, sock string) (*Forker, error) {
	if o.Root == "" {
		return nil, errors.New("robotserver: forker: no repository root")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := ownSocket(sock); err != nil {
		return nil, fmt.Errorf("robotserver: forker socket %q: %w", sock, err)
	}
	return &Forker{sock: sock, env: pinnedEnv(serverEnv(Options{Root: o.Root, Env: o.Env})), log: o.Logger,
		exited: make(chan struct{}), stderr: &tail{max: 16 << 10}, dialed: true}, nil
}

// ownSocket checks that path is a socket of ours in a folder of ours that no one else may enter.
func ownSocket(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	dir, err := os.Lstat(filepath.Dir(path))
	if err != nil {
		return err
	}
	uid := uint32(os.Getuid())
	switch s, d := st.Sys().(*syscall.Stat_t), dir.Sys().(*syscall.Stat_t); {
	case st.Mode().Type() != fs.ModeSocket:
		return errors.New("not a socket")
	case s.Uid != uid || d.Uid != uid:
		return errors.New("not ours")
	case !dir.IsDir() || dir.Mode().Perm()&0o077 != 0:
		return errors.New("its folder is open to others")
	}
	return nil
}

// pinnedEnv is what of env chose the forker's imports (the forker refuses a request that differs).
func pinnedEnv(env []string) map[string]string {
	out := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "PYTHONPATH" || k == "MUJOCO_GL" {
			out[k] = v
		}
	}
	return out
}

// SocketPath is where the forker listens (in a folder only its owner may enter).
func (f *Forker) SocketPath() string { return f.sock }

// Pid is the forker's pid (0 for a dialed one: not ours to know).
func (f *Forker) Pid() int {
	if f.cmd == nil {
		return 0
	}
	return f.cmd.Process.Pid
}

// Close stops the forker taking requests (its stdin closes): servers it forked keep running, and it exits
// once they have. It does not wait.
func (f *Forker) Close() error {
	f.once.Do(func() {
		f.closed.Store(true)
		if f.dialed {
			return
		}
		f.stdin.Close()
		go func() { // a forker that outlives its servers by far is stuck: kill it
			select {
			case <-f.exited:
			case <-time.After(24 * time.Hour):
				_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
			}
			os.RemoveAll(f.dir)
		}()
	})
	return nil
}

// forked is a server process the forker started: its pid and the channel its exit comes on.
type forked struct {
	pid  int
	exit chan error // one value: nil, or why it did not exit 0
}

// fork asks the forker for a server running argv (the served module's arguments) with env, dir and limits,
// on the given stdio. Errors mean no process was started (the caller execs instead).
func (f *Forker) fork(argv, env []string, dir string, limits seal.Limits, stdio [3]*os.File) (*forked, error) {
	select {
	case <-f.exited:
		return nil, fmt.Errorf("robotserver: forker exited (%v): %s", f.exitErr, f.stderr.String())
	default:
	}
	if f.closed.Load() {
		return nil, errors.New("robotserver: forker closed")
	}
	envMap := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	for k, v := range f.env {
		if envMap[k] != v {
			return nil, fmt.Errorf("robotserver: %s=%q differs from the forker's %q", k, envMap[k], v)
		}
	}
	l := limits.WithDefaults()
	body, err := json.Marshal(map[string]any{"argv": argv, "env": envMap, "cwd": dir, "limits": map[string]int64{
		"as": l.MemoryBytes, "nofile": int64(l.MaxFiles), "fsize": l.FileBytes, "cpu": int64(l.CPUSeconds)}})
	if err != nil {
		return nil, err
	}
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: f.sock, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("robotserver: forker: %w", err)
	}
	rights := unix.UnixRights(int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()))
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, _, err := c.WriteMsgUnix(body, rights, nil); err != nil {
		c.Close()
		return nil, fmt.Errorf("robotserver: forker: send: %w", err)
	}
	var reply struct {
		Pid   int    `json:"pid"`
		Error string `json:"error"`
	}
	if err := readPacket(c, &reply); err != nil {
		c.Close()
		return nil, fmt.Errorf("robotserver: forker: %w", err)
	}
	if reply.Error != "" || reply.Pid <= 0 {
		c.Close()
		return nil, fmt.Errorf("robotserver: forker refused: %s", reply.Error)
	}
	p := &forked{pid: reply.Pid, exit: make(chan error, 1)}
	_ = c.SetDeadline(time.Time{})
	go func() {
		defer c.Close()
		var done struct {
			Exit *int `json:"exit"`
		}
		if err := readPacket(c, &done); err != nil || done.Exit == nil {
			// the forker died first: watch the process itself
			p.exit <- waitPid(p.pid)
			return
		}
		switch code := *done.Exit; {
		case code == 0:
			p.exit <- nil
		case code < 0:
			p.exit <- fmt.Errorf("signal: %v", syscall.Signal(-code))
		default:
			p.exit <- fmt.Errorf("exit status %d", code)
		}
	}()
	return p, nil
}

// readPacket reads one JSON packet from c.
func readPacket(c *net.UnixConn, v any) error {
	buf := make([]byte, 64<<10)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if n == 0 {
		return io.EOF
	}
	return json.Unmarshal(buf[:n], v)
}

// waitPid waits until pid, not our child, has exited (a pidfd turns readable); its status is unknown.
func waitPid(pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("exited (status unknown: its forker is gone)")
	}
	defer unix.Close(fd)
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("robotserver: wait for %d: %w", pid, err)
		}
		if fds[0].Revents != 0 {
			return fmt.Errorf("exited (status unknown: its forker is gone)")
		}
	}
}

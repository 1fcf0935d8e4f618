// Package robotserver starts and owns a robot server: the robot's simulator, task predicate and primitive
// ledger in their own Python process (pyrualean_robot.served), outside the agent's kernel. The kernel
// reaches the robot only through the server's agent socket (the `robo` proxy); this package talks to the
// host socket, which the kernel never sees, and is where an episode reads success, env steps and the
// ledger from. Both sockets speak RPent's env RPC (the http transport over unix sockets).
package robotserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/seal"
)

// ErrExited is wrapped by errors of a server that is no longer running.
var ErrExited = errors.New("robotserver: robot server exited")

// Options say which robot to serve and how.
type Options struct {
	Root        string // repository root (the venv's Python); required
	Python      string // interpreter; default robotapi.Python(Root)
	Robot, Task string
	Seed        int
	Suite       string
	Images      string            // on-motion | on-demand | none
	Primitives  string            // full | no-vla
	MaxEnvSteps int               // 0: the robot's own
	Options     map[string]string // the robot's own make() options (--robot-opt), as given
	Dir         string            // the server's own folder (its calls.jsonl); never the kernel's workspace
	Env         map[string]string // added to the server's environment (e.g. PYTHONPATH, CUDA_VISIBLE_DEVICES)
	Logger      *slog.Logger
	// ReadyTimeout bounds the robot's boot (default 5 min: remote robots start their own env servers).
	ReadyTimeout time.Duration
	// Limits are the server process's memory, open-file, file-size and CPU limits (seal's; zero: its
	// defaults, the sealed kernel's).
	Limits seal.Limits
	// Forker, when set, forks the server from a process that has its modules imported (cheaper); where it
	// cannot (gone, another PYTHONPATH or MUJOCO_GL), the server is exec'd, with a warning.
	Forker *Forker
}

// Server is a running robot server.
type Server struct {
	pid       int  // the server's process (and process group)
	forked    bool // started by a Forker, not exec'd
	stdin     io.WriteCloser
	sockDir   string
	agentSock string
	hostSock  string
	httpc     *http.Client
	log       *slog.Logger
	exited    chan struct{}
	stderr    *tail
	closeOnce sync.Once
	closeErr  error
	exitErr   error
	ready     chan struct{}
	started   time.Time
	// StartupDur is how long the robot took to boot (set once ready).
	StartupDur   time.Duration
	readyTimeout time.Duration
}

// Start launches the robot server and returns once both sockets listen (the robot has booted).
func Start(ctx context.Context, o Options) (*Server, error) {
	s, err := Launch(o)
	if err != nil {
		return nil, err
	}
	if err := s.WaitReady(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Launch starts the robot server and returns at once: its socket paths are known, the robot boots
// meanwhile (e.g. while the kernel starts). WaitReady waits for it; Close stops it either way.
func Launch(o Options) (*Server, error) {
	if o.Root == "" {
		return nil, errors.New("robotserver: no repository root")
	}
	if o.Dir == "" {
		return nil, errors.New("robotserver: no folder for the server (Dir)")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 5 * time.Minute
	}
	python := o.Python
	if python == "" {
		python = robotapi.Python(o.Root)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("robotserver: folder: %w", err)
	}
	// Short paths (sun_path is 108 bytes); agent/ is what a sandbox binds in, host/ never is.
	sockDir, err := os.MkdirTemp("", "pyrualean-robot-")
	if err != nil {
		return nil, fmt.Errorf("robotserver: socket folder: %w", err)
	}
	// agent/ is passable by the sealed kernel's own user (its socket is 0666); host/ is ours alone.
	for d, mode := range map[string]os.FileMode{"agent": 0o755, "host": 0o700} {
		if err := os.Mkdir(filepath.Join(sockDir, d), mode); err != nil {
			os.RemoveAll(sockDir)
			return nil, fmt.Errorf("robotserver: socket folder: %w", err)
		}
	}
	s := &Server{sockDir: sockDir, agentSock: filepath.Join(sockDir, "agent", "robot.sock"),
		hostSock: filepath.Join(sockDir, "host", "robot.sock"), log: o.Logger, exited: make(chan struct{}),
		stderr: &tail{max: 16 << 10}}
	s.httpc = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.hostSock)
		},
		DisableKeepAlives: true, // the Python server speaks HTTP/1.0, one request per connection
	}}
	args := []string{"--robot", o.Robot, "--workspace", o.Dir,
		"--agent-socket", s.agentSock, "--host-socket", s.hostSock}
	add := func(flag, v string) {
		if v != "" {
			args = append(args, flag, v)
		}
	}
	add("--task", o.Task)
	args = append(args, "--seed", strconv.Itoa(o.Seed))
	add("--images", o.Images)
	add("--primitives", o.Primitives)
	add("--suite", o.Suite)
	if o.MaxEnvSteps > 0 {
		args = append(args, "--max-env-steps", strconv.Itoa(o.MaxEnvSteps))
	}
	for _, k := range slices.Sorted(maps.Keys(o.Options)) {
		args = append(args, "--opt", k+"="+o.Options[k])
	}
	env := serverEnv(o)
	s.started = time.Now()
	s.readyTimeout = o.ReadyTimeout
	var stdout io.ReadCloser
	if o.Forker != nil {
		if stdout, err = s.fork(o.Forker, args, env, o); err != nil {
			s.log.Warn("robot server: not forked, exec'ing it", "err", err)
		}
	}
	if stdout == nil {
		if stdout, err = s.exec(python, args, env, o); err != nil {
			os.RemoveAll(sockDir)
			return nil, err
		}
	}
	s.ready = make(chan struct{})
	go func() {
		defer stdout.Close()
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.TrimSpace(sc.Text()) == "ready" {
				s.StartupDur = time.Since(s.started)
				close(s.ready)
				signalled = true
				continue
			}
			s.log.Debug("robot server", "stdout", sc.Text())
		}
	}()
	return s, nil
}

// exec starts the server as `python -m pyrualean_robot.served ARGS`.
func (s *Server) exec(python string, args, env []string, o Options) (io.ReadCloser, error) {
	// The server reads the agent's requests outside the sandbox: the kernel's limits bind it too (its
	// threads are bounded by the agent socket's connection cap).
	argv := o.Limits.LimitArgv(append([]string{python, "-m", "pyrualean_robot.served"}, args...))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = o.Dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// stdin stays open: the server exits when it closes (we died or Close ran).
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("robotserver: start %s: %w", python, err)
	}
	s.pid = cmd.Process.Pid
	go func() {
		s.exitErr = cmd.Wait()
		close(s.exited)
	}()
	return stdout, nil
}

// fork has f start the server on pipes of ours (the same arguments, environment, folder and limits).
func (s *Server) fork(f *Forker, args, env []string, o Options) (io.ReadCloser, error) {
	var ends [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			for _, e := range ends[:i] {
				e.Close()
			}
			return nil, err
		}
		ends[i], ends[i+1] = r, w
	}
	p, err := f.fork(args, env, o.Dir, o.Limits, [3]*os.File{ends[0], ends[3], ends[5]})
	ends[0].Close() // the child's ends: it has its own copies now
	ends[3].Close()
	ends[5].Close()
	if err != nil {
		ends[1].Close()
		ends[2].Close()
		ends[4].Close()
		return nil, err
	}
	s.pid, s.forked, s.stdin = p.pid, true, ends[1]
	go func() {
		_, _ = io.Copy(s.stderr, ends[4])
		ends[4].Close()
	}()
	go func() {
		s.exitErr = <-p.exit
		close(s.exited)
	}()
	return ends[2], nil
}

// WaitReady returns once the robot has booted and both sockets listen; on failure the server is closed.
func (s *Server) WaitReady(ctx context.Context) error {
	timer := time.NewTimer(time.Until(s.started.Add(s.readyTimeout)))
	defer timer.Stop()
	select {
	case <-s.ready:
		return nil
	case <-s.exited:
		s.Close()
		return fmt.Errorf("%w before it was ready (%v): %s", ErrExited, s.exitErr, s.stderr.String())
	case <-timer.C:
		s.Close()
		return fmt.Errorf("robotserver: not ready after %v: %s", s.readyTimeout, s.stderr.String())
	case <-ctx.Done():
		s.Close()
		return fmt.Errorf("robotserver: start: %w", context.Cause(ctx))
	}
}

// PythonPath is PYTHONPATH with root's robot package first, so the server (and a sealed kernel that
// generates its proxy from the same classes) runs this checkout's pyrualean_robot.
func PythonPath(root, current string) string {
	p := filepath.Join(root, "robotapi", "python")
	if current == "" || current == p {
		return p
	}
	if strings.HasPrefix(current, p+string(os.PathListSeparator)) {
		return current
	}
	return p + string(os.PathListSeparator) + current
}

func serverEnv(o Options) []string {
	if _, ok := o.Env["PYTHONPATH"]; !ok {
		env := map[string]string{"PYTHONPATH": PythonPath(o.Root, os.Getenv("PYTHONPATH"))}
		for k, v := range o.Env {
			env[k] = v
		}
		o.Env = env
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if seal.SecretName(k) { // the sandbox's rule: the server serves the agent's socket
			continue
		}
		if _, over := o.Env[k]; over {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range o.Env {
		env = append(env, k+"="+v)
	}
	return append(env, "MUJOCO_GL="+firstNonEmpty(o.Env["MUJOCO_GL"], os.Getenv("MUJOCO_GL"), "egl"))
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// AgentSocket is the socket the kernel's proxy connects to.
func (s *Server) AgentSocket() string { return s.agentSock }

// AgentDir is the folder holding only the agent socket: what a sandbox binds in.
func (s *Server) AgentDir() string { return filepath.Dir(s.agentSock) }

// Pid is the server process's pid.
func (s *Server) Pid() int { return s.pid }

// Forked says whether a Forker started the server (else it was exec'd).
func (s *Server) Forked() bool { return s.forked }

// Done closes when the server process has exited.
func (s *Server) Done() <-chan struct{} { return s.exited }

// Call runs one host RPC method and returns its result.
func (s *Server) Call(ctx context.Context, method string, args ...any) (json.RawMessage, error) {
	if args == nil {
		args = []any{}
	}
	body, err := json.Marshal(map[string]any{"method": method, "args": args, "kwargs": map[string]any{}})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://robot/call", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.httpc.Do(req)
	if err != nil {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("%w (%v): %s", ErrExited, s.exitErr, s.stderr.String())
		default:
		}
		return nil, fmt.Errorf("robotserver: %s: %w", method, err)
	}
	defer resp.Body.Close()
	var env struct {
		OK     bool            `json:"ok"`
		Result json.RawMessage `json:"result"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return nil, fmt.Errorf("robotserver: %s: malformed reply: %w", method, err)
	}
	if !env.OK {
		return nil, fmt.Errorf("robotserver: %s: %s", method, env.Error)
	}
	return env.Result, nil
}

// Report is the judge's view of the episode since the previous Report: what the simulator says, never
// what the kernel says.
type Report struct {
	Moved           bool             `json:"moved"`
	EnvSteps        int              `json:"env_steps"`
	EnvStepsTotal   int              `json:"env_steps_total"`
	LedgerTotal     int              `json:"ledger_total"`
	Calls           []map[string]any `json:"calls"`
	State           json.RawMessage  `json:"state"`
	Done            bool             `json:"done"`
	Success         bool             `json:"success"`
	EpisodeFinished *string          `json:"episode_finished"`
}

// Report returns the episode's progress since the last Report (the host's own window).
func (s *Server) Report(ctx context.Context) (*Report, error) {
	raw, err := s.Call(ctx, "host.report")
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("robotserver: host.report: %w", err)
	}
	return &r, nil
}

// Card returns the episode card (application/json of episode_card(), images as base64 PNG).
func (s *Server) Card(ctx context.Context) (json.RawMessage, error) { return s.Call(ctx, "host.card") }

// Ledger returns every primitive call so far.
func (s *Server) Ledger(ctx context.Context) ([]map[string]any, error) {
	raw, err := s.Call(ctx, "host.ledger")
	if err != nil {
		return nil, err
	}
	var l []map[string]any
	return l, json.Unmarshal(raw, &l)
}

// Stop ends the episode in the simulator (timeout, cancelled, call_budget): later motions raise.
func (s *Server) Stop(ctx context.Context, reason string) error {
	_, err := s.Call(ctx, "host.stop", reason)
	return err
}

// Close shuts the server down (shutdown RPC, then stdin closed, then a kill) and removes its sockets.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		select {
		case <-s.exited:
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = s.Call(ctx, "shutdown")
			cancel()
			s.stdin.Close()
			select {
			case <-s.exited:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-s.pid, syscall.SIGKILL)
				<-s.exited
			}
		}
		s.cleanup()
	})
	return s.closeErr
}

func (s *Server) cleanup() {
	if s.stdin != nil {
		s.stdin.Close()
	}
	s.closeErr = os.RemoveAll(s.sockDir)
}

// tail keeps the last max bytes written (the server's stderr, for errors).
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

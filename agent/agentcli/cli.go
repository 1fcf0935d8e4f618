// Package cli drives an episode with an agent CLI: the Codex CLI (`codex exec --json`) or Claude Code
// (`claude -p --output-format stream-json`). The episode's Toolkit is served to the CLI as an MCP server
// on 127.0.0.1 (package agent/mcp); the CLI's own event stream is kept in the run folder and parsed for
// turns, token usage and cost; the wall-clock budget is enforced by ending the CLI's process group.
package agentcli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/mcp"
)

// Driver is what a CLI runtime needs from a live episode. *agent.Episode implements it.
type Driver = agent.Driver

// Info describes the agent CLI that drove an episode: cli.json in the run folder (result.json "cli"
// holds the agent.CLIInfo part).
type Info struct {
	Name      string   `json:"name"`                 // "codex" | "claude"
	Version   string   `json:"version"`              // e.g. "codex-cli 0.155.1", "2.1.332 (Claude Code)"
	ExitCode  *int     `json:"exit_code"`            // nil while running or when ended by a signal
	Killed    string   `json:"killed,omitempty"`     // why we ended it: budget, after_finish, cancelled
	SessionID string   `json:"session_id,omitempty"` // codex thread_id / claude session_id
	Attempts  int      `json:"attempts"`             // CLI runs (retries when it failed before any tool call)
	ToolCalls int      `json:"tool_calls"`           // calls our MCP server answered
	Cancelled int      `json:"cancelled_tool_calls"` // calls the CLI gave up on (the cell still ran to the end)
	Events    string   `json:"events"`               // run-folder file with the CLI's event stream
	Stderr    string   `json:"stderr"`
	CostUSD   *float64 `json:"cost_usd,omitempty"` // the CLI's own cost figure (Claude Code)
}

// CLIFile is the run-folder copy of Info.
const CLIFile = "cli.json"

// publish hands info to the episode (result.json "cli") and writes cli.json.
func publish(ep Driver, info Info) {
	ep.Record().CLI(agent.CLIInfo{Name: info.Name, Version: info.Version, Events: info.Events, Stderr: info.Stderr,
		SessionID: info.SessionID, ExitCode: info.ExitCode, Killed: info.Killed})
	b, _ := json.MarshalIndent(info, "", "  ")
	_ = os.WriteFile(filepath.Join(ep.Dir(), CLIFile), append(b, '\n'), 0o644)
}

// Config configures RunCodex and RunClaude. Zero values mean the defaults described per field.
type Config struct {
	Bin             string // the CLI executable (default FindBin)
	Model           string // -m / --model (default: the CLI's own default)
	ReasoningEffort string // codex model_reasoning_effort; claude --effort
	BaseURL         string // codex: model provider base_url (wire_api "responses"); claude: ANTHROPIC_BASE_URL
	APIKeyEnv       string // env var holding the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY)
	Home            string // codex: CODEX_HOME to use (its login, config); default a fresh <run>/codex_home

	Budget   time.Duration // wall clock for the CLI run; the process group is ended when it is used up
	MaxTurns int           // claude --max-turns is MaxTurns+5 (seed); the Toolkit enforces MaxTurns itself

	KillGrace        time.Duration // SIGTERM → SIGKILL (default 10 s)
	FinishGrace      time.Duration // after finish, time the CLI gets to wrap up before it is ended (default 60 s)
	PlannerAttempts  int           // CLI runs tried when it fails before the first tool call (default 3)
	PlannerRetryWait time.Duration // between those attempts (default 15 s)
	Retries          int           // retries inside the CLI (codex provider request/stream retries, claude CLAUDE_CODE_MAX_RETRIES): 0 default ($PYRUALEAN_CODEX_RETRIES, else 10), <0 none

	ExtraArgs []string // appended to the CLI's arguments
	Env       []string // extra environment, KEY=VALUE
	Logger    *slog.Logger
}

// retries is the CLI-internal retry count Config.Retries asks for.
func (c *Config) retries() int {
	switch {
	case c.Retries < 0:
		return 0
	case c.Retries > 0:
		return c.Retries
	}
	if v, err := strconv.Atoi(os.Getenv("PYRUALEAN_CODEX_RETRIES")); err == nil && v >= 0 {
		return v
	}
	return 10
}

func (c *Config) defaults() {
	if c.KillGrace <= 0 {
		c.KillGrace = 10 * time.Second
	}
	if c.FinishGrace <= 0 {
		c.FinishGrace = 60 * time.Second
	}
	if c.PlannerAttempts <= 0 {
		c.PlannerAttempts = 3
	}
	if c.PlannerRetryWait <= 0 {
		c.PlannerRetryWait = 15 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// ErrNotInstalled means the CLI binary was not found.
var ErrNotInstalled = errors.New("agent CLI not installed")

// FindBin locates a CLI ("codex" or "claude"): $PYRUALEAN_CODEX_BIN / $PYRUALEAN_CLAUDE_CLI, then the
// project's pinned install (<repo>/agent/agentcli/node/node_modules/.bin, installed by scripts/setup.sh), then
// $PATH. The repo is found from the working directory and from the executable's location.
func FindBin(name string) (string, error) {
	envName := map[string]string{"codex": "PYRUALEAN_CODEX_BIN", "claude": "PYRUALEAN_CLAUDE_CLI"}[name]
	if v := os.Getenv(envName); envName != "" && v != "" {
		return v, nil
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				p := filepath.Join(d, "agent", "agentcli", "node", "node_modules", ".bin", name)
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: %s (run scripts/setup.sh, or set %s)", ErrNotInstalled, name, envName)
}

// Version runs `<bin> --version` and returns its first line.
func Version(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.WaitDelay = time.Second // a CLI's straggling child must not hold us past the deadline
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("cli: %s --version: %w", bin, err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line), nil
}

// baseEnv is the allow-listed environment a CLI inherits (seed: env passed by allow-list), with
// loopback added to NO_PROXY so the CLI reaches our MCP server and local model servers directly.
func baseEnv(extra ...string) []string {
	keep := []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "TERM", "SHELL",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
		"http_proxy", "https_proxy", "all_proxy"}
	var env []string
	for _, k := range keep {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LC_") {
			env = append(env, kv)
		}
	}
	noProxy := "localhost,127.0.0.1,::1"
	if v := os.Getenv("NO_PROXY"); v != "" {
		noProxy = v + "," + noProxy
	}
	env = append(env, "NO_PROXY="+noProxy, "no_proxy="+noProxy)
	return append(env, extra...)
}

// session is one episode served over MCP to a CLI, plus what the server saw.
type session struct {
	srv       *mcp.Server
	http      *mcp.HTTPServer
	life      context.Context
	stop      context.CancelCauseFunc
	mu        sync.Mutex
	calls     int
	cancelled int
	finished  chan struct{} // closed when a call reports Finished
	once      sync.Once
}

// serve starts the MCP server for ep's Toolkit on a free loopback port.
func serve(ctx context.Context, ep Driver, logger *slog.Logger) (*session, error) {
	life, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	s := &session{life: life, stop: stop, finished: make(chan struct{})}
	srv := mcp.NewServer(ep.Toolkit(), mcp.Options{Life: life, Logger: logger, OnCall: func(r mcp.CallRecord) {
		s.mu.Lock()
		s.calls++
		if r.Cancelled {
			s.cancelled++
		}
		s.mu.Unlock()
		if r.Result.Finished || ep.Finished() {
			s.once.Do(func() { close(s.finished) })
		}
	}})
	hs, err := mcp.ListenHTTP(srv, "127.0.0.1:0", logger)
	if err != nil {
		stop(err)
		return nil, err
	}
	s.srv, s.http = srv, hs
	return s, nil
}

func (s *session) toolCalls() (calls, cancelled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.cancelled
}

// close ends the server's lifetime (a running call is cancelled: the kernel is interrupted), waits
// for that call to return so nothing races the episode's end, and stops listening.
func (s *session) close(cause error) {
	s.stop(cause)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_ = s.srv.Idle(ctx)
	s.http.Close()
}

// proc is one CLI process in its own process group, its stdout streamed line by line.
type proc struct {
	cmd    *exec.Cmd
	killed string // why we ended it ("" if it exited on its own)
	mu     sync.Mutex
}

// runProcess starts cmd in a new process group, feeds every stdout line to onLine (after appending it
// to events), and waits. It ends the group (SIGTERM, then SIGKILL after grace) when ctx ends — with the
// reason killReason(ctx) — or when stopEarly fires.
type runSpec struct {
	cmd       *exec.Cmd
	stdin     io.Reader
	events    io.Writer // the CLI's stdout, verbatim
	stderr    io.Writer
	onLine    func([]byte)
	grace     time.Duration
	stopEarly <-chan string // a reason to end the CLI now (e.g. "after_finish")
}

func runProcess(ctx context.Context, rs runSpec) (exitCode *int, killed string, err error) {
	cmd := rs.cmd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdin = rs.stdin
	cmd.Stderr = rs.stderr
	// A plain pipe rather than StdoutPipe: Wait then returns when the CLI exits, even if something it
	// started still holds the pipe open, and the reader can be cut off by ending the group.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, "", fmt.Errorf("cli: %w", err)
	}
	cmd.Stdout = pw
	startErr := cmd.Start()
	pw.Close()
	if startErr != nil {
		pr.Close()
		return nil, "", fmt.Errorf("cli: start %s: %w", cmd.Path, startErr)
	}
	pgid := cmd.Process.Pid
	done := make(chan struct{}) // closed once the CLI is reaped
	g := &group{pgid: pgid, grace: rs.grace, reaped: done}
	go g.watch(ctx, rs.stopEarly)
	read := make(chan struct{})
	go func() { defer close(read); readLines(pr, rs.events, rs.onLine) }()
	werr := cmd.Wait()
	// The CLI is gone. Whatever it started in its group goes too; the last output is read first.
	select {
	case <-read:
	case <-time.After(2 * time.Second):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	close(done)
	select {
	case <-read:
	case <-time.After(2 * time.Second): // held open outside the group: stop reading
	}
	pr.Close()
	<-read
	if cmd.ProcessState != nil && cmd.ProcessState.Exited() {
		c := cmd.ProcessState.ExitCode()
		exitCode = &c
	}
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) {
		return exitCode, g.reason(), werr
	}
	return exitCode, g.reason(), nil
}

// group is a CLI's process group, ended (SIGTERM, then SIGKILL after grace) when its context ends
// or it is stopped early.
type group struct {
	pgid   int
	grace  time.Duration
	reaped <-chan struct{}
	mu     sync.Mutex
	killed string // why it was ended ("" : it was not)
}

// watch ends the group when ctx ends (reason "budget" or "cancelled") or a stop reason comes.
func (g *group) watch(ctx context.Context, stopEarly <-chan string) {
	select {
	case <-ctx.Done():
		reason := "cancelled"
		if isBudget(context.Cause(ctx)) {
			reason = "budget"
		}
		g.kill(reason)
	case reason := <-stopEarly:
		g.kill(reason)
	case <-g.reaped:
	}
}

func (g *group) kill(reason string) {
	g.mu.Lock()
	if g.killed != "" {
		g.mu.Unlock()
		return
	}
	g.killed = reason
	g.mu.Unlock()
	_ = syscall.Kill(-g.pgid, syscall.SIGTERM)
	go func() {
		select {
		case <-time.After(g.grace):
			_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
		case <-g.reaped: // reaped: the group is ended by runProcess
		}
	}()
}

func (g *group) reason() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.killed
}

// readLines copies r to events line by line and hands each line, without its end, to onLine.
func readLines(r io.Reader, events io.Writer, onLine func([]byte)) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if events != nil {
				events.Write(line)
			}
			if onLine != nil {
				onLine(trimEOL(line))
			}
		}
		if err != nil {
			return
		}
	}
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// budgetContext bounds ctx by the budget; its cause is agent.ErrBudgetExceeded when the budget runs
// out (the same cause as Episode.Context's, so Finish derives status "timeout" either way).
func budgetContext(ctx context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	if budget <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, budget, agent.ErrBudgetExceeded)
}

// isBudget says whether a context ended because a time budget ran out.
func isBudget(cause error) bool {
	return errors.Is(cause, agent.ErrBudgetExceeded) || errors.Is(cause, context.DeadlineExceeded)
}

// endReason turns how the CLI ended into the runtime's error, or ok=false when the CLI ended on its own.
func endReason(ctx context.Context, killed string, finished bool) (err error, ok bool) {
	switch {
	case killed == "budget" || killed == "cancelled":
		cause := context.Cause(ctx)
		if errors.Is(cause, context.DeadlineExceeded) && !errors.Is(cause, agent.ErrBudgetExceeded) {
			cause = fmt.Errorf("%w: %w", agent.ErrBudgetExceeded, cause)
		}
		return cause, true
	case killed == "after_finish" || finished:
		return nil, true
	}
	return nil, false
}

// finishWatch turns "finish was called" into a stop reason after the grace period.
func finishWatch(s *session, grace time.Duration, done <-chan struct{}) <-chan string {
	ch := make(chan string, 1)
	go func() {
		select {
		case <-s.finished:
		case <-done:
			return
		}
		select {
		case <-time.After(grace):
			ch <- "after_finish"
		case <-done:
		}
	}()
	return ch
}

// createFile opens a run-folder file for writing.
func createFile(dir, name string) (*os.File, error) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("cli: %w", err)
	}
	return f, nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		return nil
	}
}

// rel returns name when it exists in dir (result.json file references), else "".
func rel(dir, name string) string {
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		return name
	}
	return ""
}

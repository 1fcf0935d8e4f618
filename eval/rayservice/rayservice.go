// Package rayservice is pyrualean's long-lived job on a Ray cluster and its client. The job
// (ray_service.py, with ray_driver.py running each suite) serves suites over HTTP, so a suite pays
// neither a job's start nor fresh Ray workers: Ensure finds the cluster's service of this version
// and token (or submits it, once) through the dashboard's Job Submission API and reads where it
// listens from its log; Submit, Follow, Ack and Cancel are a suite's life. The token is this
// user's (a file of theirs, made once): it travels in the service's package, never in a log or in
// the job's details, which hold only its hash.
package rayservice

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/eval/rayjob"
)

var (
	//go:embed ray_service.py
	serviceSource []byte
	//go:embed ray_driver.py
	driverSource []byte
)

// linePrefix starts the service's line saying where it listens (ray_service.py's SERVICE_PREFIX).
const linePrefix = "@pyrualean-ray-service "

// Version names these files: a service of another version (an older pyrualean) is never used.
func Version() string {
	h := sha256.New()
	h.Write(serviceSource)
	h.Write(driverSource)
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Options say how to start the service where the cluster has none.
type Options struct {
	Python string // the nodes' python with ray (default: python)
	// Pyrualean is the nodes' pyrualean: each node's host (its robot-server forker) starts with the
	// service (else with the first suite that names a binary).
	Pyrualean string
	Port      int // where it listens on the head node (0: any free port; eval --ray-service-port gives 8275)
	// TokenFile holds the token this user's services take (default: pyrualean/ray-service-token in
	// the user's cache folder; made, 0600, when missing).
	TokenFile string
	Logger    *slog.Logger
}

// token reads the user's token, making it when there is none.
func (o Options) token() (string, error) {
	path := o.TokenFile
	if path == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("ray service: no folder for its token: %w", err)
		}
		path = filepath.Join(dir, "pyrualean", "ray-service-token")
	}
	for range 20 {
		b, err := os.ReadFile(path)
		switch {
		case err == nil && len(bytes.TrimSpace(b)) >= 32:
			return string(bytes.TrimSpace(b)), nil
		case err == nil:
			time.Sleep(50 * time.Millisecond) // another eval is writing it
			continue
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("ray service: its token: %w", err)
		}
		var raw [32]byte
		rand.Read(raw[:])
		tok := hex.EncodeToString(raw[:])
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", fmt.Errorf("ray service: its token: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // made meanwhile by another eval: read it
		} else if err != nil {
			return "", fmt.Errorf("ray service: its token: %w", err)
		}
		_, err = f.WriteString(tok + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", fmt.Errorf("ray service: its token: %w", err)
		}
		return tok, nil
	}
	return "", fmt.Errorf("ray service: %s holds no token (remove it and a new one is made)", path)
}

// TokenHash names a token in the service job's metadata (which anyone who reads the dashboard sees).
func TokenHash(tok string) string {
	sum := sha256.Sum256([]byte("pyrualean-ray-service\x00" + tok))
	return hex.EncodeToString(sum[:12])
}

// Service is one cluster's running service.
type Service struct {
	Job   string // its submission id
	URL   string // http://HEAD:PORT
	token string
	http  *http.Client
}

// Ensure returns the cluster's service of this version, submitting it if there is none (its
// first start takes a few seconds: Ray's driver, a warm worker per CPU).
func Ensure(ctx context.Context, c *rayjob.Client, o Options) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	tok, err := o.token()
	if err != nil {
		return nil, err
	}
	jobs, err := c.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("ray service: listing the cluster's jobs: %w", err)
	}
	id := ""
	for _, j := range jobs {
		if j.Metadata["pyrualean"] != "service" || rayjob.Terminal(j.Status) {
			continue
		}
		if j.Metadata["version"] != Version() || j.Metadata["token"] != TokenHash(tok) {
			// Another pyrualean's (an older one) or another user's: not ours to stop, but it holds
			// a worker per CPU and a forker per node.
			o.Logger.Warn("ray service: another version's or user's service runs on the cluster (ray job stop ID ends it)",
				"job", j.SubmissionID, "version", j.Metadata["version"])
			continue
		}
		if id == "" {
			id = j.SubmissionID
		}
	}
	if id == "" {
		if id, err = submit(ctx, c, o, tok); err != nil {
			return nil, err
		}
		o.Logger.Info("ray service: started", "job", id, "version", Version())
	}
	return find(ctx, c, id, tok)
}

func submit(ctx context.Context, c *rayjob.Client, o Options, tok string) (string, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	files := map[string][]byte{"ray_service.py": serviceSource, "ray_driver.py": driverSource, "token": []byte(tok)}
	for name, b := range files {
		w, err := zw.Create(name)
		if err == nil {
			_, err = w.Write(b)
		}
		if err != nil {
			return "", err
		}
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	uri, err := c.UploadPackage(ctx, buf.Bytes())
	if err != nil {
		return "", fmt.Errorf("ray service: uploading its files: %w", err)
	}
	py := o.Python
	if py == "" {
		py = "python"
	}
	port := o.Port
	if port < 0 {
		port = 0
	}
	var nonce [4]byte
	rand.Read(nonce[:])
	entry := fmt.Sprintf("%s ray_service.py --port %d", py, port)
	if o.Pyrualean != "" {
		entry += " --pyrualean " + shellQuote(o.Pyrualean)
	}
	spec := rayjob.Spec{
		Entrypoint:   entry,
		SubmissionID: fmt.Sprintf("pyrualean-service-%s-%x", Version(), nonce),
		RuntimeEnv:   map[string]any{"working_dir": uri},
		Metadata:     map[string]string{"pyrualean": "service", "version": Version(), "token": TokenHash(tok)},
	}
	if _, err := c.Submit(ctx, spec); err != nil {
		return "", fmt.Errorf("ray service: submitting it: %w", err)
	}
	return spec.SubmissionID, nil
}

// shellQuote quotes s for the job's entrypoint (a shell command line).
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// find waits for the service's line in its job's log (it prints it once it listens).
func find(ctx context.Context, c *rayjob.Client, id, tok string) (*Service, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		logs, err := c.Logs(ctx, id)
		if err == nil {
			for line := range strings.Lines(logs) {
				raw, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), linePrefix)
				if !ok {
					continue
				}
				var m struct {
					Port int `json:"port"`
				}
				if err := json.Unmarshal([]byte(raw), &m); err != nil || m.Port <= 0 {
					return nil, fmt.Errorf("ray service %s: unreadable line %q", id, raw)
				}
				u, _ := url.Parse(c.Address)
				s := &Service{Job: id, URL: "http://" + net.JoinHostPort(u.Hostname(), strconv.Itoa(m.Port)), token: tok,
					http: &http.Client{}}
				if err := s.do(ctx, http.MethodGet, "/health", nil, nil); err != nil {
					return nil, fmt.Errorf("ray service %s runs, but does not answer at %s (its port must be reachable from here, as the dashboard's is): %w", id, s.URL, err)
				}
				return s, nil
			}
		}
		info, ierr := c.Info(ctx, id)
		if ierr == nil && rayjob.Terminal(info.Status) {
			return nil, fmt.Errorf("ray service %s %s: %s%s", id, info.Status, info.Message, lastLines(logs, 10))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("ray service %s: not listening yet: %w%s", id, context.Cause(ctx), lastLines(logs, 10))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return "\n  " + strings.Join(lines, "\n  ")
}

// Error is the service's answer to a request it refused.
type Error struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *Error) Error() string {
	return fmt.Sprintf("ray service %s %s: %d %s", e.Method, e.Path, e.Status, strings.TrimSpace(e.Body))
}

func (s *Service) request(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ray service %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, &Error{Method: method, Path: path, Status: resp.StatusCode, Body: string(b)}
	}
	return resp, nil
}

func (s *Service) do(ctx context.Context, method, path string, body []byte, out any) error {
	resp, err := s.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Submit starts a suite from its package (a zip of plan.json and twins/).
func (s *Service) Submit(ctx context.Context, pkg []byte) error {
	return s.do(ctx, http.MethodPost, "/suites", pkg, nil)
}

// Follow streams the suite's protocol lines after line n (each a JSON object) to line, until the
// suite's last line or an error; the stream may drop, then Follow again from the last line read.
func (s *Service) Follow(ctx context.Context, suite string, after int, line func([]byte)) error {
	resp, err := s.request(ctx, http.MethodGet, "/suites/"+url.PathEscape(suite)+"/lines?after="+strconv.Itoa(after), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer stop()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		b, err := r.ReadBytes('\n') // a line carries a run folder: no length limit but memory's
		if len(bytes.TrimSpace(b)) > 0 && err == nil {
			line(bytes.TrimSpace(b))
		}
		if errors.Is(err, io.EOF) {
			if len(bytes.TrimSpace(b)) > 0 {
				return fmt.Errorf("ray service: the stream of %s ended inside a line", suite)
			}
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("ray service: following %s: %w", suite, err)
		}
	}
}

// Ack says the suite's lines up to n are read (the service forgets them).
func (s *Service) Ack(ctx context.Context, suite string, n int) error {
	return s.do(ctx, http.MethodPost, "/suites/"+url.PathEscape(suite)+"/ack?n="+strconv.Itoa(n), nil, nil)
}

// Cancel asks the service to cancel the suite: its running attempts end interrupted, then its last
// line comes.
func (s *Service) Cancel(ctx context.Context, suite string) error {
	return s.do(ctx, http.MethodPost, "/suites/"+url.PathEscape(suite)+"/cancel", nil, nil)
}

// SuiteState is what the service says of a suite.
type SuiteState struct {
	Suite     string `json:"suite"`
	Episodes  int    `json:"episodes"`
	Lines     int    `json:"lines"`
	Unread    int    `json:"unread"` // lines not acknowledged yet
	Done      bool   `json:"done"`
	Cancelled bool   `json:"cancelled"`
	Readers   int    `json:"readers"`
	Error     string `json:"error"`
}

// State returns the suite's state (an error wrapping a 404 *Error once the service forgot it).
func (s *Service) State(ctx context.Context, suite string) (SuiteState, error) {
	var st SuiteState
	err := s.do(ctx, http.MethodGet, "/suites/"+url.PathEscape(suite), nil, &st)
	return st, err
}

// Package rayjob is a client of Ray's Job Submission REST API (the dashboard, default port 8265):
// upload a working_dir package, submit a job, read its status, follow its logs, stop it. It speaks
// the same routes as Ray's Python JobSubmissionClient (ray/dashboard/modules/job/job_head.py):
//
//	GET  /api/version                           the cluster is up, its Ray version
//	PUT  /api/packages/gcs/_ray_pkg_<sha1>.zip  a working_dir package (runtime_env working_dir gcs://...)
//	GET  /api/jobs/                             every job's details
//	POST /api/jobs/                             submit {entrypoint, submission_id, runtime_env, metadata}
//	GET  /api/jobs/<id>                         status, message, timestamps
//	GET  /api/jobs/<id>/logs/tail               (WebSocket) the driver's output as it is written
//	POST /api/jobs/<id>/stop                    stop the driver and its tasks
//
// Authentication as Ray's own clients: $RAY_AUTH_TOKEN as a bearer token, and $RAY_JOB_HEADERS (a
// JSON object) as extra headers.
package rayjob

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// Job statuses (ray.job_submission.JobStatus).
const (
	Pending   = "PENDING"
	Running   = "RUNNING"
	Stopped   = "STOPPED"
	Succeeded = "SUCCEEDED"
	Failed    = "FAILED"
)

// Terminal says whether a job in this status has ended.
func Terminal(status string) bool {
	return status == Stopped || status == Succeeded || status == Failed
}

// Client talks to one cluster's dashboard.
type Client struct {
	Address string // http(s)://HEAD:8265
	HTTP    *http.Client
	Header  http.Header // sent with every request (auth); see New
}

// New checks the address and reads the authentication Ray's clients read from the environment.
func New(address string) (*Client, error) {
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ray address %q: want http://HEAD:8265 (the dashboard)", address)
	}
	c := &Client{Address: strings.TrimRight(address, "/"), HTTP: &http.Client{Timeout: 2 * time.Minute}, Header: http.Header{}}
	if raw := os.Getenv("RAY_JOB_HEADERS"); raw != "" {
		var h map[string]string
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			return nil, fmt.Errorf("$RAY_JOB_HEADERS: want a JSON object of header: value: %w", err)
		}
		for k, v := range h {
			c.Header.Set(k, v)
		}
	}
	if tok := os.Getenv("RAY_AUTH_TOKEN"); tok != "" && c.Header.Get("Authorization") == "" {
		c.Header.Set("Authorization", "Bearer "+tok)
	}
	return c, nil
}

// Version is GET /api/version.
type Version struct {
	Version    string `json:"version"`
	RayVersion string `json:"ray_version"`
	Session    string `json:"session_name"`
}

// Spec is a job submission (JobSubmitRequest). Everything in it is visible to anyone who can read
// the dashboard: never put a secret here.
type Spec struct {
	Entrypoint   string            `json:"entrypoint"`
	SubmissionID string            `json:"submission_id,omitempty"`
	RuntimeEnv   map[string]any    `json:"runtime_env,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// Info is a job's state (JobDetails; the fields this package reads).
type Info struct {
	SubmissionID string            `json:"submission_id"`
	Status       string            `json:"status"`
	Message      string            `json:"message"`
	Entrypoint   string            `json:"entrypoint"`
	RuntimeEnv   map[string]any    `json:"runtime_env"`
	Metadata     map[string]string `json:"metadata"`
	StartTime    int64             `json:"start_time"` // ms since the epoch
	EndTime      int64             `json:"end_time"`
	ErrorType    string            `json:"error_type"`
}

// HTTPError is a non-2xx answer; Body holds Ray's text (often a Python traceback).
type HTTPError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *HTTPError) Error() string {
	body := strings.TrimSpace(e.Body)
	if lines := strings.Split(body, "\n"); len(lines) > 1 {
		body = lines[len(lines)-1] // a traceback's last line says what went wrong
	}
	return fmt.Sprintf("ray %s %s: %d %s", e.Method, e.Path, e.Status, body)
}

// ErrNotFound is returned (wrapped) for a job the cluster does not know.
var ErrNotFound = errors.New("not found")

func (c *Client) do(ctx context.Context, method, path, ctype string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.Address+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("ray %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("ray %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		herr := &HTTPError{Method: method, Path: path, Status: resp.StatusCode, Body: string(b)}
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%w: %w", herr, ErrNotFound)
		}
		return herr
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("ray %s %s: %w", method, path, err)
		}
	}
	return nil
}

// Version asks the dashboard for its version: the cheapest check that the cluster is up.
func (c *Client) Version(ctx context.Context) (Version, error) {
	var v Version
	err := c.do(ctx, http.MethodGet, "/api/version", "", nil, &v)
	return v, err
}

// UploadPackage stores a working_dir zip in the cluster (content-addressed, as Ray's client names
// it) and returns the URI a runtime_env's working_dir takes.
func (c *Client) UploadPackage(ctx context.Context, zip []byte) (string, error) {
	sum := sha1.Sum(zip)
	name := "_ray_pkg_" + hex.EncodeToString(sum[:]) + ".zip"
	if err := c.do(ctx, http.MethodPut, "/api/packages/gcs/"+name, "application/zip", zip, nil); err != nil {
		return "", err
	}
	return "gcs://" + name, nil
}

// Submit submits a job and returns its submission id.
func (c *Client) Submit(ctx context.Context, s Spec) (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	var out struct {
		SubmissionID string `json:"submission_id"`
	}
	if err := c.do(ctx, http.MethodPost, "/api/jobs/", "application/json", b, &out); err != nil {
		return "", err
	}
	return out.SubmissionID, nil
}

// Info returns a job's state.
func (c *Client) Info(ctx context.Context, id string) (Info, error) {
	var i Info
	err := c.do(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(id), "", nil, &i)
	return i, err
}

// List returns every job the cluster knows (running and ended).
func (c *Client) List(ctx context.Context) ([]Info, error) {
	var out []Info
	err := c.do(ctx, http.MethodGet, "/api/jobs/", "", nil, &out)
	return out, err
}

// Stop asks the cluster to stop a job (its driver, then its tasks). It returns at once; Wait for
// the job to end.
func (c *Client) Stop(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/api/jobs/"+url.PathEscape(id)+"/stop", "application/json", nil, nil)
}

// Logs returns a job's whole output so far (the driver's stdout and stderr), as Ray's
// JobSubmissionClient.get_job_logs does.
func (c *Client) Logs(ctx context.Context, id string) (string, error) {
	var out struct {
		Logs string `json:"logs"`
	}
	err := c.do(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(id)+"/logs", "", nil, &out)
	return out.Logs, err
}

// Wait polls a job until it has ended (or ctx is done) and returns its last state.
func (c *Client) Wait(ctx context.Context, id string, every time.Duration) (Info, error) {
	for {
		i, err := c.Info(ctx, id)
		if err == nil && Terminal(i.Status) {
			return i, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = context.Cause(ctx)
			}
			return i, err
		case <-time.After(every):
		}
	}
}

// Tail follows a job's output (the driver's stdout and stderr) from its start and calls line for
// each line, in order, until the job has ended and every line is read, or ctx is done. A line may
// be of any length (the dashboard sends the log in pieces; they are joined back here).
func (c *Client) Tail(ctx context.Context, id string, line func(string)) error {
	u, _ := url.Parse(c.Address + "/api/jobs/" + url.PathEscape(id) + "/logs/tail")
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second, Proxy: http.ProxyFromEnvironment}
	ws, resp, err := d.DialContext(ctx, u.String(), c.Header)
	if err != nil {
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			return &HTTPError{Method: "GET", Path: u.Path, Status: resp.StatusCode, Body: string(b)}
		}
		return fmt.Errorf("ray logs of %s: %w", id, err)
	}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { ws.Close() }) // unblocks ReadMessage
	defer stop()
	ws.SetReadLimit(-1)
	var partial strings.Builder
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if partial.Len() > 0 {
				line(partial.String())
			}
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseNoStatusReceived) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil
			}
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return nil
			}
			return fmt.Errorf("ray logs of %s: %w", id, err)
		}
		for len(msg) > 0 {
			i := bytes.IndexByte(msg, '\n')
			if i < 0 {
				partial.Write(msg)
				break
			}
			partial.Write(msg[:i])
			line(partial.String())
			partial.Reset()
			msg = msg[i+1:]
		}
	}
}

package eval

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/eval/rayjob"
)

// rayDriver is the job's driver: it runs each episode as a Ray task and reports on its stdout.
//
//go:embed ray_driver.py
var rayDriver []byte

// rayPrefix starts the driver's protocol lines (ray_driver.py's PREFIX).
const rayPrefix = "@pyrualean-ray "

// RayResources is what one episode's task asks the cluster for.
type RayResources struct {
	CPUs        float64 `json:"num_cpus"`
	MemoryBytes int64   `json:"memory"`
	GPUs        float64 `json:"num_gpus"`
}

// Ray runs a suite's episodes on a Ray cluster: one Ray job per eval run, submitted through the
// dashboard's Job Submission API, whose driver (ray_driver.py, shipped in the job's working_dir)
// runs each episode as a Ray task with resource requests. A task runs Command (the node's
// `pyrualean episode`, the same episode code as a local run) into a node-local folder and returns
// the run folder, which lands in j.Dir here: ids, folders, the manifest, resume and statistics are
// the local ones. Ray is both the suite's Engine (the cluster schedules; an episode's run starts
// when its task starts on a node) and its Executor (Execute waits for the attempt's outcome).
//
// Retries: a worker or node lost mid-episode is retried by Ray (max_retries: the attempts left);
// an outcome the runner retries is resubmitted by the driver, with the runner's rule and budget
// (setRetries), so every attempt the runner records is one the cluster ran, and an episode still
// has one run folder. Cancelling ctx stops the job.
type Ray struct {
	Client  *rayjob.Client
	Command []string // argv of the node's episode runner (default: pyrualean episode)
	Python  string   // the node's python with ray, for the driver (default: python)
	// Prepare gives the episode a node runs for a job and what its task asks for (default: the
	// job's episode, 1 CPU).
	Prepare func(Job) (Episode, RayResources)
	// Env are settings from this machine's environment that episodes read (never secrets: an API
	// key is read on the node from the variable its settings name).
	Env      map[string]string
	Logger   *slog.Logger
	OnSubmit func(submissionID string) // called once the job is submitted

	retries int
	backoff time.Duration

	mu        sync.Mutex
	eps       map[string]*rayEpisode
	ended     chan struct{} // closed when the job's output has been read to its end
	endErr    error         // why no more attempts come (the job ended, failed or was stopped)
	lastSeen  int           // the last protocol line handled (a reconnecting tail skips up to it)
	submitted time.Time     // when Run packed the job (the driver's times are logged against it)
	// unrecorded counts attempts that ended on the cluster and are not yet in the manifest; a new
	// episode's run starts once it is 0, as a local worker takes its next episode after recording.
	unrecorded int
	recordedCh chan struct{} // signalled at each record
}

type rayEpisode struct {
	job      Job
	started  bool
	attempts []rayAttempt // closed attempts not yet taken by Execute
	notify   chan struct{}
}

type rayAttempt struct {
	outcome Outcome
	files   []byte // the run folder, tar.gz; nil when the attempt brought none back
}

// rayMsg is one protocol line of the driver.
type rayMsg struct {
	N       int           `json:"n"`
	Kind    string        `json:"kind"`
	ID      string        `json:"id"`
	Attempt int           `json:"attempt"`
	Node    string        `json:"node"`
	PID     int           `json:"pid"`
	Status  string        `json:"status"`
	Error   string        `json:"error"`
	Outcome OutcomeRecord `json:"outcome"`
	Files   string        `json:"files"`
	Ray     string        `json:"ray"`
	CPUs    float64       `json:"cpus"`
	GPUs    float64       `json:"gpus"`
	Message string        `json:"message"`
	At      float64       `json:"at"` // the driver's clock when it printed the line (Unix seconds)
}

// OutcomeRecord is an Outcome as JSON: what `pyrualean episode` reports from a node.
type OutcomeRecord struct {
	Status   string  `json:"status"`
	Success  *bool   `json:"environment_success"`
	Error    string  `json:"error,omitempty"`
	WallS    float64 `json:"wall_s,omitempty"`
	InTok    int     `json:"input_tokens,omitempty"`
	LLMCalls int     `json:"llm_calls,omitempty"`
	CostUSD  float64 `json:"cost_usd,omitempty"`
	Node     string  `json:"node,omitempty"` // the Ray node id that ran the attempt (set by the driver)
}

// Record is o as JSON.
func (o Outcome) Record() OutcomeRecord {
	return OutcomeRecord{Status: o.Status, Success: o.Success, Error: errText(o.Err), WallS: o.WallS, InTok: o.InTok, LLMCalls: o.LLMCalls, CostUSD: o.CostUSD, Node: o.Node}
}

// Outcome is r back as an Outcome.
func (r OutcomeRecord) Outcome() Outcome {
	o := Outcome{Status: r.Status, Success: r.Success, WallS: r.WallS, InTok: r.InTok, LLMCalls: r.LLMCalls, CostUSD: r.CostUSD, Node: r.Node}
	if r.Error != "" {
		o.Err = errors.New(r.Error)
	}
	return o
}

// NodeJob is what a node's `pyrualean episode` runs: one episode into Dir, under the node-local
// eval folder Suite (a replayed tools episode finds its cells twin there).
type NodeJob struct {
	Episode Episode `json:"episode"`
	Dir     string  `json:"dir"`
	Suite   string  `json:"suite"`
}

func (r *Ray) Name() string { return "ray" }

// recorded is the runner saying an attempt is in the manifest.
func (r *Ray) recorded() {
	r.mu.Lock()
	if r.unrecorded > 0 {
		r.unrecorded--
	}
	r.mu.Unlock()
	select {
	case r.recordedCh <- struct{}{}:
	default:
	}
}

// awaitRecords waits (at most 10 s) until every attempt that ended is recorded.
func (r *Ray) awaitRecords() {
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		n := r.unrecorded
		r.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-r.recordedCh:
		case <-deadline:
			return
		}
	}
}

// setRetries takes the runner's retry rule, which the driver applies too.
func (r *Ray) setRetries(retries int, backoff time.Duration) { r.retries, r.backoff = retries, backoff }

// rayPlan is the driver's plan.json.
type rayPlan struct {
	Submission string            `json:"submission"`
	Command    []string          `json:"command"`
	Retries    int               `json:"retries"`
	BackoffS   float64           `json:"backoff_s"`
	Retryable  []string          `json:"retryable"`
	Env        map[string]string `json:"env"`
	Jobs       []rayPlanJob      `json:"jobs"`
}

type rayPlanJob struct {
	ID        string       `json:"id"`
	Twin      string       `json:"twin"`
	After     string       `json:"after,omitempty"`
	TwinFile  string       `json:"twin_file,omitempty"`
	Episode   Episode      `json:"episode"`
	Resources RayResources `json:"resources"`
}

// Package is the job's working_dir (a zip: the driver, plan.json, and the finished twins from an
// earlier run that replayed tools episodes read) and the job's spec. Nothing in either is secret.
func (r *Ray) Package(jobs []Job, submission string) ([]byte, rayjob.Spec, error) {
	cmd := r.Command
	if len(cmd) == 0 {
		cmd = []string{"pyrualean", "episode"}
	}
	py := r.Python
	if py == "" {
		py = "python"
	}
	plan := rayPlan{Submission: submission, Command: cmd, Retries: r.retries, BackoffS: r.backoff.Seconds(),
		Retryable: RetryableStatuses(), Env: r.Env}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte) error {
		w, err := zw.Create(name)
		if err == nil {
			_, err = w.Write(b)
		}
		return err
	}
	if err := add("ray_driver.py", rayDriver); err != nil {
		return nil, rayjob.Spec{}, err
	}
	inPlan := map[string]bool{}
	for _, j := range jobs {
		inPlan[j.ID] = true
	}
	for i, j := range jobs {
		ep, res := j.Episode, RayResources{CPUs: 1}
		if r.Prepare != nil {
			ep, res = r.Prepare(j)
		}
		pj := rayPlanJob{ID: j.ID, Twin: j.Twin(), After: j.After, Episode: ep, Resources: res}
		if j.After != "" && !inPlan[j.After] {
			// The twin finished in an earlier run: its result and primitive calls travel with the job.
			twin, err := packFiles(j.TwinDir(), "result.json", "calls.jsonl")
			if err != nil {
				return nil, rayjob.Spec{}, fmt.Errorf("%s: its cells twin: %w", j.ID, err)
			}
			pj.TwinFile = fmt.Sprintf("twins/%d.tar.gz", i)
			if err := add(pj.TwinFile, twin); err != nil {
				return nil, rayjob.Spec{}, err
			}
		}
		plan.Jobs = append(plan.Jobs, pj)
	}
	pb, err := json.MarshalIndent(plan, "", " ")
	if err != nil {
		return nil, rayjob.Spec{}, err
	}
	if err := add("plan.json", pb); err != nil {
		return nil, rayjob.Spec{}, err
	}
	if err := zw.Close(); err != nil {
		return nil, rayjob.Spec{}, err
	}
	spec := rayjob.Spec{Entrypoint: py + " ray_driver.py", SubmissionID: submission,
		Metadata: map[string]string{"pyrualean": "eval", "episodes": fmt.Sprint(len(jobs))}}
	return buf.Bytes(), spec, nil
}

// Run submits one job for the jobs and starts each job's run when its task starts on a node. It
// returns once every started run has returned and the job has ended (stopped, when ctx ends).
func (r *Ray) Run(ctx context.Context, jobs []Job, run func(ctx context.Context, j Job)) error {
	if len(jobs) == 0 {
		return ctx.Err()
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	r.mu.Lock()
	r.eps = map[string]*rayEpisode{}
	for _, j := range jobs {
		r.eps[j.ID] = &rayEpisode{job: j, notify: make(chan struct{}, 1)}
	}
	r.ended = make(chan struct{})
	r.recordedCh = make(chan struct{}, 1)
	r.mu.Unlock()
	var nonce [4]byte
	rand.Read(nonce[:])
	r.submitted = time.Now()
	submission := fmt.Sprintf("pyrualean-%s-%x", time.Now().UTC().Format("20060102-150405"), nonce)
	pkg, spec, err := r.Package(jobs, submission)
	if err == nil {
		var uri string
		if uri, err = r.Client.UploadPackage(ctx, pkg); err == nil {
			spec.RuntimeEnv = map[string]any{"working_dir": uri}
			_, err = r.Client.Submit(ctx, spec)
		}
	}
	if err != nil {
		r.finish(err)
		return fmt.Errorf("ray: submit: %w", err)
	}
	if r.OnSubmit != nil {
		r.OnSubmit(submission)
	}
	var wg sync.WaitGroup
	start := func(e *rayEpisode) { // under r.mu
		if e.started {
			return
		}
		e.started = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(ctx, e.job)
		}()
	}
	tailDone := make(chan error, 1)
	stopped := make(chan struct{}) // closed once a stopped job has ended (or was waited for in vain)
	go func() { tailDone <- r.follow(ctx, submission, start, stopped) }()
	var runErr error
	select {
	case runErr = <-tailDone:
	case <-ctx.Done():
		r.stop(submission)
		close(stopped)
		runErr = <-tailDone
	}
	wg.Wait()
	if len(jobs) > 0 {
		os.Remove(incomingDir(jobs[0])) // once empty (every landing is done): a local run has none
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return runErr
}

// stop stops the job and waits (bounded) for it to end, so its tasks are gone when eval exits.
func (r *Ray) stop(id string) {
	sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := r.Client.Stop(sctx, id); err != nil {
		r.Logger.Error("ray: stopping the job", "job", id, "err", err)
		return
	}
	if info, err := r.Client.Wait(sctx, id, 250*time.Millisecond); err != nil {
		r.Logger.Error("ray: the job did not end", "job", id, "status", info.Status, "err", err)
	}
}

// follow reads the job's output until the driver's last line, reconnecting (and skipping what it
// has read) when the dashboard drops the stream. When the job ends without that line (it failed or
// was stopped), every attempt still awaited ends interrupted, with the job's end as the error.
func (r *Ray) follow(ctx context.Context, id string, start func(*rayEpisode), stopped <-chan struct{}) error {
	var tail []string // the driver's last non-protocol lines, for the error of a failed job
	failures := 0
	for {
		seen := r.seen()
		tctx, stopTail := context.WithCancel(ctx)
		err := r.Client.Tail(tctx, id, func(line string) {
			msg, ok := strings.CutPrefix(line, rayPrefix)
			if !ok {
				r.Logger.Info("ray driver", "job", id, "line", line)
				if tail = append(tail, line); len(tail) > 20 {
					tail = tail[1:]
				}
				return
			}
			if r.handle(msg, start) {
				stopTail() // the driver's last line: no need to wait for the stream's end
			}
		})
		stopTail()
		switch {
		case ctx.Err() != nil:
			<-stopped
			r.catchUp(id, start)
			r.finish(fmt.Errorf("ray job %s stopped: %w", id, context.Cause(ctx)))
			return ctx.Err()
		case r.lastDone():
			// The driver is exiting: wait for the job to end, so none of it runs once eval returns.
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if info, err := r.Client.Wait(wctx, id, 100*time.Millisecond); err != nil {
				r.Logger.Warn("ray: the job has not ended after its driver's last line", "job", id, "status", info.Status, "err", err)
			}
			return nil
		}
		info, ierr := r.Client.Info(ctx, id)
		if err == nil && ierr == nil && rayjob.Terminal(info.Status) {
			endErr := fmt.Errorf("ray job %s %s: %s%s", id, info.Status, info.Message, tailText(tail))
			r.finish(endErr)
			return endErr
		}
		if r.seen() > seen {
			failures = 0 // it moved on: only a stream that keeps failing gives up
		}
		if err == nil {
			err = errOr(ierr, errors.New("the log stream closed while the job runs"))
		}
		if failures++; failures > 20 {
			err = fmt.Errorf("ray job %s: lost the cluster: %w", id, err)
			r.finish(err)
			return err
		}
		r.Logger.Warn("ray: following the job again", "job", id, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(min(failures, 5)) * time.Second):
		}
	}
}

// catchUp reads a stopped job's whole output once and handles the driver's lines the tail had not
// delivered (it runs about a second behind): an attempt that began on the cluster just before a
// Ctrl-C is then counted (it ends interrupted with the rest), and an episode that ended then lands
// its run folder instead of running again.
func (r *Ray) catchUp(id string, start func(*rayEpisode)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs, err := r.Client.Logs(ctx, id)
	if err != nil {
		r.Logger.Warn("ray: reading the stopped job's output; attempts it began in its last second may go uncounted", "job", id, "err", err)
		return
	}
	// Runs start once every line is in, so an attempt that ended gets its outcome, not the cut; no
	// start waits for the runner's records (awaitRecords): it only counts attempts now.
	var starts []*rayEpisode
	later := func(e *rayEpisode) { starts = append(starts, e) }
	r.mu.Lock()
	defer r.mu.Unlock()
	for line := range strings.Lines(logs) {
		msg, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), rayPrefix)
		var m rayMsg
		if ok && json.Unmarshal([]byte(msg), &m) == nil {
			r.applyLocked(m, len(msg), later)
		}
	}
	for _, e := range starts {
		start(e)
	}
}

func (r *Ray) seen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastSeen
}

func tailText(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return "\n  " + strings.Join(lines, "\n  ")
}

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// lastDone says whether the driver's "done" line was read.
func (r *Ray) lastDone() bool {
	select {
	case <-r.ended:
		return true
	default:
		return false
	}
}

// handle takes one protocol line; it says whether it was the driver's last.
func (r *Ray) handle(raw string, start func(*rayEpisode)) (last bool) {
	var m rayMsg
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		r.Logger.Error("ray: unreadable driver line", "err", err)
		return false
	}
	if m.Kind == "start" {
		r.awaitRecords()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applyLocked(m, len(raw), start)
}

// applyLocked takes one driver line into the episodes' state (under r.mu).
func (r *Ray) applyLocked(m rayMsg, size int, start func(*rayEpisode)) (last bool) {
	if m.N <= r.lastSeen {
		return false // read before the stream was reopened
	}
	r.lastSeen = m.N
	switch m.Kind {
	case "hello":
		// Where Ray's fixed cost goes: submission to the driver's first line, and that line's way back.
		r.Logger.Info("ray: driver started", "ray", m.Ray, "cpus", m.CPUs, "gpus", m.GPUs,
			"after_submit_s", agent.Round(m.At-unixSeconds(r.submitted), 3), "line_lag_s", agent.Round(unixSeconds(time.Now())-m.At, 3))
		return false
	case "warning":
		r.Logger.Error("ray: " + m.Message)
		return false
	}
	if m.Kind == "done" {
		r.finishLocked(errors.New("the ray job ended"))
		return true
	}
	e, ok := r.eps[m.ID]
	if !ok {
		r.Logger.Error("ray: a line about an episode not in the job", "id", m.ID, "kind", m.Kind)
		return false
	}
	switch m.Kind {
	case "start":
		r.Logger.Info("ray: episode started", "id", m.ID, "attempt", m.Attempt, "node", m.Node, "pid", m.PID,
			"after_submit_s", agent.Round(m.At-unixSeconds(r.submitted), 3))
		start(e)
		return false
	case "end":
		r.Logger.Info("ray: episode ended", "id", m.ID, "attempt", m.Attempt, "status", m.Outcome.Status,
			"after_submit_s", agent.Round(m.At-unixSeconds(r.submitted), 3), "line_lag_s", agent.Round(unixSeconds(time.Now())-m.At, 3), "line_bytes", size)
		a := rayAttempt{outcome: m.Outcome.Outcome()}
		if m.Files != "" {
			b, err := base64.StdEncoding.DecodeString(m.Files)
			if err != nil {
				a.outcome = Outcome{Status: agent.StatusInterrupted, Err: fmt.Errorf("ray: the run folder came back unreadable: %w", err)}
			}
			a.files = b
		}
		e.attempts = append(e.attempts, a)
		r.unrecorded++
	case "lost":
		e.attempts = append(e.attempts, rayAttempt{outcome: Outcome{Status: m.Status, Err: errors.New(m.Error)}})
		r.unrecorded++
		start(e) // an attempt that never began still ends in the manifest
	default:
		return false
	}
	select {
	case e.notify <- struct{}{}:
	default:
	}
	return false
}

func (r *Ray) finish(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finishLocked(err)
}

func (r *Ray) finishLocked(err error) {
	select {
	case <-r.ended:
	default:
		r.endErr = err
		close(r.ended)
	}
}

// Execute waits for the job's next attempt at j and lands its run folder in j.Dir.
func (r *Ray) Execute(ctx context.Context, j Job) Outcome {
	r.mu.Lock()
	e, ok := r.eps[j.ID]
	r.mu.Unlock()
	if !ok {
		return Outcome{Status: agent.StatusInterrupted, Err: fmt.Errorf("ray: %s is not in the job", j.ID)}
	}
	for {
		r.mu.Lock()
		if len(e.attempts) > 0 {
			a := e.attempts[0]
			e.attempts = e.attempts[1:]
			r.mu.Unlock()
			if a.files != nil {
				if err := landRunFolder(a.files, j); err != nil {
					return Outcome{Status: agent.StatusInterrupted, Err: fmt.Errorf("ray: the run folder: %w", err)}
				}
			}
			return a.outcome
		}
		ended := r.ended
		r.mu.Unlock()
		select {
		case <-e.notify:
		case <-ended:
			r.mu.Lock()
			more, endErr := len(e.attempts) > 0, r.endErr
			r.mu.Unlock()
			if !more {
				return Outcome{Status: agent.StatusInterrupted, Err: endErr}
			}
		case <-ctx.Done():
			return Outcome{Status: agent.StatusInterrupted, Err: context.Cause(ctx)}
		}
	}
}

// landRunFolder unpacks a run folder into j.Dir: first beside the episodes (same file system),
// then renamed into place, so a killed eval never leaves half a run folder under episodes/. Only
// files and folders are taken, none outside the folder.
func landRunFolder(tgz []byte, j Job) error {
	incoming := incomingDir(j)
	if err := os.MkdirAll(incoming, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(incoming, "run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := untar(tgz, tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(j.Dir), 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, j.Dir)
}

// incomingDir is where run folders are unpacked before they move into place: in the eval folder,
// outside episodes/ (no reader takes a half-unpacked folder for a run).
func incomingDir(j Job) string {
	return filepath.Join(strings.TrimSuffix(j.Dir, filepath.Join("episodes", filepath.FromSlash(j.ID))), ".incoming")
}

func untar(tgz []byte, dir string) error {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if name == "." {
			continue
		}
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%q: outside the run folder", h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// packFiles packs the named files of dir (those that exist) as a tar.gz, as the driver packs.
func packFiles(dir string, names ...string) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	n := 0
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg, ModTime: time.Now()}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no %s", dir, strings.Join(names, ", "))
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

package eval

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
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
	"sync/atomic"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/eval/rayjob"
	"github.com/pyrualean/pyrualean/eval/rayservice"
)

// RayResources is what one episode's task asks the cluster for.
type RayResources struct {
	CPUs        float64 `json:"num_cpus"`
	MemoryBytes int64   `json:"memory"`
	GPUs        float64 `json:"num_gpus"`
}

// Ray runs a suite's episodes on a Ray cluster: eval hands the suite to pyrualean's long-lived
// service job there (rayservice: started once per cluster and version, with a warm Ray worker per
// CPU), which runs each episode as a Ray task with resource requests and streams protocol lines
// back. A task runs Command (the node's `pyrualean episode`, the same episode code as a local run)
// into a node-local folder and returns the run folder, which lands in j.Dir here: ids, folders,
// the manifest, resume and statistics are the local ones. Ray is both the suite's Engine (the
// cluster schedules; an episode's run starts when its task starts on a node) and its Executor
// (Execute waits for the attempt's outcome).
//
// Retries: a worker or node lost mid-episode is retried by Ray (max_retries: the attempts left);
// an outcome the runner retries is resubmitted by the service, with the runner's rule and budget
// (setRetries), so every attempt the runner records is one the cluster ran, and an episode still
// has one run folder. Cancelling ctx cancels the suite: its running attempts end interrupted.
type Ray struct {
	Client  *rayjob.Client
	Command []string // argv of the node's episode runner (default: pyrualean episode)
	Service rayservice.Options
	// Owner names who runs the suite (an eval folder on a machine): the service cancels an older
	// suite of the same owner when a new one comes (the same eval run again after a kill -9).
	Owner string
	// Prepare gives the episode a node runs for a job and what its task asks for (default: the
	// job's episode, 1 CPU).
	Prepare func(Job) (Episode, RayResources)
	// Env are settings from this machine's environment that episodes read (never secrets: an API
	// key is read on the node from the variable its settings name).
	Env      map[string]string
	Logger   *slog.Logger
	OnSubmit func(suite string, svc *rayservice.Service) // called once the suite is submitted

	retries int
	backoff time.Duration

	mu        sync.Mutex
	eps       map[string]*rayEpisode
	ended     chan struct{} // closed when the suite's lines have been read to its end
	endErr    error         // why no more attempts come (the suite ended, failed or was cancelled)
	lastSeen  int           // the last protocol line handled (a reconnecting stream starts after it)
	submitted time.Time     // when Run packed the suite (the service's times are logged against it)
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

// rayMsg is one protocol line of the suite (ray_driver.py).
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
	At      float64       `json:"at"` // the service's clock when it wrote the line (Unix seconds)
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
	Node     string  `json:"node,omitempty"` // the Ray node id that ran the attempt (set by the service)
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

// setRetries takes the runner's retry rule, which the service applies too.
func (r *Ray) setRetries(retries int, backoff time.Duration) { r.retries, r.backoff = retries, backoff }

// rayPlan is the suite's plan.json (ray_driver.py's Plan).
type rayPlan struct {
	Submission string            `json:"submission"`
	Owner      string            `json:"owner,omitempty"`
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

// Package is the suite's package for the service (a zip: plan.json, and the finished twins from an
// earlier run that replayed tools episodes read). Nothing in it is secret.
func (r *Ray) Package(jobs []Job, submission string) ([]byte, error) {
	cmd := r.Command
	if len(cmd) == 0 {
		cmd = []string{"pyrualean", "episode"}
	}
	plan := rayPlan{Submission: submission, Owner: r.Owner, Command: cmd, Retries: r.retries, BackoffS: r.backoff.Seconds(),
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
			// The twin finished in an earlier run: its result and primitive calls travel with the suite.
			twin, err := packFiles(j.TwinDir(), "result.json", "calls.jsonl")
			if err != nil {
				return nil, fmt.Errorf("%s: its cells twin: %w", j.ID, err)
			}
			pj.TwinFile = fmt.Sprintf("twins/%d.tar.gz", i)
			if err := add(pj.TwinFile, twin); err != nil {
				return nil, err
			}
		}
		plan.Jobs = append(plan.Jobs, pj)
	}
	pb, err := json.MarshalIndent(plan, "", " ")
	if err != nil {
		return nil, err
	}
	if err := add("plan.json", pb); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Run hands the jobs to the cluster's service as one suite and starts each job's run when its task
// starts on a node. It returns once every started run has returned and the suite has ended
// (cancelled, when ctx ends).
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
	suite := fmt.Sprintf("pyrualean-%s-%x", time.Now().UTC().Format("20060102-150405"), nonce)
	o := r.Service
	if o.Logger == nil {
		o.Logger = r.Logger
	}
	svc, err := rayservice.Ensure(ctx, r.Client, o)
	if err == nil {
		var pkg []byte
		if pkg, err = r.Package(jobs, suite); err == nil {
			err = svc.Submit(ctx, pkg)
		}
	}
	if err != nil {
		r.finish(err)
		return fmt.Errorf("ray: submit: %w", err)
	}
	r.Logger.Info("ray: suite submitted", "suite", suite, "service", svc.Job, "after_start_s", agent.Round(time.Since(r.submitted).Seconds(), 3))
	if r.OnSubmit != nil {
		r.OnSubmit(suite, svc)
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
	runErr := r.follow(ctx, svc, suite, start)
	wg.Wait()
	if len(jobs) > 0 {
		os.Remove(incomingDir(jobs[0])) // once empty (every landing is done): a local run has none
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return runErr
}

// follow reads the suite's lines until its last, reconnecting from the last line read when the
// stream drops. When ctx ends it cancels the suite and reads on (bounded) until the service has
// ended every running attempt. When the service is gone, every attempt still awaited ends
// interrupted, with that as the error.
func (r *Ray) follow(ctx context.Context, svc *rayservice.Service, suite string, start func(*rayEpisode)) error {
	readCtx, stopReading := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReading()
	var cancelled atomic.Bool // set by the AfterFunc's goroutine
	cancel := func() {
		cancelled.Store(true)
		cctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
		defer stop()
		if err := svc.Cancel(cctx, suite); err != nil {
			r.Logger.Error("ray: cancelling the suite", "suite", suite, "err", err)
		}
		// The service ends the cancelled attempts within seconds; past a minute, stop waiting.
		time.AfterFunc(60*time.Second, stopReading)
	}
	stopWatch := context.AfterFunc(ctx, cancel)
	defer stopWatch()
	failures := 0
	for {
		seen := r.seen()
		err := svc.Follow(readCtx, suite, seen, func(raw []byte) {
			n, kind := r.handle(raw, start)
			if kind == "end" || kind == "lost" {
				actx, stop := context.WithTimeout(readCtx, 10*time.Second)
				if err := svc.Ack(actx, suite, n); err != nil {
					r.Logger.Warn("ray: acknowledging lines", "suite", suite, "err", err)
				}
				stop()
			}
		})
		if r.lastDone() {
			if ctx.Err() != nil || cancelled.Load() {
				return context.Cause(ctx)
			}
			return nil
		}
		if readCtx.Err() != nil {
			err = fmt.Errorf("ray suite %s: the service did not end it within a minute of the cancel", suite)
			r.finish(err)
			return err
		}
		if r.seen() > seen {
			failures = 0 // it moved on: only a stream that keeps failing gives up
		}
		if err == nil {
			err = errors.New("the stream ended before the suite's last line")
		}
		if info, ierr := r.Client.Info(readCtx, svc.Job); ierr == nil && rayjob.Terminal(info.Status) {
			err = fmt.Errorf("ray service %s %s: %s (the next eval starts a new one)", svc.Job, info.Status, info.Message)
			r.finish(err)
			return err
		}
		if failures++; failures > 20 {
			err = fmt.Errorf("ray suite %s: lost the service: %w", suite, err)
			r.finish(err)
			return err
		}
		r.Logger.Warn("ray: following the suite again", "suite", suite, "err", err)
		select {
		case <-readCtx.Done():
		case <-time.After(time.Duration(min(failures, 5)) * time.Second):
		}
	}
}

func (r *Ray) seen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastSeen
}

// lastDone says whether the suite's "done" line was read.
func (r *Ray) lastDone() bool {
	select {
	case <-r.ended:
		return true
	default:
		return false
	}
}

// handle takes one protocol line; it returns the line's number and kind.
func (r *Ray) handle(raw []byte, start func(*rayEpisode)) (n int, kind string) {
	var m rayMsg
	if err := json.Unmarshal(raw, &m); err != nil {
		r.Logger.Error("ray: unreadable line from the service", "err", err)
		return 0, ""
	}
	if m.Kind == "start" {
		r.awaitRecords()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applyLocked(m, len(raw), start)
	return m.N, m.Kind
}

// applyLocked takes one line into the episodes' state (under r.mu).
func (r *Ray) applyLocked(m rayMsg, size int, start func(*rayEpisode)) {
	if m.N <= r.lastSeen {
		return // read before the stream was reopened
	}
	r.lastSeen = m.N
	switch m.Kind {
	case "hello":
		// Where Ray's fixed cost goes: eval's start to the suite's first line, and that line's way back.
		r.Logger.Info("ray: suite started", "ray", m.Ray, "cpus", m.CPUs, "gpus", m.GPUs,
			"after_submit_s", agent.Round(m.At-unixSeconds(r.submitted), 3), "line_lag_s", agent.Round(unixSeconds(time.Now())-m.At, 3))
		return
	case "warning":
		r.Logger.Error("ray: " + m.Message)
		return
	}
	if m.Kind == "done" {
		r.finishLocked(errors.New("the ray suite ended"))
		return
	}
	e, ok := r.eps[m.ID]
	if !ok {
		r.Logger.Error("ray: a line about an episode not in the suite", "id", m.ID, "kind", m.Kind)
		return
	}
	switch m.Kind {
	case "start":
		r.Logger.Info("ray: episode started", "id", m.ID, "attempt", m.Attempt, "node", m.Node, "pid", m.PID,
			"after_submit_s", agent.Round(m.At-unixSeconds(r.submitted), 3))
		start(e)
		return
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
		return
	}
	select {
	case e.notify <- struct{}{}:
	default:
	}
	return
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

// Execute waits for the suite's next attempt at j and lands its run folder in j.Dir.
func (r *Ray) Execute(ctx context.Context, j Job) Outcome {
	r.mu.Lock()
	e, ok := r.eps[j.ID]
	r.mu.Unlock()
	if !ok {
		return Outcome{Status: agent.StatusInterrupted, Err: fmt.Errorf("ray: %s is not in the suite", j.ID)}
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

// packFiles packs the named files of dir (those that exist) as a tar.gz, as ray_driver.py packs.
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

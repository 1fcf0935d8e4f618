package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runs"
)

// EvalEnv is set in every kernel a suite starts (the eval folder), so a later run can tell an
// orphaned kernel of this suite from any other process before ending it.
const EvalEnv = "PYRUALEAN_SUITE"

// Outcome is how one attempt ended.
type Outcome struct {
	Status   string // the agent's result status (completed, error, boot_error, ...)
	Success  *bool
	Err      error
	WallS    float64
	InTok    int
	LLMCalls int
	CostUSD  float64
	Node     string // the Ray node that ran it ("" locally)
}

// Executor runs one episode into j.Dir (which does not exist yet) and reports how it ended. It must
// leave a result.json there, whatever happened.
type Executor interface {
	Execute(ctx context.Context, j Job) Outcome
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, j Job) Outcome

func (f ExecutorFunc) Execute(ctx context.Context, j Job) Outcome { return f(ctx, j) }

// RetryableStatuses are the states in which an episode runs (again) when the suite runs: never
// started, cut short, or failed before the policy could act. Everything else is an outcome and is
// kept. (A cluster engine's driver gets this list, so both sides apply one rule.)
func RetryableStatuses() []string {
	return []string{"", StatePending, StateRunning, agent.StatusInterrupted, agent.StatusBootError, agent.StatusPlannerError}
}

// Retryable says whether an episode in this state runs (again): see RetryableStatuses.
func Retryable(status string) bool { return slices.Contains(RetryableStatuses(), status) }

// retryAware is an engine that retries too (a cluster's driver resubmits an episode): it gets the
// runner's rule before the run.
type retryAware interface {
	setRetries(retries int, backoff time.Duration)
}

// recordAware is an engine told when an attempt is recorded (a cluster engine holds the next
// episode's start until the one that ended is counted, so the live view's running count stays true).
type recordAware interface{ recorded() }

// Runner runs a suite into a folder: plan, resume, schedule, record.
type Runner struct {
	Dir      string // eval folder
	Engine   Engine
	Exec     Executor
	Retries  int           // further attempts of a retryable outcome in one run (default 2; <0: none)
	Backoff  time.Duration // wait before the first retry (default 2 s), doubling
	Versions map[string]string
	Events   func(Event)      // called from many goroutines, one call at a time
	OnPlan   func(jobs []Job) // called once with the episodes this run will run, before any starts
	Logger   *slog.Logger

	mf      *manifestFile
	evMu    sync.Mutex
	total   int
	done    int
	running int
}

// Run runs every episode not finished in an earlier run and returns the manifest. The error is for
// the suite itself (its folder, a cancelled context); episodes that fail are outcomes, not errors.
func (r *Runner) Run(ctx context.Context, m Matrix, eps []Episode) (*Manifest, error) {
	if r.Retries == 0 {
		r.Retries = 2
	}
	if r.Backoff <= 0 {
		r.Backoff = 2 * time.Second
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	abs, err := filepath.Abs(r.Dir)
	if err != nil {
		return nil, err
	}
	r.Dir = abs
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return nil, err
	}
	man, err := ReadManifest(r.Dir)
	if errors.Is(err, os.ErrNotExist) {
		man = &Manifest{Schema: ManifestSchema, CreatedAt: time.Now().UTC().Format(time.RFC3339), Episodes: map[string]*EpisodeState{}}
	} else if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	if o := man.Runner; o.EndedAt == "" && o.PID != os.Getpid() && o.Host == host && pidAlive(o.PID) {
		return nil, fmt.Errorf("%s: the suite is being run by pid %d (since %s); see eval --status", r.Dir, o.PID, o.StartedAt)
	}
	r.mf = &manifestFile{dir: r.Dir, m: man}
	var jobs []Job
	err = r.mf.update(func(m2 *Manifest) {
		m2.Matrix = mergeMatrix(m2.Matrix, m)
		m2.Versions = r.Versions
		m2.Runner = RunnerInfo{PID: os.Getpid(), Host: host, Engine: r.Engine.Name(), StartedAt: time.Now().UTC().Format(time.RFC3339)}
		if l, ok := r.Engine.(Local); ok {
			m2.Runner.Jobs = l.Jobs
		}
		for _, e := range eps {
			st, ok := m2.Episodes[e.ID]
			if !ok {
				st = &EpisodeState{Status: StatePending}
				m2.Episodes[e.ID] = st
				m2.Order = append(m2.Order, e.ID)
			}
			st.Episode, st.Dir = e, filepath.ToSlash(filepath.Join("episodes", e.ID))
			// The run folder is the truth: an episode that finished after the manifest was last
			// written (kill -9 between the two) is still counted once, as finished.
			if row, err := runs.LoadRun(e.Dir(r.Dir)); err == nil {
				st.Status, st.Success = row.Status, row.OK
			}
			if !Retryable(st.Status) {
				continue
			}
			j := Job{Episode: e, Dir: e.Dir(r.Dir)}
			if e.Runtime == "replay" && e.Arm == "tools" {
				j.After = e.Twin()
			}
			jobs = append(jobs, j)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	r.total = len(eps)
	r.done = len(eps) - len(jobs)
	r.emit(Event{Kind: EventSuiteStart})
	queued := map[string]bool{}
	for _, j := range jobs {
		queued[j.ID] = true
	}
	for _, e := range eps {
		if !queued[e.ID] {
			st := r.mf.state(e.ID)
			r.emit(Event{Kind: EventSkip, ID: e.ID, Arm: e.Arm, Status: st.Status, Success: st.Success})
		}
	}
	if r.OnPlan != nil {
		r.OnPlan(jobs)
	}
	if ra, ok := r.Engine.(retryAware); ok {
		ra.setRetries(r.Retries, r.Backoff)
	}
	runErr := r.Engine.Run(ctx, jobs, r.runJob)
	_ = r.mf.update(func(m2 *Manifest) { m2.Runner.EndedAt = time.Now().UTC().Format(time.RFC3339) })
	r.emit(Event{Kind: EventSuiteEnd})
	out := *r.mf.m
	return &out, runErr
}

// mergeMatrix keeps the rows of earlier runs and adds this run's new ones.
func mergeMatrix(old, cur Matrix) Matrix {
	if cur.Name == "" {
		cur.Name = old.Name
	}
	seen := map[string]bool{}
	var rows []Row
	for _, r := range append(old.Rows, cur.Rows...) {
		b, _ := json.Marshal(r)
		if !seen[string(b)] {
			seen[string(b)] = true
			rows = append(rows, r)
		}
	}
	cur.Rows = rows
	return cur
}

// runJob runs one episode with bounded retries and records every attempt in the manifest.
func (r *Runner) runJob(ctx context.Context, j Job) {
	wait := r.Backoff
	for attempt := 1; ; attempt++ {
		if err := r.clearDir(j); err != nil {
			r.record(j, Outcome{Status: agent.StatusBootError, Err: err}, true)
			return
		}
		r.mf.update(func(m *Manifest) {
			st := m.Episodes[j.ID]
			st.Status, st.Attempts, st.Error, st.Success = StateRunning, st.Attempts+1, "", nil
			st.StartedAt, st.FinishedAt = time.Now().UTC().Format(time.RFC3339), ""
		})
		r.evMu.Lock()
		r.running++
		r.evMu.Unlock()
		r.emit(Event{Kind: EventStart, ID: j.ID, Arm: j.Arm, Attempt: attempt})
		out := r.Exec.Execute(ctx, j)
		if out.Status == "" {
			out.Status = agent.StatusError
		}
		last := !Retryable(out.Status) || attempt > r.Retries || ctx.Err() != nil
		r.record(j, out, last)
		if last {
			return
		}
		r.emit(Event{Kind: EventRetry, ID: j.ID, Arm: j.Arm, Attempt: attempt, Status: out.Status, Error: errText(out.Err), Backoff: wait.Seconds()})
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		wait *= 2
	}
}

func (r *Runner) record(j Job, out Outcome, last bool) {
	r.mf.update(func(m *Manifest) {
		st := m.Episodes[j.ID]
		st.Status, st.Success, st.Error = out.Status, out.Success, errText(out.Err)
		st.FinishedAt = time.Now().UTC().Format(time.RFC3339)
		st.WallS, st.InTok, st.LLMCalls, st.CostUSD, st.Node = out.WallS, out.InTok, out.LLMCalls, out.CostUSD, out.Node
	})
	r.evMu.Lock()
	if r.running > 0 {
		r.running--
	}
	if last {
		r.done++
	}
	r.evMu.Unlock()
	if last {
		r.emit(Event{Kind: EventFinish, ID: j.ID, Arm: j.Arm, Status: out.Status, Success: out.Success, Error: errText(out.Err),
			WallS: out.WallS, InTok: out.InTok, LLMCalls: out.LLMCalls, CostUSD: out.CostUSD})
	}
	if ra, ok := r.Engine.(recordAware); ok {
		ra.recorded()
	}
}

// clearDir moves an earlier, unfinished attempt out of episodes/ (into attempts/ID/N), so each
// episode has one run folder and summaries count it once; its orphaned kernel, if any, is ended.
func (r *Runner) clearDir(j Job) error {
	if _, err := os.Stat(j.Dir); errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(filepath.Dir(j.Dir), 0o755)
	}
	r.reapKernel(j.Dir)
	base := filepath.Join(r.Dir, "attempts", filepath.FromSlash(j.ID))
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	for n := 1; ; n++ {
		dst := filepath.Join(base, strconv.Itoa(n))
		if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
			return os.Rename(j.Dir, dst)
		}
	}
}

// reapKernel ends the kernel of a dead runner's attempt, after checking (OwnedKernel) that the pid
// still is that kernel.
func (r *Runner) reapKernel(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		return
	}
	var res struct {
		KernelPID int `json:"kernel_pid"`
	}
	if json.Unmarshal(b, &res) != nil || res.KernelPID <= 0 {
		return
	}
	if OwnedKernel(res.KernelPID, r.Dir, dir) {
		_ = syscall.Kill(-res.KernelPID, syscall.SIGKILL)
	}
}

// OwnedKernel says whether pid is a kernel the suite in suiteDir started for the run folder runDir:
// its environment names the suite, or it runs in the run folder (a sandboxed kernel's bwrap, whose
// environment reads back empty once it has entered its namespaces). A recycled pid matches neither.
func OwnedKernel(pid int, suiteDir, runDir string) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+EvalEnv+"="+suiteDir+"\x00")) {
		return true
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	rel, rerr := filepath.Rel(runDir, cwd)
	return err == nil && rerr == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func (r *Runner) emit(ev Event) {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	ev.Time = time.Now()
	ev.Total, ev.Done, ev.Running = r.total, r.done, r.running
	if r.Events != nil {
		r.Events(ev)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

package eval

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/eval/rayjob"
	"github.com/pyrualean/pyrualean/spec"
)

func tgz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func replayJob(dir, task, arm string) Job {
	e := Episode{Robot: "tabletop", Task: task, Seed: 0, Arm: arm, Runtime: "replay", Solution: "robotapi/solutions/tabletop/" + task + ".py"}
	e.ID = e.makeID()
	j := Job{Episode: e, Dir: e.Dir(dir)}
	if arm == spec.ArmTools {
		j.After = e.Twin()
	}
	return j
}

// TestRayPackage: the job's working_dir holds the driver, the plan (episodes as the node runs them,
// resources, the runner's retry rule, the forwarded settings) and a twin finished in an earlier
// run; no secret of this environment is anywhere in it or in the job's spec.
func TestRayPackage(t *testing.T) {
	secret := "sk-secret-" + fmt.Sprint(time.Now().UnixNano())
	t.Setenv("OPENAI_API_KEY", secret)
	dir := t.TempDir()
	cellsDone := replayJob(dir, "stack_blocks", spec.ArmCells)
	os.MkdirAll(cellsDone.Dir, 0o755)
	os.WriteFile(filepath.Join(cellsDone.Dir, "result.json"), []byte(`{"status":"completed"}`), 0o644)
	os.WriteFile(filepath.Join(cellsDone.Dir, "calls.jsonl"), []byte(`{"tool":"open_gripper"}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(cellsDone.Dir, "trace.ipynb"), []byte(`{}`), 0o644) // not needed by the twin
	jobs := []Job{replayJob(dir, "stack_blocks", spec.ArmTools), replayJob(dir, "open_drawer", spec.ArmCells), replayJob(dir, "open_drawer", spec.ArmTools)}
	jobs[1].Settings = map[string]string{"cuda-device": "1", "api-key-env": "MY_KEY"}
	r := &Ray{Command: []string{"/opt/pyrualean/bin/pyrualean", "episode"}, Env: map[string]string{"OPENAI_BASE_URL": "http://gpu-box:30000/v1"},
		Prepare: func(j Job) (Episode, RayResources) {
			ep := j.Episode
			if ep.Settings["cuda-device"] != "" {
				ep.Settings = map[string]string{"api-key-env": "MY_KEY"}
				return ep, RayResources{CPUs: 1, MemoryBytes: 1 << 30, GPUs: 1}
			}
			return ep, RayResources{CPUs: 1, MemoryBytes: 1 << 30}
		}}
	r.setRetries(2, 1500*time.Millisecond)
	pkg, rspec, err := r.Package(jobs, "pyrualean-test")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(pkg), int64(len(pkg)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		files[f.Name], _ = io.ReadAll(rc)
		rc.Close()
		if bytes.Contains(files[f.Name], []byte(secret)) {
			t.Errorf("%s holds the secret", f.Name)
		}
	}
	if b, _ := json.Marshal(rspec); bytes.Contains(b, []byte(secret)) || rspec.Entrypoint != "python ray_driver.py" || rspec.SubmissionID != "pyrualean-test" {
		t.Errorf("spec %s", b)
	}
	if !bytes.Equal(files["ray_driver.py"], rayDriver) {
		t.Error("the driver is not in the package")
	}
	var plan rayPlan
	if err := json.Unmarshal(files["plan.json"], &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Retries != 2 || plan.BackoffS != 1.5 || len(plan.Retryable) != len(RetryableStatuses()) || plan.Env["OPENAI_BASE_URL"] == "" ||
		plan.Command[0] != "/opt/pyrualean/bin/pyrualean" || len(plan.Jobs) != 3 {
		t.Fatalf("plan %+v", plan)
	}
	// The first tools episode's twin finished earlier: it travels; the second's runs in this job.
	if plan.Jobs[0].TwinFile == "" || plan.Jobs[0].After != cellsDone.ID || plan.Jobs[2].TwinFile != "" || plan.Jobs[2].After != jobs[1].ID {
		t.Errorf("twins: %+v / %+v", plan.Jobs[0], plan.Jobs[2])
	}
	if g := plan.Jobs[1]; g.Resources.GPUs != 1 || g.Episode.Settings["cuda-device"] != "" || g.Episode.ID != jobs[1].ID {
		t.Errorf("GPU episode: %+v", g)
	}
	twin := t.TempDir()
	if err := untar(files[plan.Jobs[0].TwinFile], twin); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(twin)
	if len(entries) != 2 {
		t.Errorf("twin files %v, want result.json and calls.jsonl", entries)
	}
	// A tools episode whose twin never ran cannot be packed.
	lone := replayJob(t.TempDir(), "open_drawer", spec.ArmTools)
	if _, _, err := r.Package([]Job{lone}, "x"); err == nil {
		t.Error("packed a tools episode without its twin")
	}
}

// TestRayProtocol: the driver's lines become the runner's attempts in order: a worker lost and
// retried by Ray is an interrupted attempt, then the retry's outcome lands its run folder; a line
// read twice (a reopened stream) counts once; once the job ends, an awaited attempt ends interrupted.
func TestRayProtocol(t *testing.T) {
	dir := t.TempDir()
	a, b := replayJob(dir, "stack_blocks", spec.ArmCells), replayJob(dir, "open_drawer", spec.ArmCells)
	r := &Ray{eps: map[string]*rayEpisode{}, ended: make(chan struct{}), recordedCh: make(chan struct{}, 1)}
	r.Logger = nilLogger()
	for _, j := range []Job{a, b} {
		r.eps[j.ID] = &rayEpisode{job: j, notify: make(chan struct{}, 1)}
	}
	started := map[string]int{}
	start := func(e *rayEpisode) {
		if !e.started {
			e.started = true
			started[e.job.ID]++
		}
	}
	files := base64.StdEncoding.EncodeToString(tgz(t, map[string]string{"result.json": `{"status":"completed"}`, "workspace/x.py": "1"}))
	line := func(v map[string]any) string { b, _ := json.Marshal(v); return string(b) }
	ok := true
	for _, l := range []string{
		line(map[string]any{"n": 1, "kind": "hello", "ray": "2.60.0"}),
		line(map[string]any{"n": 2, "kind": "start", "id": a.ID, "attempt": 1}),
		line(map[string]any{"n": 3, "kind": "lost", "id": a.ID, "attempt": 1, "status": "interrupted", "error": "worker died"}),
	} {
		r.handle(l, start)
	}
	if started[a.ID] != 1 || started[b.ID] != 0 {
		t.Fatalf("runs started %v", started)
	}
	ctx := context.Background()
	if out := r.Execute(ctx, a); out.Status != agent.StatusInterrupted || out.Err == nil || !strings.Contains(out.Err.Error(), "worker died") {
		t.Errorf("first attempt %+v", out)
	}
	// The next start waits until the runner has recorded the lost attempt.
	next := make(chan struct{})
	go func() {
		r.handle(line(map[string]any{"n": 4, "kind": "start", "id": a.ID, "attempt": 2}), start)
		close(next)
	}()
	select {
	case <-next:
		t.Fatal("a start was taken before the attempt that ended was recorded")
	case <-time.After(200 * time.Millisecond):
	}
	r.recorded()
	<-next
	for _, l := range []string{
		line(map[string]any{"n": 5, "kind": "end", "id": a.ID, "attempt": 2, "outcome": map[string]any{"status": "completed", "environment_success": ok, "wall_s": 1.5}, "files": files}),
		line(map[string]any{"n": 5, "kind": "end", "id": a.ID, "attempt": 2, "outcome": map[string]any{"status": "completed"}, "files": files}),
	} {
		r.handle(l, start)
	}
	if started[a.ID] != 1 || started[b.ID] != 0 {
		t.Fatalf("runs started %v", started)
	}
	if _, err := os.Stat(a.Dir); err == nil {
		t.Error("a lost attempt left a run folder")
	}
	out := r.Execute(ctx, a)
	if out.Status != agent.StatusCompleted || out.Success == nil || !*out.Success || out.WallS != 1.5 {
		t.Errorf("second attempt %+v", out)
	}
	if body, err := os.ReadFile(filepath.Join(a.Dir, "workspace", "x.py")); err != nil || string(body) != "1" {
		t.Errorf("run folder: %q %v", body, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".incoming")); err != nil {
		t.Errorf("landing folder: %v", err)
	}
	// The job ends: b, never run, waits no more.
	done := make(chan Outcome, 1)
	go func() { done <- r.Execute(ctx, b) }()
	r.handle(line(map[string]any{"n": 6, "kind": "done"}), start)
	select {
	case out := <-done:
		if out.Status != agent.StatusInterrupted || out.Err == nil {
			t.Errorf("after the end: %+v", out)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Execute still waits after the job ended")
	}
	// Cancelled: no wait either.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	r2 := &Ray{eps: map[string]*rayEpisode{b.ID: {job: b, notify: make(chan struct{}, 1)}}, ended: make(chan struct{})}
	if out := r2.Execute(cctx, b); out.Status != agent.StatusInterrupted || !errors.Is(out.Err, context.Canceled) {
		t.Errorf("cancelled: %+v", out)
	}
}

// TestUntarStaysInside: a run folder that names a path outside itself is refused; links are skipped.
func TestUntarStaysInside(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "run")
	if err := untar(tgz(t, map[string]string{"../evil": "x"}), dir); err == nil {
		t.Error("unpacked ../evil")
	}
	if _, err := os.Stat(filepath.Join(base, "evil")); err == nil {
		t.Error("wrote outside the folder")
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"})
	tw.Close()
	zw.Close()
	if err := untar(buf.Bytes(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "link")); err == nil {
		t.Error("a link was unpacked")
	}
}

func nilLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestRayCatchUpAfterStop: Ctrl-C while the dashboard's log tail runs behind the driver (about a
// second). The job is stopped, then its whole output is read once: an attempt that began on the
// cluster in that last second is counted (it ends interrupted), and one that ended then lands its
// run folder with its outcome instead of running again.
func TestRayCatchUpAfterStop(t *testing.T) {
	dir := t.TempDir()
	a, b := replayJob(dir, "stack_blocks", spec.ArmCells), replayJob(dir, "open_drawer", spec.ArmCells)
	files := base64.StdEncoding.EncodeToString(tgz(t, map[string]string{"result.json": `{"status":"completed"}`}))
	line := func(v map[string]any) string { b, _ := json.Marshal(v); return rayPrefix + string(b) + "\n" }
	hello := line(map[string]any{"n": 1, "kind": "hello", "ray": "2.60.0"})
	whole := hello + "driver chatter\n" +
		line(map[string]any{"n": 2, "kind": "start", "id": a.ID, "attempt": 1}) +
		line(map[string]any{"n": 3, "kind": "start", "id": b.ID, "attempt": 1}) +
		line(map[string]any{"n": 4, "kind": "end", "id": b.ID, "attempt": 1, "outcome": map[string]any{"status": "completed", "wall_s": 2.5}, "files": files})
	tailed, stopped := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "PUT" && strings.HasPrefix(r.URL.Path, "/api/packages/gcs/"):
		case r.Method == "POST" && r.URL.Path == "/api/jobs/":
			json.NewEncoder(w).Encode(map[string]string{"submission_id": "x"})
		case strings.HasSuffix(r.URL.Path, "/logs/tail"):
			ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer ws.Close()
			ws.WriteMessage(websocket.TextMessage, []byte(hello)) // the rest is a second behind
			close(tailed)
			<-stopped
		case strings.HasSuffix(r.URL.Path, "/stop"):
			close(stopped)
			json.NewEncoder(w).Encode(map[string]bool{"stopped": true})
		case strings.HasSuffix(r.URL.Path, "/logs"):
			json.NewEncoder(w).Encode(map[string]string{"logs": whole})
		case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/api/jobs/"):
			status := "RUNNING"
			select {
			case <-stopped:
				status = "STOPPED"
			default:
			}
			json.NewEncoder(w).Encode(map[string]string{"status": status})
		default:
			http.Error(w, "no", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	cl, err := rayjob.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := &Ray{Client: cl, Logger: nilLogger()}
	ctx, ctrlC := context.WithCancel(context.Background())
	go func() { <-tailed; ctrlC() }()
	var mu sync.Mutex
	got := map[string]Outcome{}
	err = r.Run(ctx, []Job{a, b}, func(ctx context.Context, j Job) {
		out := r.Execute(ctx, j)
		mu.Lock()
		got[j.ID] = out
		mu.Unlock()
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
	if out, ok := got[a.ID]; !ok || out.Status != agent.StatusInterrupted {
		t.Errorf("the attempt that began in the tail's last second: %+v (ran %v)", out, ok)
	}
	if out := got[b.ID]; out.Status != agent.StatusCompleted || out.WallS != 2.5 {
		t.Errorf("the attempt that ended in the tail's last second: %+v", out)
	}
	if _, err := os.Stat(filepath.Join(b.Dir, "result.json")); err != nil {
		t.Errorf("its run folder: %v", err)
	}
}

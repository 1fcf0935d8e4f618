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
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/eval/rayjob"
	"github.com/pyrualean/pyrualean/eval/rayservice"
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

// TestRayPackage: the suite's package holds the plan (episodes as the node runs them,
// resources, the runner's retry rule, the forwarded settings) and a twin finished in an earlier
// run; no secret of this environment is anywhere in it.
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
	r.Owner = "eval-folder-hash"
	pkg, err := r.Package(jobs, "pyrualean-test")
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
	if len(files) != 2 {
		t.Errorf("package files %v, want plan.json and one twin", len(files))
	}
	var plan rayPlan
	if err := json.Unmarshal(files["plan.json"], &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Submission != "pyrualean-test" || plan.Owner != "eval-folder-hash" || plan.Retries != 2 || plan.BackoffS != 1.5 || len(plan.Retryable) != len(RetryableStatuses()) || plan.Env["OPENAI_BASE_URL"] == "" ||
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
	if _, err := r.Package([]Job{lone}, "x"); err == nil {
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
	line := func(v map[string]any) []byte { b, _ := json.Marshal(v); return b }
	ok := true
	for _, l := range [][]byte{
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
	for _, l := range [][]byte{
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

// TestRayServiceStream: a suite through the service's HTTP face (a stand-in here; the real one runs
// in TestEvalRay). The stream drops after b's end and is followed again from the last line read;
// read lines are acknowledged; Ctrl-C cancels the suite and the lines after it are still read: the
// running attempt ends as the service says (interrupted), the ended one keeps its run folder.
func TestRayServiceStream(t *testing.T) {
	dir := t.TempDir()
	a, b := replayJob(dir, "stack_blocks", spec.ArmCells), replayJob(dir, "open_drawer", spec.ArmCells)
	files := base64.StdEncoding.EncodeToString(tgz(t, map[string]string{"result.json": `{"status":"completed"}`}))
	line := func(v map[string]any) []byte { b, _ := json.Marshal(v); return append(b, '\n') }
	tok := strings.Repeat("t", 64)
	tokFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokFile, []byte(tok+"\n"), 0o600)
	var mu sync.Mutex
	var afters, acks []string
	suite := ""
	cancelled := make(chan struct{})
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+tok {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path == "/health":
			w.Write([]byte(`{"ok":true}`))
		case r.Method == "POST" && r.URL.Path == "/suites":
			body, _ := io.ReadAll(r.Body)
			zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			f, _ := zr.Open("plan.json")
			var plan rayPlan
			json.NewDecoder(f).Decode(&plan)
			mu.Lock()
			suite = plan.Submission
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
		case strings.HasSuffix(r.URL.Path, "/lines"):
			mu.Lock()
			afters = append(afters, r.URL.Query().Get("after"))
			first := len(afters) == 1
			mu.Unlock()
			if first {
				w.Write(line(map[string]any{"n": 1, "kind": "hello", "ray": "2.60.0"}))
				w.Write(line(map[string]any{"n": 2, "kind": "start", "id": a.ID, "attempt": 1}))
				w.Write(line(map[string]any{"n": 3, "kind": "start", "id": b.ID, "attempt": 1}))
				w.Write(line(map[string]any{"n": 4, "kind": "end", "id": b.ID, "attempt": 1, "outcome": map[string]any{"status": "completed", "wall_s": 2.5}, "files": files}))
				w.Write([]byte(`{"n": 5, "kind": "lo`)) // the connection drops inside a line
				return
			}
			w.Write([]byte("\n")) // a keep-alive
			w.(http.Flusher).Flush()
			<-cancelled
			w.Write(line(map[string]any{"n": 5, "kind": "lost", "id": a.ID, "attempt": 1, "status": "interrupted", "error": "eval cancelled the suite (Ctrl-C)"}))
			w.Write(line(map[string]any{"n": 6, "kind": "done", "cancelled": true}))
		case strings.HasSuffix(r.URL.Path, "/ack"):
			mu.Lock()
			acks = append(acks, r.URL.Query().Get("n"))
			mu.Unlock()
		case strings.HasSuffix(r.URL.Path, "/cancel"):
			close(cancelled)
			w.WriteHeader(http.StatusAccepted)
		default:
			http.Error(w, "no", http.StatusNotFound)
		}
	}))
	defer svc.Close()
	port := svc.Listener.Addr().(*net.TCPAddr).Port
	dash := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/jobs/":
			json.NewEncoder(w).Encode([]map[string]any{
				{"submission_id": "old", "status": "RUNNING", "metadata": map[string]string{"pyrualean": "service", "version": "older"}},
				{"submission_id": "svc", "status": "RUNNING", "metadata": map[string]string{"pyrualean": "service", "version": rayservice.Version(),
					"token": rayservice.TokenHash(tok)}}})
		case "/api/jobs/svc/logs":
			json.NewEncoder(w).Encode(map[string]string{"logs": fmt.Sprintf("starting\n@pyrualean-ray-service {\"port\":%d}\n", port)})
		case "/api/jobs/svc":
			json.NewEncoder(w).Encode(map[string]string{"status": "RUNNING"})
		default:
			http.Error(w, "no", http.StatusNotFound)
		}
	}))
	defer dash.Close()
	cl, err := rayjob.New(strings.Replace(dash.URL, "127.0.0.1", "localhost", 1))
	if err != nil {
		t.Fatal(err)
	}
	r := &Ray{Client: cl, Logger: nilLogger(), Service: rayservice.Options{TokenFile: tokFile}}
	ctx, ctrlC := context.WithCancel(context.Background())
	var got sync.Map
	err = r.Run(ctx, []Job{a, b}, func(ctx context.Context, j Job) {
		out := r.Execute(ctx, j)
		got.Store(j.ID, out)
		r.recorded()
		if j.ID == b.ID {
			ctrlC() // once b's outcome is in
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
	if out, ok := got.Load(b.ID); !ok || out.(Outcome).Status != agent.StatusCompleted || out.(Outcome).WallS != 2.5 {
		t.Errorf("b: %+v", out)
	}
	if _, err := os.Stat(filepath.Join(b.Dir, "result.json")); err != nil {
		t.Errorf("b's run folder: %v", err)
	}
	if out, ok := got.Load(a.ID); !ok || out.(Outcome).Status != agent.StatusInterrupted {
		t.Errorf("a: %+v", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if suite == "" || len(afters) != 2 || afters[0] != "0" || afters[1] != "4" {
		t.Errorf("suite %q followed from %v, want 0 then 4", suite, afters)
	}
	if !slices.Contains(acks, "4") {
		t.Errorf("acknowledged %v, want b's end (4)", acks)
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runs"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/eval/raycluster"
	"github.com/pyrualean/pyrualean/eval/rayjob"
	"github.com/pyrualean/pyrualean/eval/rayservice"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// rayTestNode names the pyrualean binary the cluster's nodes run (set in the re-executed test).
const rayTestNode = "PYRUALEAN_RAY_TEST_NODE_BIN"

// TestEvalRay: `eval --engine ray` on a real one-node Ray cluster (ray from PyPI, 2 CPUs), in
// network and pid namespaces of its own. A 4-episode replay suite submitted through the CLI lands
// in a eval folder that matches a local run of the same matrix (ids, statuses, success, counts);
// the Ray worker running one episode is killed mid-episode, and that episode is retried by Ray and
// counted once; the service job's text and the cluster's files hold no secret of the client's
// environment; the nodes' robot servers are forked from the node's forker; Ctrl-C cancels the
// suite and the same command again finishes it; `ray stop --force` leaves no process behind.
func TestEvalRay(t *testing.T) {
	bin := os.Getenv(rayTestNode)
	if bin == "" {
		nbtest.Heavy(t, "a Ray cluster running episodes")
		if os.Geteuid() != 0 {
			t.Skip("needs root: the cluster runs in network and pid namespaces of its own (unshare)")
		}
		// The nodes run this checkout's pyrualean, built now.
		bin = filepath.Join(t.TempDir(), "bin", "pyrualean")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
		defer cancel()
		cmd, err := raycluster.Reexec(ctx, os.Args[0], "-test.run=^TestEvalRay$", "-test.v", "-test.count=1", "-test.timeout=8m")
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, rayTestNode+"="+bin)
		out, err := cmd.CombinedOutput()
		t.Logf("in the namespaces:\n%s", out)
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestEvalRay")) {
			t.Fatalf("the test in its namespaces: %v", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	// A secret in the client's environment, which the cluster's environment lacks: it must reach
	// neither the job's text nor anything the cluster writes.
	secret := "sk-pyrualean-" + randomHex(12)
	t.Setenv("OPENAI_API_KEY", secret)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_API_KEY=") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+filepath.Dir(bin)+":"+filepath.Join(root, ".venv", "bin")+":"+os.Getenv("PATH"), "PYRUALEAN_ROOT="+root)
	rayTmp, err := os.MkdirTemp("", "ray-") // short: Ray's socket paths live under it
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(rayTmp)
	nodeTmp := filepath.Join(rayTmp, "node-tmp") // the nodes' TMPDIR: their work folders
	os.Mkdir(nodeTmp, 0o755)
	env = append(env, "TMPDIR="+nodeTmp)
	logf, _ := os.Create(filepath.Join(t.TempDir(), "ray-start.log"))
	t0 := time.Now()
	cl, err := raycluster.Start(ctx, raycluster.Options{Ray: filepath.Join(root, ".venv", "bin", "ray"), CPUs: 2, TempDir: rayTmp, Env: env, Log: logf})
	if err != nil {
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("%v\n%s", err, b)
	}
	stopped := false
	defer func() {
		if !stopped {
			cl.Stop(context.Background())
		}
	}()
	t.Logf("cluster up in %.1fs at %s", time.Since(t0).Seconds(), cl.Address)

	dir := t.TempDir()
	matrix := []string{"--runtime", "replay", "--tasks", "stack_blocks,open_drawer", "--seeds", "0", "--arms", "cells,tools", "--images", "none"}
	var stdout, stderr bytes.Buffer
	if code := cmdEval(ctx, append(slices.Clone(matrix), "--jobs", "2", "--out", filepath.Join(dir, "local")), &stdout, &stderr); code != 0 {
		t.Fatalf("local eval: exit %d\n%s", code, stderr.String())
	}

	// The Ray run; the worker running the first episode to boot its kernel is killed.
	killed := make(chan rayKill, 1)
	stopKiller := make(chan struct{})
	go killRayWorker(killed, stopKiller)
	stdout.Reset()
	stderr.Reset()
	rayDir := filepath.Join(dir, "ray")
	code := cmdEval(ctx, append(slices.Clone(matrix), "--engine", "ray", "--ray-address", cl.Address, "--retry-backoff-s", "0.5", "--json", "--out", rayDir), &stdout, &stderr)
	close(stopKiller)
	if code != 0 {
		t.Fatalf("ray eval: exit %d\n%s", code, stderr.String())
	}
	var kill rayKill
	select {
	case kill = <-killed:
	default:
		t.Fatalf("no episode was seen running on a Ray worker:\n%s", stderr.String())
	}
	t.Logf("killed Ray worker %d running %s (episode process %d)", kill.worker, kill.id, kill.episode)
	events := map[string]int{}
	retried := false
	for line := range strings.Lines(stdout.String()) {
		var ev eval.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		events[ev.Kind]++
		if ev.Running > 2 {
			t.Errorf("the live view shows %d running on a 2-CPU cluster: %s", ev.Running, line)
		}
		if ev.Kind == eval.EventRetry && ev.ID == kill.id {
			retried = true
		}
	}
	if events[eval.EventFinish] != 4 || events[eval.EventSuiteEnd] != 1 || !retried {
		t.Errorf("events %v, retry of the killed episode seen: %v", events, retried)
	}

	// The merged eval folder is the local one's: same ids, statuses, success and counts.
	local, _ := eval.ReadManifest(filepath.Join(dir, "local"))
	remote, err := eval.ReadManifest(rayDir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(local.Order, remote.Order) || len(remote.Order) != 4 || remote.Runner.Engine != "ray" {
		t.Fatalf("episodes: local %v, ray %v (engine %q)", local.Order, remote.Order, remote.Runner.Engine)
	}
	for _, id := range local.Order {
		l, r := local.Episodes[id], remote.Episodes[id]
		lr, lerr := runs.LoadRun(filepath.Join(dir, "local", l.Dir))
		rr, rerr := runs.LoadRun(filepath.Join(rayDir, r.Dir))
		if lerr != nil || rerr != nil {
			t.Fatalf("%s: %v / %v", id, lerr, rerr)
		}
		if l.Status != agent.StatusCompleted || r.Status != l.Status || r.Success == nil || *r.Success != *l.Success ||
			rr.Status != lr.Status || rr.Calls != lr.Calls || rr.Steps != lr.Steps || rr.Stateful != lr.Stateful || rr.Turns != lr.Turns || rr.System != lr.System {
			t.Errorf("%s: local %+v %+v\nray %+v %+v", id, l, lr, r, rr)
		}
		want := 1
		if id == kill.id {
			want = 2 // the killed attempt and Ray's retry
		}
		if r.Attempts != want {
			t.Errorf("%s: %d attempts, want %d", id, r.Attempts, want)
		}
	}
	if n := len(resultFiles(t, rayDir)); n != 4 {
		t.Errorf("%d run folders under episodes/, want 4 (each episode once)", n)
	}
	// The node's warm start: robot servers forked from the node's forker (its host started with the
	// service), the API reference asked for once per node and kept.
	for _, p := range resultFiles(t, rayDir) {
		var res struct {
			Seal struct {
				Forked bool `json:"robot_server_forked"`
			} `json:"seal"`
		}
		if b, err := os.ReadFile(p); err != nil || json.Unmarshal(b, &res) != nil || !res.Seal.Forked {
			t.Errorf("%s: robot server not forked from the node's forker", p)
		}
	}
	if refs, _ := filepath.Glob(filepath.Join(nodeTmp, "pyrualean-ray", "reference", "reference-*.txt")); len(refs) != 2 {
		t.Errorf("the node's API reference cache: %v, want the text and the tools reference", refs)
	}
	if _, err := os.Stat(filepath.Join(rayDir, ".incoming")); err == nil {
		t.Errorf("the landing folder is left in the eval folder")
	}
	if _, err := os.Stat(filepath.Join(rayDir, "attempts")); err == nil {
		t.Errorf("a killed attempt left a folder: it never came back from its node")
	}
	if code := cmdSummarize(ctx, []string{"--strict", filepath.Join(rayDir, "episodes")}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Errorf("summarize --strict of the ray suite: exit %d", code)
	}
	waitGone(t, kill.episode, "the killed worker's episode process")

	// No secret in the service job's text (entrypoint, runtime_env, metadata) nor in the cluster's
	// files; the service runs on for the next suite.
	suiteID, jobID := submissionID(t, stderr.String())
	client, _ := rayjob.New(cl.Address)
	info, err := client.Info(ctx, jobID)
	if err != nil || info.Status != rayjob.Running {
		t.Fatalf("service job %s: %+v %v", jobID, info, err)
	}
	if b, _ := json.Marshal(info); bytes.Contains(b, []byte(secret)) || !strings.Contains(info.Entrypoint, "ray_service.py") {
		t.Errorf("the job's text: %s", b)
	}
	// The service's token (this user's, in the cache folder) is in neither its details nor its log.
	cache, _ := os.UserCacheDir()
	tok, err := os.ReadFile(filepath.Join(cache, "pyrualean", "ray-service-token"))
	if err != nil || len(bytes.TrimSpace(tok)) < 32 {
		t.Fatalf("the service's token: %q %v", tok, err)
	}
	tok = bytes.TrimSpace(tok)
	logs, _ := client.Logs(ctx, jobID)
	if b, _ := json.Marshal(info); bytes.Contains(b, tok) || strings.Contains(logs, string(tok)) || !strings.Contains(logs, "@pyrualean-ray-service") {
		t.Errorf("the token is in the service job's details or log:\n%s", logs)
	}
	if _, err := os.Stat(filepath.Join(nodeTmp, "pyrualean-ray", suiteID)); err == nil {
		t.Errorf("the suite's work folders are left on the node")
	}
	filepath.WalkDir(rayTmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("the secret is in the cluster's file %s", p)
		}
		return nil
	})

	// Resume on the cluster: a eval folder holding the local run's finished cells episodes runs only
	// the tools episodes there, each replaying its twin's calls, which travel with the job.
	mixed := filepath.Join(dir, "mixed")
	for _, id := range local.Order {
		if st := local.Episodes[id]; st.Arm == spec.ArmCells {
			os.MkdirAll(filepath.Dir(filepath.Join(mixed, st.Dir)), 0o755)
			if out, err := exec.Command("cp", "-a", filepath.Join(dir, "local", st.Dir), filepath.Join(mixed, st.Dir)).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
		}
	}
	stdout.Reset()
	stderr.Reset()
	if code := cmdEval(ctx, append(slices.Clone(matrix), "--engine", "ray", "--ray-address", cl.Address, "--json", "--out", mixed), &stdout, &stderr); code != 0 {
		t.Fatalf("resumed ray eval: exit %d\n%s", code, stderr.String())
	}
	if n, m := strings.Count(stdout.String(), `"event":"skip"`), strings.Count(stdout.String(), `"event":"finish"`); n != 2 || m != 2 {
		t.Errorf("resume: %d skipped, %d run; want 2 and 2", n, m)
	}
	resumed, _ := eval.ReadManifest(mixed)
	for _, id := range local.Order {
		l, r := local.Episodes[id], resumed.Episodes[id]
		lr, _ := runs.LoadRun(filepath.Join(dir, "local", l.Dir))
		rr, err := runs.LoadRun(filepath.Join(mixed, r.Dir))
		if err != nil || rr.Status != lr.Status || rr.Calls != lr.Calls || rr.Steps != lr.Steps || rr.OK == nil || !*rr.OK {
			t.Errorf("resumed %s: %+v (%v), local %+v", id, rr, err, lr)
		}
	}

	// Ctrl-C cancels the suite: cancel once an episode runs.
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	cutDir := filepath.Join(dir, "cut")
	go func() {
		for cctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			if m, err := eval.ReadManifest(cutDir); err == nil {
				for _, st := range m.Episodes {
					if st.Status == eval.StateRunning {
						ccancel()
					}
				}
			}
		}
	}()
	stderr.Reset()
	code = cmdEval(cctx, []string{"--runtime", "replay", "--tasks", "stack_blocks,open_drawer", "--seeds", "1", "--arms", "cells", "--images", "none",
		"--engine", "ray", "--ray-address", cl.Address, "--out", cutDir}, &bytes.Buffer{}, &stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "run the same command again to resume") {
		t.Errorf("Ctrl-C: exit %d\n%s", code, stderr.String())
	}
	cutSuite, cutJob := submissionID(t, stderr.String())
	if cutJob != jobID {
		t.Errorf("the second eval started service job %s beside %s", cutJob, jobID)
	}
	if svc, err := rayservice.Ensure(ctx, client, rayservice.Options{}); err != nil {
		t.Errorf("the service after Ctrl-C: %v", err)
	} else if st, err := svc.State(ctx, cutSuite); err == nil && (!st.Done || !st.Cancelled) {
		t.Errorf("the suite after Ctrl-C: %+v", st) // (a 404: the service already forgot it, read to its end)
	}
	if m, _ := eval.ReadManifest(cutDir); m == nil || m.Runner.EndedAt == "" {
		t.Errorf("the manifest does not say the runner ended")
	}
	for deadline := time.Now().Add(20 * time.Second); len(episodeProcesses()) > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if p := episodeProcesses(); len(p) > 0 {
		t.Errorf("episodes still running after the suite was cancelled: %v", p)
	}
	// The same command again: a new suite finishes what the cancelled one left, each episode once.
	stdout.Reset()
	stderr.Reset()
	code = cmdEval(ctx, []string{"--runtime", "replay", "--tasks", "stack_blocks,open_drawer", "--seeds", "1", "--arms", "cells", "--images", "none",
		"--engine", "ray", "--ray-address", cl.Address, "--json", "--out", cutDir}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("the same command after Ctrl-C: exit %d\n%s", code, stderr.String())
	}
	cut, _ := eval.ReadManifest(cutDir)
	if cut == nil || len(cut.Order) != 2 {
		t.Fatalf("the resumed suite's manifest: %+v", cut)
	}
	for _, id := range cut.Order {
		if st := cut.Episodes[id]; st.Status != agent.StatusCompleted || st.Success == nil || !*st.Success {
			t.Errorf("%s after the restart: %+v", id, st)
		}
	}
	if n := len(resultFiles(t, cutDir)); n != 2 {
		t.Errorf("%d run folders after the restart, want 2 (each episode once)", n)
	}

	// Shut the cluster down: nothing of it may be left.
	stopped = true
	strays, err := cl.Stop(ctx)
	if err != nil {
		t.Error(err)
	}
	if len(strays) > 0 {
		t.Errorf("processes left after ray stop --force: %v", strays)
	}
}

type rayKill struct {
	id              string
	worker, episode int
}

// killRayWorker kills (SIGKILL) the Ray worker of the first episode process seen with a child (its
// kernel booted), and says which episode it was.
func killRayWorker(killed chan<- rayKill, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		for _, pid := range episodeProcesses() {
			ppid := parentOf(pid)
			parent, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ppid))
			if !bytes.HasPrefix(parent, []byte("ray::")) || len(childrenOf(pid)) == 0 {
				continue
			}
			args := strings.Split(string(readFile(fmt.Sprintf("/proc/%d/cmdline", pid))), "\x00")
			i := slices.Index(args, "--job")
			if i < 0 || i+1 >= len(args) {
				continue
			}
			var job eval.NodeJob
			if json.Unmarshal(readFile(args[i+1]), &job) != nil || job.Episode.ID == "" {
				continue
			}
			if syscall.Kill(ppid, syscall.SIGKILL) == nil {
				killed <- rayKill{id: job.Episode.ID, worker: ppid, episode: pid}
				return
			}
		}
	}
}

// episodeProcesses lists the `pyrualean episode` processes alive (in this pid namespace).
func episodeProcesses() []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args := strings.Split(string(readFile(filepath.Join("/proc", e.Name(), "cmdline"))), "\x00")
		if len(args) > 2 && args[1] == "episode" && slices.Contains(args, "--job") && !isZombie(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func readFile(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

func statFields(pid int) []string {
	s := string(readFile(fmt.Sprintf("/proc/%d/stat", pid)))
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

func parentOf(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

func isZombie(pid int) bool {
	f := statFields(pid)
	return len(f) == 0 || f[0] == "Z"
}

func childrenOf(pid int) []string {
	var out []string
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		out = append(out, strings.Fields(string(readFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))))...)
	}
	return out
}

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil || isZombie(pid) {
			return
		}
	}
	t.Errorf("%s (%d) still runs", what, pid)
}

var submissionRE = regexp.MustCompile(`ray suite (\S+) on .*service job (\S+)\)`)

// submissionID reads the suite's id and its service job's from eval's stderr.
func submissionID(t *testing.T, stderr string) (suite, job string) {
	t.Helper()
	m := submissionRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("eval did not name its ray suite:\n%s", stderr)
	}
	return m[1], m[2]
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestRayPrepare: on Ray an episode asks for its resources; one with a cuda-device setting asks
// for a GPU instead of naming one (the setting is dropped on the node, kept in the id).
func TestRayPrepare(t *testing.T) {
	ep := eval.Episode{ID: "tabletop/default/t/0/cells/replay/s-x", Settings: map[string]string{"cuda-device": "1", "images": "none"}}
	for _, c := range []struct {
		gpus, want float64
		settings   map[string]string
	}{
		{0, 1, map[string]string{"images": "none"}},
		{2, 2, map[string]string{"images": "none"}},
	} {
		got, res := rayPrepare(1, 1.5, c.gpus)(eval.Job{Episode: ep})
		if res.GPUs != c.want || res.CPUs != 1 || res.MemoryBytes != 3<<29 || !maps.Equal(got.Settings, c.settings) || got.ID != ep.ID {
			t.Errorf("--ray-gpus %g: %+v %+v", c.gpus, got, res)
		}
	}
	if ep.Settings["cuda-device"] != "1" {
		t.Error("the job's own settings were changed")
	}
	plain := eval.Episode{Settings: map[string]string{"images": "none"}}
	if _, res := rayPrepare(2, 0, 0)(eval.Job{Episode: plain}); res.GPUs != 0 || res.CPUs != 2 || res.MemoryBytes != 0 {
		t.Errorf("CPU episode: %+v", res)
	}
}

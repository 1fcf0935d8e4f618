package seal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/robotapi"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestSealedKernel launches the project's kernelspec inside the sandbox and checks from inside what the
// agent's code could reach: environment, uid, pid namespace, network, files outside the workspace.
func TestSealedKernel(t *testing.T) {
	nbtest.Heavy(t, "a sealed kernel")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Check(ctx); err != nil {
		t.Fatalf("this machine must seal (setup installs bubblewrap): %v", err)
	}
	t.Setenv("OPENAI_API_KEY", "sk-seal-test-secret")
	t.Setenv("PYRUALEAN_TOKEN", "gateway-seal-test-secret")
	spec, err := kernel.FindSpec("pyrualean")
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	secretFile := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secretFile, []byte("top secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sb, err := New(ctx, spec, Options{Workspace: ws, Env: map[string]string{"MUJOCO_GL": "egl"},
		PythonPath: filepath.Join(repoRoot(t), "robotapi", "python")})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if _, err := New(ctx, spec, Options{Workspace: ws, Env: map[string]string{"OPENAI_API_KEY": "x"}}); err == nil {
		t.Fatal("a secret-named variable must be refused")
	}
	k, err := kernel.Launch(ctx, sb.Spec, kernel.LaunchOptions{Dir: ws, IPC: sb.IPC})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(context.Background())
	port := ln.Addr().(*net.TCPAddr).Port
	code := `import os, json, socket
def tryit(f):
    try:
        return repr(f())[:200]
    except BaseException as e:
        return "ERR " + type(e).__name__
def conn():
    s = socket.socket(); s.settimeout(2); s.connect(("127.0.0.1", ` + itoa(port) + `)); return "connected"
out = {"env": dict(os.environ), "uid": os.getuid(), "pid": os.getpid(),
       "proc1": tryit(lambda: open("/proc/1/environ","rb").read()),
       "ppid_env": tryit(lambda: open(f"/proc/{os.getppid()}/environ","rb").read()),
       "secret": tryit(lambda: open(` + pyq(secretFile) + `).read()),
       "root": sorted(os.listdir("/")), "net": tryit(conn),
       "write_usr": tryit(lambda: open("/usr/x", "w")),
       "write_ws": tryit(lambda: open("probe.txt", "w").write("ok")),
       "uid_map": open("/proc/self/uid_map").read()}
print(json.dumps(out))`
	res, err := k.Client().Execute(ctx, code, kernel.ExecuteOptions{Timeout: time.Minute})
	if err != nil || res.Status != "ok" {
		t.Fatalf("execute: %v %+v", err, res)
	}
	var text string
	for _, o := range res.Outputs {
		text += o.Text
	}
	var got struct {
		Env      map[string]string `json:"env"`
		UID      int               `json:"uid"`
		PID      int               `json:"pid"`
		Proc1    string            `json:"proc1"`
		PpidEnv  string            `json:"ppid_env"`
		Secret   string            `json:"secret"`
		Net      string            `json:"net"`
		WriteUsr string            `json:"write_usr"`
		WriteWs  string            `json:"write_ws"`
		Root     []string          `json:"root"`
		UIDMap   string            `json:"uid_map"`
	}
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	for k, v := range got.Env {
		if strings.Contains(v, "secret") || k == "OPENAI_API_KEY" || k == "PYRUALEAN_TOKEN" {
			t.Errorf("environment leaked %s=%s", k, v)
		}
	}
	if strings.Contains(got.Proc1, "secret") || strings.Contains(got.PpidEnv, "secret") {
		t.Errorf("a parent's environment is readable: %s / %s", got.Proc1, got.PpidEnv)
	}
	if got.UID != DefaultUID || got.PID > 10 {
		t.Errorf("uid %d pid %d: want uid %d in its own pid namespace", got.UID, got.PID, DefaultUID)
	}
	// Who the kernel is on the host: uid_map's line holding the sandbox's uid (inside, outside, count).
	hostUID := -1
	for _, l := range strings.Split(strings.TrimSpace(got.UIDMap), "\n") {
		var in, out, n int
		if _, err := fmt.Sscan(l, &in, &out, &n); err == nil && got.UID >= in && got.UID < in+n {
			hostUID = out + got.UID - in
		}
	}
	if sb.Info.HostUIDNote != "" {
		t.Logf("this machine cannot drop the kernel's host uid: %s", sb.Info.HostUIDNote)
	} else if hostUID <= 0 || hostUID != sb.Info.HostUID {
		t.Errorf("the kernel's uid %d is host uid %d (uid_map %q, info %d): never root", got.UID, hostUID, got.UIDMap, sb.Info.HostUID)
	}
	if !strings.HasPrefix(got.Secret, "ERR") || !strings.HasPrefix(got.Net, "ERR") || !strings.HasPrefix(got.WriteUsr, "ERR") {
		t.Errorf("escapes: secret=%s net=%s write_usr=%s", got.Secret, got.Net, got.WriteUsr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "probe.txt")); err != nil || string(b) != "ok" {
		t.Errorf("the workspace must stay writable: %v %q (%s)", err, b, got.WriteWs)
	}
	if !sb.Info.Sealed || sb.Info.Network != "none" {
		t.Errorf("info: %+v", sb.Info)
	}
	t.Logf("root: %v info: %+v", got.Root, sb.Info)
}

func itoa(i int) string   { b, _ := json.Marshal(i); return string(b) }
func pyq(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestSealLimits: the sandbox's limits hold from inside and leave the kernel serving: memory
// (RLIMIT_AS), open files (RLIMIT_NOFILE) and, where the pids cgroup is writable, processes/threads.
func TestSealLimits(t *testing.T) {
	nbtest.Heavy(t, "a sealed kernel")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Check(ctx); err != nil {
		t.Fatalf("this machine must seal (setup installs bubblewrap): %v", err)
	}
	spec, err := kernel.FindSpec("pyrualean")
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	const memory, files, procs, fileBytes = 3 << 30, 128, 64, 64 << 20
	sb, err := New(ctx, spec, Options{Workspace: ws, Limits: Limits{MemoryBytes: memory, MaxFiles: files, MaxProcs: procs, FileBytes: fileBytes}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if sb.Info.MemoryMax != memory || sb.Info.FilesMax != files || sb.Info.FileMax != fileBytes || sb.Info.CPUMax != DefaultCPUSeconds {
		t.Errorf("info: %+v", sb.Info)
	}
	k, err := kernel.Launch(ctx, sb.Spec, kernel.LaunchOptions{Dir: ws, IPC: sb.IPC})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(context.Background())
	cases := []struct {
		name, code, want string
		needsPids        bool
	}{
		{"memory over the limit", "try:\n    b = bytearray(4 << 30)\n    print('allocated')\nexcept MemoryError:\n    print('refused')", "refused", false},
		{"memory under the limit", "b = bytearray(100 << 20); print('allocated', len(b) >> 20); del b", "allocated 100", false},
		{"open files", "import tempfile\nfs = []\ntry:\n    for _ in range(" + itoa(2*files) + "):\n        fs.append(tempfile.TemporaryFile())\n    print('opened all')\nexcept OSError as e:\n    print('refused %d' % e.errno)\nfinally:\n    for f in fs: f.close()", "refused 24", false},
		{"threads", "import threading\nev = threading.Event(); ts = []\ntry:\n    for _ in range(" + itoa(2*procs) + "):\n        t = threading.Thread(target=ev.wait); t.start(); ts.append(t)\n    print('started all')\nexcept RuntimeError:\n    print('refused after', len(ts))\nfinally:\n    ev.set(); [t.join() for t in ts]", "refused after", true},
		{"file size", "import os\nf = open('big.bin', 'wb')\ntry:\n    for _ in range(128):\n        f.write(b'x' * (1 << 20)); f.flush()\n    print('wrote all')\nexcept OSError as e:\n    print('refused', e.errno, os.path.getsize('big.bin') >> 20)\nfinally:\n    f.close(); os.remove('big.bin')", "refused 27 64", false},
		{"still serving", "print(1 + 1)", "2", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.needsPids && sb.Info.PidsMax == 0 {
				t.Skipf("no writable pids cgroup here: %s", sb.Info.PidsNote)
			}
			res, err := k.Client().Execute(ctx, c.code, kernel.ExecuteOptions{Timeout: time.Minute})
			if err != nil || res.Status != "ok" {
				t.Fatalf("execute: %v %+v", err, res)
			}
			var text string
			for _, o := range res.Outputs {
				text += o.Text
			}
			if !strings.Contains(text, c.want) {
				t.Errorf("printed %q, want %q", text, c.want)
			}
			t.Logf("%s", strings.TrimSpace(text))
		})
	}
}

// TestSealCPULimit: a kernel that spins past RLIMIT_CPU is killed (the episode sees the kernel die); it
// cannot hold a core for the rest of the episode.
func TestSealCPULimit(t *testing.T) {
	nbtest.Heavy(t, "a sealed kernel")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec, err := kernel.FindSpec("pyrualean")
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	sb, err := New(ctx, spec, Options{Workspace: ws, Limits: Limits{CPUSeconds: 8}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	k, err := kernel.Launch(ctx, sb.Spec, kernel.LaunchOptions{Dir: ws, IPC: sb.IPC})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(context.Background())
	start := time.Now()
	_, err = k.Client().Execute(ctx, "while True:\n    pass", kernel.ExecuteOptions{Timeout: time.Minute})
	if !errors.Is(err, kernel.ErrKernelDied) {
		t.Fatalf("a spinning cell past RLIMIT_CPU: %v (after %v), want the kernel's death", err, time.Since(start))
	}
	t.Logf("killed after %v", time.Since(start).Round(time.Millisecond))
}

// TestMeasureWorkspace counts allocated bytes and entries, never follows a link out of the folder, and
// stops as soon as a bound is passed.
func TestMeasureWorkspace(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "big"), make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(ws, "f"+itoa(i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		q     Usage
		over  bool
		bytes int64 // at least
	}{
		{"under", Usage{Bytes: 4 << 20, Entries: 100}, false, 1 << 20},
		{"bytes", Usage{Bytes: 512 << 10, Entries: 100}, true, 1 << 20},
		{"entries", Usage{Bytes: 4 << 20, Entries: 10}, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, over, err := MeasureWorkspace(ws, c.q)
			if err != nil || over != c.over || u.Bytes < c.bytes || u.Bytes > 4<<20 {
				t.Errorf("MeasureWorkspace: %+v over=%v err=%v (the 8 MiB behind the link must not count)", u, over, err)
			}
		})
	}
}

// TestSealWorkspaceQuota: files that each stay under RLIMIT_FSIZE but together pass the workspace's
// quota get the sandbox killed within about a second; the host goes on.
func TestSealWorkspaceQuota(t *testing.T) {
	nbtest.Heavy(t, "a sealed kernel")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec, err := kernel.FindSpec("pyrualean")
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	sb, err := New(ctx, spec, Options{Workspace: ws, Limits: Limits{FileBytes: 16 << 20}, WorkspaceBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if sb.Info.PidsMax == 0 {
		t.Skipf("no writable pids cgroup here to kill the sandbox by: %s", sb.Info.PidsNote)
	}
	k, err := kernel.Launch(ctx, sb.Spec, kernel.LaunchOptions{Dir: ws, IPC: sb.IPC})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(context.Background())
	overAt := make(chan Usage, 1)
	sb.WatchWorkspace(func(u Usage) {
		overAt <- u
		if err := sb.Kill(); err != nil {
			t.Errorf("kill: %v", err)
		}
	})
	start := time.Now()
	_, err = k.Client().Execute(ctx, "import time\nfor i in range(16):\n    open(f'part{i}', 'wb').write(b'x' * (8 << 20))\ntime.sleep(30)",
		kernel.ExecuteOptions{Timeout: time.Minute})
	if !errors.Is(err, kernel.ErrKernelDied) {
		t.Fatalf("past the workspace quota: %v after %v, want the kernel's death", err, time.Since(start))
	}
	select {
	case u := <-overAt:
		if u.Bytes <= 64<<20 {
			t.Errorf("over at %+v", u)
		}
		t.Logf("over at %d MiB, killed after %v", u.Bytes>>20, time.Since(start).Round(time.Millisecond))
	default:
		t.Error("the kernel died but the quota never fired")
	}
}

// deepChain makes n nested directories of 200-byte names under root (through open directories: the
// whole path is far past PATH_MAX) with a 1 MiB file at the bottom, as an agent's cells can.
func deepChain(t *testing.T, root string, n int) {
	t.Helper()
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 200)
	for range n {
		if err := r.Mkdir(name, 0o755); err != nil {
			t.Fatal(err)
		}
		sub, err := r.OpenRoot(name)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		r = sub
	}
	defer r.Close()
	if err := r.WriteFile("bottom", make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWalkBeneathLongChain: the quota and the hand-over of the workspace walk a chain no path can name
// (24 x 200 bytes, past PATH_MAX) and count or give away what lies at its bottom; a chain deeper than
// the walk goes counts as over the quota, never as unbounded.
func TestWalkBeneathLongChain(t *testing.T) {
	ws := t.TempDir()
	deepChain(t, ws, 24)
	u, over, err := MeasureWorkspace(ws, Usage{Bytes: 512 << 10, Entries: 1000})
	if err != nil || !over || u.Entries < 24 {
		t.Errorf("MeasureWorkspace past PATH_MAX: %+v over=%v err=%v (the 1 MiB at the bottom must count)", u, over, err)
	}
	if os.Geteuid() == 0 {
		if err := chownTree(ws, 65534, 65534); err != nil {
			t.Fatalf("chownTree past PATH_MAX: %v", err)
		}
		owned := 0
		if err := walkBeneath(ws, func(_ *os.Root, _ string, fi fs.FileInfo) error {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 65534 {
				owned++
			}
			return nil
		}); err != nil || owned != 25 {
			t.Errorf("chownTree: %d of 25 entries given away (%v)", owned, err)
		}
	}
	deep := t.TempDir()
	r, err := os.OpenRoot(deep)
	if err != nil {
		t.Fatal(err)
	}
	for range maxWalkDepth + 1 {
		if err := r.Mkdir("d", 0o755); err != nil {
			t.Fatal(err)
		}
		sub, err := r.OpenRoot("d")
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		r = sub
	}
	r.Close()
	if _, over, err := MeasureWorkspace(deep, Usage{Bytes: 1 << 40, Entries: 1 << 30}); err != nil || !over {
		t.Errorf("a tree deeper than the walk: over=%v err=%v, want over", over, err)
	}
}

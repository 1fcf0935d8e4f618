// Package seal runs a kernel inside an OS sandbox (bubblewrap): no network (the kernel speaks ZeroMQ over
// ipc sockets), its own pid, ipc, uts and user namespaces (uid 65534 inside), a filesystem that is
// read-only except the workspace and a private runtime folder, only the paths Python needs, an
// environment built from an allow-list (never the caller's: no API keys, no gateway token), and limits
// on memory, open files, file size, CPU time and processes. What the agent's code can then reach is what was bound in: the
// robot server's agent socket, never the judge's side.
//
// Where bubblewrap or user namespaces are missing, Check says why; the caller decides whether to run
// unsealed and must then record it (result.json "sealed": false).
package seal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
)

// ErrUnavailable is wrapped by Check's error when this machine cannot seal a kernel.
var ErrUnavailable = errors.New("seal: OS sandbox unavailable")

// ErrSecretEnv is returned for an environment variable whose name says it holds a secret.
var ErrSecretEnv = errors.New("seal: secret-looking variable refused")

// secretName matches variable names that must never reach a sealed kernel or the robot server, even if
// a caller asks (OPENAI_API_KEY, PYRUALEAN_TOKEN, AWS_SECRET_ACCESS_KEY, GOOGLE_APPLICATION_CREDENTIALS,
// HTTP_AUTHORIZATION, SESSION_COOKIE, DB_PASSWORD, a PRIVATE_KEY, a netrc or a signing SALT).
var secretName = regexp.MustCompile(`(?i)(KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|NETRC|SALT|SIGNATURE|PRIVATE)`)

// SecretName says whether an environment variable's name says it holds a secret: the one rule for every
// child process that runs what the agent can reach (the sealed kernel, the robot server).
func SecretName(name string) bool { return secretName.MatchString(name) }

// Defaults for Options' limits.
const (
	DefaultUID         = 65534 // nobody
	DefaultMemoryBytes = 16 << 30
	DefaultMaxProcs    = 512 // processes and threads (a pids cgroup)
	DefaultMaxFiles    = 4096
	DefaultFileBytes   = 1 << 30 // RLIMIT_FSIZE: no single file past 1 GiB (the 4 GiB file)
	DefaultCPUSeconds  = 4 * 3600
)

// Options say what a sealed kernel may see.
type Options struct {
	Workspace string            // the only writable folder the agent's code sees (also HOME and cwd)
	ReadOnly  []string          // more paths bound read-only (e.g. the robot server's agent socket folder)
	Env       map[string]string // the kernel's whole environment besides HOME, PATH, LANG and the runtime's
	Python    string            // the kernel's interpreter (its prefixes and sys.path are bound read-only)
	// PythonPath is PYTHONPATH for the kernel (bound read-only); empty: none.
	PythonPath string
	UID, GID   int // inside the sandbox; default 65534
	Limits         // the kernel's resource limits
	// WorkspaceBytes and WorkspaceEntries are the workspace's quota (WatchWorkspace): space allocated
	// and files; default 4 GiB and 100,000.
	WorkspaceBytes   int64
	WorkspaceEntries int
}

// Limits are the resource limits of a process that serves the agent's code: the sealed kernel, and the
// robot server (which reads the agent's requests outside the sandbox). Zero: the defaults.
type Limits struct {
	MemoryBytes int64 // RLIMIT_AS; default 16 GiB
	MaxProcs    int   // pids cgroup limit (the sandbox, where the pids controller is writable); default 512
	MaxFiles    int   // RLIMIT_NOFILE; default 4096
	// FileBytes is RLIMIT_FSIZE: a write past it fails with EFBIG (Python ignores SIGXFSZ); default 1 GiB.
	FileBytes int64
	// CPUSeconds is RLIMIT_CPU of each process: past it the process is killed (SIGXCPU); for the
	// kernel, the episode ends with its death; default 4 h of CPU time.
	CPUSeconds int
}

// WithDefaults fills the limits left zero with the package's defaults.
func (o Limits) WithDefaults() Limits {
	if o.MemoryBytes == 0 {
		o.MemoryBytes = DefaultMemoryBytes
	}
	if o.MaxProcs == 0 {
		o.MaxProcs = DefaultMaxProcs
	}
	if o.MaxFiles == 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.FileBytes == 0 {
		o.FileBytes = DefaultFileBytes
	}
	if o.CPUSeconds == 0 {
		o.CPUSeconds = DefaultCPUSeconds
	}
	return o
}

// LimitArgv is argv run under o's resource limits (memory, open files, file size, CPU time), through
// prlimit: the one home of these limits for every process that serves the agent's code. Zero limits
// take the defaults.
func (o Limits) LimitArgv(argv []string) []string {
	o = o.WithDefaults()
	out := []string{"/usr/bin/prlimit", "--as=" + strconv.FormatInt(o.MemoryBytes, 10),
		"--nofile=" + strconv.Itoa(o.MaxFiles), "--fsize=" + strconv.FormatInt(o.FileBytes, 10),
		"--cpu=" + strconv.Itoa(o.CPUSeconds), "--"}
	return append(out, argv...)
}

// Info is what result.json records about the seal.
type Info struct {
	Sealed  bool   `json:"sealed"`
	Method  string `json:"method"`           // "bwrap"
	Reason  string `json:"reason,omitempty"` // why not sealed
	UID     int    `json:"uid,omitempty"`
	HostUID int    `json:"host_uid"` // who the kernel is outside the sandbox: 0 only with HostUIDNote
	// HostUIDNote says why the kernel is root on the host (root could not build the namespaces itself).
	HostUIDNote string   `json:"host_uid_note,omitempty"`
	Network     string   `json:"network,omitempty"` // "none" (own namespace, ipc transport)
	Env         []string `json:"env,omitempty"`     // variable names the kernel got
	Writable    []string `json:"writable,omitempty"`
	MemoryMax   int64    `json:"memory_max_bytes,omitempty"`
	FileMax     int64    `json:"file_max_bytes,omitempty"` // RLIMIT_FSIZE
	CPUMax      int      `json:"cpu_max_s,omitempty"`      // RLIMIT_CPU
	// WorkspaceMax and WorkspaceEntriesMax are the workspace's quota (what WatchWorkspace enforces).
	WorkspaceMax        int64  `json:"workspace_max_bytes,omitempty"`
	WorkspaceEntriesMax int    `json:"workspace_max_entries,omitempty"`
	FilesMax            int    `json:"files_max,omitempty"`
	PidsMax             int    `json:"pids_max,omitempty"` // 0: not enforced (no writable pids cgroup)
	PidsNote            string `json:"pids_note,omitempty"`
}

// Check says whether this machine can seal a kernel: bwrap on PATH and able to create the namespaces.
func Check(ctx context.Context) error {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return fmt.Errorf("%w: bwrap not found (apt-get install bubblewrap)", ErrUnavailable)
	}
	if os.Geteuid() == 0 {
		if probe(ctx, bwrap, true) == nil {
			return nil
		}
		// root without the privilege to build namespaces (a container): a user namespace may still do
	}
	return probe(ctx, bwrap, false)
}

// probe runs /usr/bin/true in a sandbox built as New builds one (privileged: bwrap's own privileges and
// the drop to the sandbox's uid; otherwise a user namespace).
func probe(ctx context.Context, bwrap string, privileged bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	argv := append(baseFlags(DefaultUID, DefaultUID, privileged), "--ro-bind", "/usr", "/usr")
	argv = append(argv, systemLinks()...)
	argv = append(argv, "--")
	argv = append(argv, dropTo(DefaultUID, DefaultUID, privileged)...)
	argv = append(argv, "/usr/bin/true")
	cmd := exec.CommandContext(ctx, bwrap, argv...)
	// Once the deadline kills bwrap, stop waiting for its output: a straggler holding the pipe must not
	// hang the episode (CombinedOutput otherwise waits for every writer to close it).
	cmd.WaitDelay = time.Second
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, bwrap, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		// A process stuck in the kernel (e.g. creating a network namespace while many are torn down)
		// ignores SIGKILL until it returns: give it WaitDelay, then answer without it (done reaps it).
		select {
		case waitErr = <-done:
		case <-time.After(2 * cmd.WaitDelay):
			return fmt.Errorf("%w: %s did not exit within %v of being killed at its deadline", ErrUnavailable, bwrap, 2*cmd.WaitDelay)
		}
	}
	if waitErr != nil {
		if ctx.Err() != nil {
			waitErr = fmt.Errorf("%w (%v)", ctx.Err(), waitErr)
		}
		return fmt.Errorf("%w: %s: %v: %s", ErrUnavailable, bwrap, waitErr, strings.TrimSpace(out.String()))
	}
	return nil
}

// Sandbox is one sealed kernel's spec and its private runtime folder (ipc sockets, IPython's files).
type Sandbox struct {
	Spec    kernel.Spec // the kernelspec wrapped in bwrap; launch it with LaunchOptions.IPC = IPC
	IPC     string      // ipc socket prefix for kernel.LaunchOptions.IPC
	Info    Info
	dir     string
	cgroup  string
	cleanup []string
	// workspace and stopWatch: WatchWorkspace's folder and its stop (Close calls it)
	workspace string
	stopWatch func()
}

// New wraps spec in the sandbox Options describe. Close removes what it made.
func New(ctx context.Context, spec kernel.Spec, o Options) (*Sandbox, error) {
	if o.Workspace == "" || !filepath.IsAbs(o.Workspace) {
		return nil, fmt.Errorf("seal: workspace must be an absolute path, not %q", o.Workspace)
	}
	if o.UID == 0 {
		o.UID = DefaultUID
	}
	if o.GID == 0 {
		o.GID = o.UID
	}
	o.Limits = o.Limits.WithDefaults()
	if o.WorkspaceBytes == 0 {
		o.WorkspaceBytes = DefaultWorkspaceBytes
	}
	if o.WorkspaceEntries == 0 {
		o.WorkspaceEntries = DefaultWorkspaceEntries
	}
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("seal: kernelspec %s has no argv", spec.Name)
	}
	python := o.Python
	if python == "" {
		python = spec.Argv[0]
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("%w: bwrap not found", ErrUnavailable)
	}
	// Short path: an ipc socket path must fit in sun_path (108 bytes).
	dir, err := os.MkdirTemp("", "pyrualean-seal-")
	if err != nil {
		return nil, fmt.Errorf("seal: runtime folder: %w", err)
	}
	s := &Sandbox{IPC: filepath.Join(dir, "k"), dir: dir, workspace: o.Workspace}
	fail := func(err error) (*Sandbox, error) { s.Close(); return nil, err }

	env := map[string]string{
		"HOME": o.Workspace, "LANG": "C.UTF-8", "PATH": filepath.Dir(python) + ":/usr/local/bin:/usr/bin:/bin",
		"IPYTHONDIR": filepath.Join(dir, "ipython"), "JUPYTER_RUNTIME_DIR": dir, "MPLCONFIGDIR": filepath.Join(dir, "mpl"),
		"PYTHONDONTWRITEBYTECODE": "1",
	}
	for k, v := range o.Env {
		if SecretName(k) {
			return fail(fmt.Errorf("%w: %s", ErrSecretEnv, k))
		}
		env[k] = v
	}
	if o.PythonPath != "" {
		env["PYTHONPATH"] = o.PythonPath
	}
	roots, err := pythonRoots(ctx, python, o.PythonPath)
	if err != nil {
		return fail(err)
	}
	ro := append(roots, o.ReadOnly...)
	ro = append(ro, etcFiles()...)

	var rootNote string
	privileged := os.Geteuid() == 0
	if privileged {
		if err := probe(ctx, bwrap, true); err != nil {
			privileged = false
			rootNote = "root without the privilege to build the sandbox's namespaces: a user namespace maps the " +
				"kernel's uid to root on the host (" + err.Error() + ")"
		}
	}
	if privileged {
		// The kernel runs as o.UID on the host too: it must own what it writes.
		if err := os.Chown(dir, o.UID, o.GID); err != nil {
			return fail(fmt.Errorf("seal: runtime folder: %w", err))
		}
		if err := chownTree(o.Workspace, o.UID, o.GID); err != nil {
			return fail(err)
		}
	}
	argv := baseFlags(o.UID, o.GID, privileged)
	argv = append(argv, "--ro-bind", "/usr", "/usr")
	argv = append(argv, systemLinks()...)
	binds := dedupe(ro)
	if privileged { // bwrap makes a bind's missing parents 0700 (root's): the kernel's user must pass
		argv = append(argv, parentDirs(append(slices.Clone(binds), dir, o.Workspace))...)
	}
	for _, p := range binds {
		argv = append(argv, "--ro-bind", p, p)
	}
	argv = append(argv, "--bind", dir, dir, "--bind", o.Workspace, o.Workspace, "--chdir", o.Workspace)
	// {connection_file} is filled in by kernel.Launch; it lives outside the sandbox's tree (privileged:
	// bound into the runtime folder, whose parents the kernel's user can pass).
	kernelArgv := spec.Argv
	if privileged {
		inside := filepath.Join(dir, "connection.json")
		argv = append(argv, "--ro-bind", "{connection_file}", inside)
		kernelArgv = make([]string, len(spec.Argv))
		for i, a := range spec.Argv {
			kernelArgv[i] = strings.ReplaceAll(a, "{connection_file}", inside)
		}
	} else {
		argv = append(argv, "--ro-bind", "{connection_file}", "{connection_file}")
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		argv = append(argv, "--setenv", k, env[k])
	}
	argv = append(argv, "--")
	argv = append(argv, dropTo(o.UID, o.GID, privileged)...)
	argv = append(argv, kernelArgv...)
	// env -i: bwrap itself (pid 1 in the sandbox, /proc/1/environ) gets no environment either.
	wrapped := append([]string{"/usr/bin/env", "-i"}, o.LimitArgv(append([]string{bwrap}, argv...))...)

	hostUID := os.Geteuid() // unprivileged: the user namespace maps o.UID to the caller
	if privileged {
		hostUID = o.UID
		// the connection file (filled in at launch, root's, 0600) must be readable by the kernel's user
		wrapped = append([]string{"/bin/sh", "-c", `chown "$0" "$1" && shift && exec "$@"`,
			strconv.Itoa(o.UID) + ":" + strconv.Itoa(o.GID), "{connection_file}"}, wrapped...)
	}
	s.Info = Info{Sealed: true, Method: "bwrap", UID: o.UID, HostUID: hostUID, HostUIDNote: rootNote, Network: "none", Env: names,
		Writable: []string{o.Workspace}, MemoryMax: o.MemoryBytes, FilesMax: o.MaxFiles,
		FileMax: o.FileBytes, CPUMax: o.CPUSeconds, WorkspaceMax: o.WorkspaceBytes, WorkspaceEntriesMax: o.WorkspaceEntries}
	if cg, err := pidsCgroup(dir, o.MaxProcs); err == nil {
		s.cgroup = cg
		// join the cgroup before exec: every process of the sandbox is counted
		wrapped = append([]string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(cg, "cgroup.procs")}, wrapped...)
		s.Info.PidsMax = o.MaxProcs
	} else {
		s.Info.PidsNote = err.Error()
	}
	sealed := spec
	sealed.Argv = wrapped
	sealed.Env = nil                 // nothing from the spec's env reaches the kernel but what Options.Env says
	sealed.InterruptMode = "message" // a signal to the process group would reach bwrap, not the kernel
	s.Spec = sealed
	return s, nil
}

// Close removes the runtime folder and the pids cgroup (once the kernel is gone).
func (s *Sandbox) Close() error {
	if s == nil {
		return nil
	}
	if s.stopWatch != nil {
		s.stopWatch()
	}
	var errs []error
	if s.cgroup != "" {
		// the kernel's processes may take a moment to leave after a kill
		for i := 0; ; i++ {
			err := os.Remove(s.cgroup)
			if err == nil || os.IsNotExist(err) || i == 50 {
				if err != nil && !os.IsNotExist(err) {
					errs = append(errs, fmt.Errorf("seal: remove cgroup: %w", err))
				}
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// baseFlags are bwrap's namespaces and mounts. Run by root (privileged), bwrap builds them with its own
// privileges and the kernel is then dropped to uid on the host too (dropTo): a user namespace would map
// the sandbox's uid to root, so an escape would be root. Run by anyone else, a user namespace maps uid
// to the caller, who is unprivileged already.
func baseFlags(uid, gid int, privileged bool) []string {
	var f []string
	if !privileged {
		f = []string{"--unshare-user", "--uid", strconv.Itoa(uid), "--gid", strconv.Itoa(gid)}
	}
	return append(f, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--hostname", "sealed", "--die-with-parent", "--new-session", "--clearenv",
		"--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp")
}

// dropTo is what runs the kernel as uid:gid with no capabilities and no supplementary groups, where
// bwrap ran as root (privileged); nothing otherwise.
func dropTo(uid, gid int, privileged bool) []string {
	if !privileged {
		return nil
	}
	return []string{"/usr/bin/setpriv", "--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid),
		"--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"}
}

// parentDirs are bwrap ops making every missing parent of paths 0755, parents first.
func parentDirs(paths []string) []string {
	seen := map[string]bool{"/": true, "/usr": true, "/tmp": true}
	var dirs []string
	for _, p := range paths {
		var chain []string
		for d := filepath.Dir(filepath.Clean(p)); !seen[d] && d != "." && !strings.HasPrefix(d, "/usr/"); d = filepath.Dir(d) {
			seen[d] = true
			chain = append(chain, d)
		}
		slices.Reverse(chain)
		dirs = append(dirs, chain...)
	}
	var out []string
	for _, d := range dirs {
		out = append(out, "--perms", "0755", "--dir", d)
	}
	return out
}

// chownTree gives the workspace to the kernel's user, links themselves and never what they point to (the
// workspace may hold an earlier run's links, and chains no path can name: walkBeneath).
func chownTree(root string, uid, gid int) error {
	err := os.Lchown(root, uid, gid)
	if err == nil {
		err = walkBeneath(root, func(r *os.Root, name string, _ fs.FileInfo) error { return r.Lchown(name, uid, gid) })
	}
	if err != nil {
		return fmt.Errorf("seal: give the workspace to uid %d: %w", uid, err)
	}
	return nil
}

// systemLinks recreates /bin, /lib, /lib64 and /sbin: symlinks into /usr where the host has them.
func systemLinks() []string {
	var out []string
	for _, d := range []string{"/bin", "/lib", "/lib64", "/sbin"} {
		if t, err := os.Readlink(d); err == nil {
			out = append(out, "--symlink", t, d)
		} else if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, "--ro-bind", d, d)
		}
	}
	return out
}

// etcFiles are the few /etc entries the dynamic loader and Python need; no secrets among them.
func etcFiles() []string {
	var out []string
	for _, p := range []string{"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
		"/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/mime.types"} {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// pythonRoots asks the interpreter where it and its packages live (prefixes, sys.path): bound read-only.
func pythonRoots(ctx context.Context, python, pythonPath string) ([]string, error) {
	cmd := exec.CommandContext(ctx, python, "-I", "-c",
		"import sys, site; print('\\n'.join([sys.prefix, sys.base_prefix, sys.exec_prefix] + sys.path))")
	if pythonPath != "" {
		cmd = exec.CommandContext(ctx, python, "-c",
			"import sys; print('\\n'.join([sys.prefix, sys.base_prefix, sys.exec_prefix] + sys.path))")
		cmd.Env = []string{"PYTHONPATH=" + pythonPath, "PATH=/usr/bin:/bin"}
	}
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("seal: ask %s for its paths: %w", python, err)
	}
	var roots []string
	if p, err := filepath.EvalSymlinks(python); err == nil {
		roots = append(roots, filepath.Dir(filepath.Dir(p)))
	}
	venv := filepath.Dir(filepath.Dir(python))
	roots = append(roots, venv)
	if real, err := filepath.EvalSymlinks(venv); err == nil && real != venv {
		roots = append(roots, real)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || !filepath.IsAbs(l) {
			continue
		}
		if _, err := os.Stat(l); err == nil {
			roots = append(roots, l)
			if real, err := filepath.EvalSymlinks(l); err == nil && real != l {
				roots = append(roots, real)
			}
		}
	}
	return roots, nil
}

// dedupe drops paths inside another listed path (bwrap would bind them twice) and keeps the order stable.
func dedupe(paths []string) []string {
	clean := make([]string, 0, len(paths))
	for _, p := range paths {
		p = filepath.Clean(p)
		if p == "/" || p == "/usr" || strings.HasPrefix(p, "/usr/") {
			continue // /usr is bound whole; "/" would unseal everything
		}
		clean = append(clean, p)
	}
	sort.Strings(clean)
	clean = slices.Compact(clean)
	var out []string
	for _, p := range clean {
		if n := len(out); n > 0 && strings.HasPrefix(p, out[n-1]+"/") {
			continue
		}
		out = append(out, p)
	}
	return out
}

// pidsCgroup makes a pids cgroup (v1 controller or v2 unified) limited to max processes, if writable.
func pidsCgroup(dir string, max int) (string, error) {
	name := "pyrualean-" + filepath.Base(dir)
	for _, base := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
			continue
		}
		cg := filepath.Join(base, name)
		if err := os.Mkdir(cg, 0o755); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(cg, "pids.max"), []byte(strconv.Itoa(max)), 0o644); err != nil {
			os.Remove(cg)
			continue
		}
		return cg, nil
	}
	return "", errors.New("no writable pids cgroup: the process count is not limited (RLIMIT_NPROC does not bind a root-mapped uid)")
}

// Package raycluster runs a real Ray cluster on this machine, for the Ray engine's tests and
// benchmark: `ray start --head` on loopback with the dashboard (the Job Submission API), and
// `ray stop --force` with a check that none of its processes is left. For a second node (nodes.go),
// NewTestNet joins a network namespace of its own to the head's by a veth pair on a private test /24,
// and AddNode starts a worker node there, which a test can kill whole.
//
// Ray binds the machine's own address besides the ports it is given, and `ray stop` ends every Ray
// process it can see, so the cluster runs in namespaces of its own: Reexec runs a command in a fresh
// network namespace (only loopback, up) and pid namespace (`unshare`, as root), and Start refuses to
// run anywhere else. The client and the cluster both live inside.
package raycluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pyrualean/pyrualean/eval/rayjob"
)

// namespaceEnv marks the namespaces' first process (and so everything in them).
const namespaceEnv = "PYRUALEAN_RAY_NAMESPACE"

// clusterEnv is set in the cluster's environment, so its processes (and the episodes and kernels
// they start) can be found by it, and nothing else can be mistaken for them.
const clusterEnv = "PYRUALEAN_RAY_CLUSTER"

// Ports of the cluster: outside 10002-19999, Ray's worker-port range.
const (
	GCSPort          = 26379
	DashboardPort    = 28265
	ClientServerPort = 20001
)

// Reexec returns a command running argv in fresh network and pid namespaces, with loopback up and
// a shell as the namespace's init (it reaps the orphans a killed Ray worker leaves). It needs root
// (or the capability to unshare) and the `unshare` and `ip` commands.
func Reexec(ctx context.Context, argv ...string) (*exec.Cmd, error) {
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("raycluster: %s: %w", tool, err)
		}
	}
	script := `ip link set lo up && "$@"; rc=$?; exit $rc`
	args := append([]string{"--net", "--pid", "--fork", "--mount-proc", "--kill-child", "bash", "-c", script, "pyrualean-ray-ns"}, argv...)
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Env = append(os.Environ(), namespaceEnv+"=1")
	return cmd, nil
}

// InNamespace says whether this process runs in namespaces Reexec made.
func InNamespace() bool {
	env, err := os.ReadFile("/proc/1/environ")
	return err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+namespaceEnv+"=1\x00"))
}

// Options are a cluster's settings.
type Options struct {
	Ray     string   // the ray command (default: ray on PATH)
	CPUs    int      // default 2
	TempDir string   // Ray's --temp-dir (sessions, logs, sockets); required
	Env     []string // the cluster's environment (default os.Environ()); nodes run episodes with it
	Log     *os.File // ray start's output (default: discarded)
	NodeIP  string   // the head's address (default 127.0.0.1; a test network's for a second node)
}

// Cluster is a running one-node cluster.
type Cluster struct {
	Address string // the dashboard, http://127.0.0.1:DashboardPort
	opts    Options
	env     []string
}

// Start starts the head node and waits for its dashboard.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if !InNamespace() {
		return nil, errors.New("raycluster: not in a namespace of its own (run under raycluster.Reexec): ray would bind this machine's address and `ray stop` end other Ray processes")
	}
	if o.TempDir == "" {
		return nil, errors.New("raycluster: no TempDir")
	}
	if o.Ray == "" {
		o.Ray = "ray"
	}
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	c := &Cluster{Address: fmt.Sprintf("http://127.0.0.1:%d", DashboardPort), opts: o,
		env: append(slices.Clone(env), clusterEnv+"="+o.TempDir, "RAY_USAGE_STATS_ENABLED=0")}
	if o.NodeIP == "" {
		o.NodeIP = "127.0.0.1"
	}
	cmd := exec.CommandContext(ctx, o.Ray, "start", "--head", "--node-ip-address", o.NodeIP,
		"--num-cpus", strconv.Itoa(o.CPUs), "--num-gpus", "0", "--port", strconv.Itoa(GCSPort),
		"--dashboard-host", "127.0.0.1", "--dashboard-port", strconv.Itoa(DashboardPort),
		"--ray-client-server-port", strconv.Itoa(ClientServerPort), "--include-dashboard", "true",
		"--object-store-memory", strconv.Itoa(256<<20), "--temp-dir", o.TempDir, "--disable-usage-stats")
	cmd.Env = c.env
	if o.Log != nil {
		cmd.Stdout, cmd.Stderr = o.Log, o.Log
	}
	if err := cmd.Run(); err != nil {
		c.Stop(context.Background())
		return nil, fmt.Errorf("raycluster: ray start: %w", err)
	}
	client, err := rayjob.New(c.Address)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := client.Version(vctx)
		cancel()
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.Stop(context.Background())
			return nil, fmt.Errorf("raycluster: the dashboard does not answer: %w", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Env is the cluster's environment (what its nodes run episodes with).
func (c *Cluster) Env() []string { return c.env }

// Stop runs `ray stop --force` and waits (up to 30 s) for the cluster's processes to end. It
// returns those still alive then (and ends them), as strays: a clean shutdown returns none.
func (c *Cluster) Stop(ctx context.Context) ([]Process, error) {
	cmd := exec.CommandContext(ctx, c.opts.Ray, "stop", "--force")
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("raycluster: ray stop: %w\n%s", err, out)
	}
	var left []Process
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if left = c.Processes(); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, p := range left {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	return left, err
}

// Process is a live process of the cluster.
type Process struct {
	PID     int
	Cmdline string
}

func (p Process) String() string { return fmt.Sprintf("%d %s", p.PID, p.Cmdline) }

// Processes lists the live (not zombie) processes of the cluster: those whose environment names it.
func (c *Cluster) Processes() []Process {
	return append(processesMarked(c.opts.TempDir), processesMarked(c.opts.TempDir+"#node2")...)
}

// processesMarked lists the live processes whose environment says clusterEnv=value.
func processesMarked(value string) []Process {
	mark := []byte("\x00" + clusterEnv + "=" + value + "\x00")
	var out []Process
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), mark) || zombie(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, Process{PID: pid, Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))})
	}
	return out
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // gone
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

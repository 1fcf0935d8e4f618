package raycluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// TestNet is a private test network inside Reexec's namespaces: the head's namespace on one end of a
// veth pair, a second network namespace (held by a sleeping process) on the other. Only the
// addresses of its /24 are used; nothing else is touched, and it goes with the namespaces.
type TestNet struct {
	HeadIP, NodeIP string
	holder         *exec.Cmd // keeps the second namespace alive
}

// NewTestNet makes the pair on prefix (e.g. "10.213.0.0/24"): .1 here, .2 in the new namespace.
func NewTestNet(ctx context.Context, prefix string) (*TestNet, error) {
	if !InNamespace() {
		return nil, errors.New("raycluster: a test network only inside Reexec's namespaces")
	}
	p, err := netip.ParsePrefix(prefix)
	if err != nil || !p.Addr().Is4() || p.Bits() != 24 || !p.Addr().IsPrivate() {
		return nil, fmt.Errorf("raycluster: test network %q: want a private IPv4 /24", prefix)
	}
	a := p.Masked().Addr().As4()
	a[3] = 1
	head := netip.AddrFrom4(a)
	a[3] = 2
	node := netip.AddrFrom4(a)
	holder := exec.Command("unshare", "--net", "sleep", "infinity")
	if err := holder.Start(); err != nil {
		return nil, fmt.Errorf("raycluster: second namespace: %w", err)
	}
	n := &TestNet{HeadIP: head.String(), NodeIP: node.String(), holder: holder}
	pid := strconv.Itoa(holder.Process.Pid)
	steps := [][]string{
		{"ip", "link", "add", "pyrray0", "type", "veth", "peer", "name", "pyrray1"},
		{"ip", "link", "set", "pyrray1", "netns", pid},
		{"ip", "addr", "add", head.String() + "/24", "dev", "pyrray0"},
		{"ip", "link", "set", "pyrray0", "up"},
		n.In("ip", "link", "set", "lo", "up"),
		n.In("ip", "addr", "add", node.String()+"/24", "dev", "pyrray1"),
		n.In("ip", "link", "set", "pyrray1", "up"),
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			n.Close()
			return nil, fmt.Errorf("raycluster: %s: %w\n%s", strings.Join(s, " "), err, out)
		}
	}
	return n, nil
}

// In is argv run in the second node's network namespace.
func (n *TestNet) In(argv ...string) []string {
	return append([]string{"nsenter", "--net=/proc/" + strconv.Itoa(n.holder.Process.Pid) + "/ns/net"}, argv...)
}

// Close ends the namespace's holder (the veth pair goes with the namespace).
func (n *TestNet) Close() {
	_ = n.holder.Process.Kill()
	_ = n.holder.Wait()
}

// Node is a worker node of the cluster, in the test network's second namespace.
type Node struct {
	mark string // its processes' clusterEnv value
	c    *Cluster
}

// Ports of a worker node (its own namespace): outside 10002-19999 too.
const (
	nodeManagerPort   = 20100
	objectManagerPort = 20101
)

// AddNode starts a worker node with cpus CPUs in n's second namespace, joined to the head at
// HeadIP:GCSPort (the head must have been started with NodeIP = n.HeadIP).
func (c *Cluster) AddNode(ctx context.Context, n *TestNet, cpus int) (*Node, error) {
	mark := c.opts.TempDir + "#node2"
	env := slices.DeleteFunc(slices.Clone(c.env), func(kv string) bool { return strings.HasPrefix(kv, clusterEnv+"=") })
	env = append(env, clusterEnv+"="+mark)
	argv := n.In(c.opts.Ray, "start", "--address", fmt.Sprintf("%s:%d", n.HeadIP, GCSPort), "--node-ip-address", n.NodeIP,
		"--num-cpus", strconv.Itoa(cpus), "--num-gpus", "0", "--object-store-memory", strconv.Itoa(256<<20),
		"--node-manager-port", strconv.Itoa(nodeManagerPort), "--object-manager-port", strconv.Itoa(objectManagerPort),
		"--disable-usage-stats")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	if c.opts.Log != nil {
		cmd.Stdout, cmd.Stderr = c.opts.Log, c.opts.Log
	}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("raycluster: ray start on the second node: %w", err)
	}
	return &Node{mark: mark, c: c}, nil
}

// Processes lists the node's live processes (its raylet, workers, and what they started).
func (nd *Node) Processes() []Process { return processesMarked(nd.mark) }

// Kill ends the whole node at once (SIGKILL to its raylet and every process of it), as a machine lost.
func (nd *Node) Kill() []Process {
	ps := nd.Processes()
	for _, p := range ps {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	return ps
}

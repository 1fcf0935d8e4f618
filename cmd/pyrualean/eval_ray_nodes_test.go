package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/eval/raycluster"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/robotapi"
)

// TestEvalRayNodes: `eval --engine ray` on a real two-node Ray cluster, each node in a network
// namespace of its own, joined by a veth pair on a private test network the test makes (10.213.0.0/24,
// nothing else), the head in one. An 8-episode replay suite runs across both; the Ray worker of one
// episode is killed mid-episode, then the second node (its raylet and every process of it) mid-suite,
// then eval is stopped (Ctrl-C: its suite cancelled on the service) before the killed node's episode is retried and the
// same command is run again. Every episode must finish once over both runs (one run folder, one finish
// event, completed), the killed ones retried and their attempts counted, episodes landing on both nodes
// (the manifest's node id, and result.json's).
func TestEvalRayNodes(t *testing.T) {
	if os.Getenv(rayTestNode) == "" {
		nbtest.Heavy(t, "a two-node Ray cluster running episodes")
		if os.Geteuid() != 0 {
			t.Skip("needs root: the nodes run in network and pid namespaces of their own (unshare)")
		}
		bin := filepath.Join(t.TempDir(), "bin", "pyrualean")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
		defer cancel()
		cmd, err := raycluster.Reexec(ctx, os.Args[0], "-test.run=^TestEvalRayNodes$", "-test.v", "-test.count=1", "-test.timeout=8m")
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, rayTestNode+"="+bin)
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("in the namespaces (%.0f s):\n%s", time.Since(t0).Seconds(), out)
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestEvalRayNodes")) {
			t.Fatalf("the test in its namespaces: %v", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	cl, node, nodes := startTwoNodes(t, ctx)
	stopped := false
	defer func() {
		if !stopped {
			cl.Stop(context.Background())
		}
	}()

	// Kill the worker of the first episode to boot its kernel; then, once an episode runs on the
	// second node with its kernel up, the whole second node.
	killed := make(chan rayKill, 1)
	nodeKilled := make(chan rayKill, 1)
	stop := make(chan struct{})
	dir := t.TempDir()
	node2 := ""
	for id, name := range nodes {
		if name == "node2" {
			node2 = id
		}
	}
	// Then Ctrl-C (the suite cancelled on the service mid-suite, the killed node's episode not yet
	// retried), and the same command again.
	cctx, ctrlC := context.WithCancel(ctx)
	defer ctrlC()
	go func() {
		killRayWorker(killed, stop)
		skip := 0
		select {
		case k := <-killed:
			skip = k.episode
			killed <- k
		default:
		}
		killNode(node, dir, node2, skip, nodeKilled, stop)
		select {
		case <-stop:
		case <-time.After(500 * time.Millisecond):
			ctrlC()
		}
	}()
	matrix := []string{"--runtime", "replay", "--tasks", "stack_blocks,open_drawer", "--seeds", "0,1", "--arms", "cells,tools", "--images", "none"}
	args := append(matrix, "--engine", "ray", "--ray-address", cl.Address, "--retry-backoff-s", "0.5", "--json", "--out", dir)
	var stdout, stderr bytes.Buffer
	t0 := time.Now()
	code := cmdEval(cctx, args, &stdout, &stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "run the same command again to resume") {
		close(stop)
		t.Fatalf("Ctrl-C after the node was killed: exit %d (the suite should have been stopped mid-way)\n%s", code, stderr.String())
	}
	t.Logf("stopped by Ctrl-C after %.1f s; the same command again", time.Since(t0).Seconds())
	var stderr2 bytes.Buffer
	code = cmdEval(ctx, args, &stdout, &stderr2)
	close(stop)
	t.Logf("suite: %.1f s", time.Since(t0).Seconds())
	if code != 0 {
		t.Fatalf("ray eval after Ctrl-C: exit %d\n%s", code, stderr2.String())
	}
	var wk, nk rayKill
	select {
	case wk = <-killed:
	default:
		t.Fatal("no Ray worker was killed mid-episode")
	}
	select {
	case nk = <-nodeKilled:
	default:
		t.Fatal("the second node was never seen running an episode, so never killed")
	}
	t.Logf("killed worker %d running %s; killed the second node (%d processes) while it ran %s", wk.worker, wk.id, nk.worker, nk.id)

	// Over both runs each episode finishes once; the attempts the Ctrl-C cut end as interrupted (and ran
	// again in the second run).
	finishes, cut := map[string]int{}, map[string]int{}
	for line := range strings.Lines(stdout.String()) {
		var ev eval.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		switch {
		case ev.Kind == eval.EventFinish && ev.Status == agent.StatusInterrupted:
			cut[ev.ID]++
		case ev.Kind == eval.EventFinish:
			finishes[ev.ID]++
		}
	}
	t.Logf("attempts the Ctrl-C cut: %v", cut)
	m, err := eval.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]int{}
	for _, id := range m.Order {
		st := m.Episodes[id]
		t.Logf("%-60s node %s (%s) attempts %d %s", id, st.Node, nodes[st.Node], st.Attempts, st.Status)
		used[st.Node]++
		if st.Status != agent.StatusCompleted || finishes[id] != 1 {
			t.Errorf("%s: %s, %d finish events", id, st.Status, finishes[id])
		}
		want := 1
		if id == wk.id || id == nk.id {
			want = 2
		}
		if st.Attempts < want {
			t.Errorf("%s: %d attempts, want at least %d", id, st.Attempts, want)
		}
		if _, ok := nodes[st.Node]; !ok {
			t.Errorf("%s: node %q is not a node of the cluster %v", id, st.Node, nodes)
		}
		// the run folder says where it ran too (the attempt whose folder landed)
		if r, err := readResult(filepath.Join(dir, filepath.FromSlash(st.Dir))); err != nil {
			t.Errorf("%s: %v", id, err)
		} else if r.Host.Node != st.Node {
			t.Errorf("%s: result.json host.node %q, manifest %q", id, r.Host.Node, st.Node)
		}
	}
	if len(m.Order) != 8 || len(resultFiles(t, dir)) != 8 {
		t.Errorf("%d episodes, %d run folders; want 8 and 8", len(m.Order), len(resultFiles(t, dir)))
	}
	if len(used) < 2 {
		t.Errorf("episodes landed on %d node(s): %v", len(used), used)
	}
	if st := m.Episodes[nk.id]; st != nil && nodes[st.Node] != "head" {
		t.Errorf("%s finished on %s after its node was killed", nk.id, nodes[st.Node])
	}
	// --status says where episodes finished and which were retried.
	var st bytes.Buffer
	if code := cmdEval(ctx, []string{"--status", dir}, &st, &bytes.Buffer{}); code != 0 {
		t.Errorf("--status: exit %d", code)
	}
	t.Logf("--status:\n%s", st.String())
	for id, name := range nodes {
		if name == "head" && !strings.Contains(st.String(), id[:8]+"=") {
			t.Errorf("--status does not count the head's episodes")
		}
	}
	if !strings.Contains(st.String(), "retried "+nk.id+": ") {
		t.Errorf("--status does not name the retried episode %s", nk.id)
	}
	stopped = true
	if strays, err := cl.Stop(ctx); err != nil || len(strays) > 0 {
		t.Errorf("ray stop --force: %v; processes left: %v", err, strays)
	}
}

// startTwoNodes starts the head (1 CPU) on the test network's first address and a worker node (1
// CPU) in its second namespace, and returns the nodes' ids ("head", "node2").
func startTwoNodes(t *testing.T, ctx context.Context) (*raycluster.Cluster, *raycluster.Node, map[string]string) {
	t.Helper()
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv(rayTestNode)
	env := append(slices.Clone(os.Environ()), "PATH="+filepath.Dir(bin)+":"+filepath.Join(root, ".venv", "bin")+":"+os.Getenv("PATH"),
		"PYRUALEAN_ROOT="+root, "RAY_health_check_period_ms=1000", "RAY_health_check_failure_threshold=3")
	rayTmp, err := os.MkdirTemp("", "ray-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rayTmp) })
	nodeTmp := filepath.Join(rayTmp, "node-tmp")
	os.Mkdir(nodeTmp, 0o755)
	env = append(env, "TMPDIR="+nodeTmp)
	tn, err := raycluster.NewTestNet(ctx, "10.213.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tn.Close)
	logf, _ := os.Create(filepath.Join(t.TempDir(), "ray-start.log"))
	t0 := time.Now()
	cl, err := raycluster.Start(ctx, raycluster.Options{Ray: filepath.Join(root, ".venv", "bin", "ray"), CPUs: 1, TempDir: rayTmp, Env: env, Log: logf, NodeIP: tn.HeadIP})
	if err != nil {
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("%v\n%s", err, b)
	}
	node, err := cl.AddNode(ctx, tn, 1)
	if err != nil {
		b, _ := os.ReadFile(logf.Name())
		cl.Stop(context.Background())
		t.Fatalf("%v\n%s", err, b)
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		ids := rayNodes(cl.Address)
		names := map[string]string{}
		for id, ip := range ids {
			switch ip {
			case tn.HeadIP:
				names[id] = "head"
			case tn.NodeIP:
				names[id] = "node2"
			}
		}
		if len(names) == 2 {
			t.Logf("two nodes up in %.1fs: %v", time.Since(t0).Seconds(), names)
			return cl, node, names
		}
		if time.Now().After(deadline) {
			cl.Stop(context.Background())
			t.Fatalf("the cluster's alive nodes: %v", ids)
		}
	}
}

// rayNodes asks the dashboard's state API for the alive nodes: id → address.
func rayNodes(addr string) map[string]string {
	resp, err := http.Get(strings.TrimRight(addr, "/") + "/api/v0/nodes")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result struct {
				Result []struct {
					NodeID string `json:"node_id"`
					NodeIP string `json:"node_ip"`
					State  string `json:"state"`
				} `json:"result"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil {
		return nil
	}
	out := map[string]string{}
	for _, n := range body.Data.Result.Result {
		if n.State == "ALIVE" {
			out[n.NodeID] = n.NodeIP
		}
	}
	return out
}

// killNode kills the whole second node once it has finished an episode (so episodes land on both
// nodes) and one of its episodes has its kernel up (not skip, the episode of a worker killed before),
// and says which episode it was running (worker: how many processes went).
func killNode(node *raycluster.Node, dir, nodeID string, skip int, killed chan<- rayKill, stop <-chan struct{}) {
	for finished := false; ; {
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		if !finished {
			m, err := eval.ReadManifest(dir)
			for _, st := range mapsValues(m, err) {
				finished = finished || (st.Node == nodeID && st.Status == agent.StatusCompleted)
			}
			continue
		}
		for _, p := range node.Processes() {
			args := strings.Fields(p.Cmdline)
			i := slices.Index(args, "--job")
			if p.PID == skip || len(args) < 2 || args[1] != "episode" || i < 0 || i+1 >= len(args) || len(childrenOf(p.PID)) == 0 {
				continue
			}
			parent := readFile(fmt.Sprintf("/proc/%d/cmdline", parentOf(p.PID)))
			var job eval.NodeJob
			if !bytes.HasPrefix(parent, []byte("ray::")) || json.Unmarshal(readFile(args[i+1]), &job) != nil || job.Episode.ID == "" {
				continue
			}
			gone := node.Kill()
			killed <- rayKill{id: job.Episode.ID, worker: len(gone), episode: p.PID}
			return
		}
	}
}

func mapsValues(m *eval.Manifest, err error) []*eval.EpisodeState {
	if err != nil || m == nil {
		return nil
	}
	return slices.Collect(maps.Values(m.Episodes))
}

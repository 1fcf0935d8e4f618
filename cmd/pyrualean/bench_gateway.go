package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
)

// benchGateway compares our gateway with Jupyter Kernel Gateway 3.0.1 and jupyter_server in the same
// run, through the same WebSocket client: the round trip of `1+1`, throughput with N kernels each
// driven by its own client, kernel start time, and the server's own RSS per kernel (kernels excluded).
func benchGateway(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return benchGatewayWith(ctx, "", args, stdout, stderr)
}

// benchGatewayWith runs the bench with selfBin as the pyrualean binary that serves ours ("" = this one).
func benchGatewayWith(ctx context.Context, selfBin string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench gateway", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON {rows:[{name,unit,better,ours,kernel_gateway,jupyter_server}]}")
	levels := fs.String("kernels", "1,16,64", "kernel counts for the throughput rows (ascending)")
	rounds := fs.Int("n", 200, "timed 1+1 round trips for the latency rows")
	dur := fs.Duration("duration", 5*time.Second, "how long each throughput level runs")
	conc := fs.Int("start-concurrency", 4, "kernels started at once (2 cores: keep it small)")
	load := fs.Int("load", 0, "also run a load row: each kernel of the largest --kernels level does this many executes (e.g. 200); throughput and p50/p99")
	servers := fs.String("servers", "ours,kernel_gateway,jupyter_server", "which servers to run")
	kname := fs.String("kernel", "pyrualean", "kernelspec name")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	var ns []int
	for _, p := range strings.Split(*levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || (len(ns) > 0 && n <= ns[len(ns)-1]) {
			fmt.Fprintf(stderr, "pyrualean bench gateway: --kernels wants ascending positive counts, got %q\n", *levels)
			return 2
		}
		ns = append(ns, n)
	}
	if fs.NArg() > 0 || *rounds < 1 || *dur <= 0 || *conc < 1 || *load < 0 {
		fmt.Fprintln(stderr, "pyrualean bench gateway: usage: pyrualean bench gateway [--json] [--kernels 1,16,64] [--n 200] [--duration 5s] [--start-concurrency 4] [--load 200] [--servers ours,kernel_gateway,jupyter_server]")
		return 2
	}
	root, err := benchRepoRoot()
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench gateway: %v\n", err)
		return 1
	}
	self := selfBin
	if self == "" {
		if self, err = os.Executable(); err != nil {
			fmt.Fprintf(stderr, "pyrualean bench gateway: %v\n", err)
			return 1
		}
	}
	cfg := gwBenchConfig{levels: ns, load: *load, rounds: *rounds, dur: *dur, conc: *conc, kernel: *kname, log: stderr}
	results := map[string]*gwBenchResult{}
	var order []string
	for _, name := range strings.Split(*servers, ",") {
		name = strings.TrimSpace(name)
		srv, err := startBenchServer(ctx, name, root, self)
		if err != nil {
			fmt.Fprintf(stderr, "pyrualean bench gateway: %s: %v\n", name, err)
			return 1
		}
		fmt.Fprintf(stderr, "bench gateway: %s on %s (pid %d)\n", name, srv.url, srv.pid)
		res, err := runGatewayBench(ctx, srv, cfg)
		srv.stop()
		if err != nil {
			// An anchor that fails (e.g. times out on a loaded machine) leaves its rows null; ours failing fails the bench.
			fmt.Fprintf(stderr, "pyrualean bench gateway: %s: %v\n", name, err)
			if name == "ours" {
				return 1
			}
			continue
		}
		results[name] = res
		order = append(order, name)
	}
	rows := gwRows(results, ns, *load)
	if *asJSON {
		return printJSON(stdout, map[string]any{"rows": rows})
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tunit\tours\tkernel_gateway\tjupyter_server\tours vs KG\tours vs JS\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Name, r.Unit, fmtNum(r.Ours), fmtNum(r.KernelGateway), fmtNum(r.JupyterServer),
			ratio(r.Ours, r.KernelGateway, r.Better), ratio(r.Ours, r.JupyterServer, r.Better))
	}
	tw.Flush()
	fmt.Fprintln(stdout, "(ratios: how many times better ours is; >1 = ours better)")
	return 0
}

type gwRow struct {
	Name          string   `json:"name"`
	Unit          string   `json:"unit"`
	Better        string   `json:"better"`
	Ours          *float64 `json:"ours"`
	KernelGateway *float64 `json:"kernel_gateway"`
	JupyterServer *float64 `json:"jupyter_server"`
}

func gwRows(res map[string]*gwBenchResult, levels []int, load int) []gwRow {
	get := func(name string, f func(*gwBenchResult) (float64, bool)) *float64 {
		r := res[name]
		if r == nil {
			return nil
		}
		v, ok := f(r)
		if !ok {
			return nil
		}
		v = float64(int64(v*1000+0.5)) / 1000
		return &v
	}
	row := func(name, unit, better string, f func(*gwBenchResult) (float64, bool)) gwRow {
		return gwRow{Name: name, Unit: unit, Better: better, Ours: get("ours", f), KernelGateway: get("kernel_gateway", f), JupyterServer: get("jupyter_server", f)}
	}
	rows := []gwRow{
		row("ws_roundtrip_1plus1_p50", "ms", "lower", func(r *gwBenchResult) (float64, bool) { return r.rttP50, r.rttP50 > 0 }),
		row("ws_roundtrip_1plus1_p99", "ms", "lower", func(r *gwBenchResult) (float64, bool) { return r.rttP99, r.rttP99 > 0 }),
	}
	for _, n := range levels {
		rows = append(rows, row(fmt.Sprintf("throughput_%d_kernels", n), "exec/s", "higher", func(r *gwBenchResult) (float64, bool) {
			v, ok := r.throughput[n]
			return v, ok
		}))
	}
	if load > 0 {
		top := levels[len(levels)-1]
		name := fmt.Sprintf("load_%dx%d", top, load)
		rows = append(rows,
			row(name+"_throughput", "exec/s", "higher", func(r *gwBenchResult) (float64, bool) { return r.loadRate, r.loadRate > 0 }),
			row(name+"_p50", "ms", "lower", func(r *gwBenchResult) (float64, bool) { return r.loadP50, r.loadP50 > 0 }),
			row(name+"_p99", "ms", "lower", func(r *gwBenchResult) (float64, bool) { return r.loadP99, r.loadP99 > 0 }))
	}
	rows = append(rows,
		row("kernel_start_to_first_result_p50", "ms", "lower", func(r *gwBenchResult) (float64, bool) { return r.startP50, r.startP50 > 0 }),
		row(fmt.Sprintf("server_rss_per_kernel_at_%d", levels[len(levels)-1]), "MiB", "lower", func(r *gwBenchResult) (float64, bool) { return r.rssPerKernel, r.rssOK }),
		row("server_rss_idle", "MiB", "lower", func(r *gwBenchResult) (float64, bool) { return r.rssIdle, r.rssIdle > 0 }),
	)
	return rows
}

func fmtNum(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}

// ratio says how many times better ours is than the anchor, in the row's direction.
func ratio(ours, anchor *float64, better string) string {
	if ours == nil || anchor == nil || *ours <= 0 || *anchor <= 0 {
		return "-"
	}
	r := *anchor / *ours
	if better == "higher" {
		r = *ours / *anchor
	}
	return fmt.Sprintf("%.2fx", r)
}

type gwBenchConfig struct {
	levels []int
	load   int // executes per kernel for the load row at the largest level (0 = none)
	rounds int
	dur    time.Duration
	conc   int
	kernel string
	log    io.Writer
}

type gwBenchResult struct {
	rttP50, rttP99        float64
	throughput            map[int]float64
	startP50              float64
	rssIdle, rssPerKernel float64
	rssOK                 bool
	loadRate              float64 // load row: executes per second over all kernels
	loadP50, loadP99      float64 // load row: per-execute round trip, ms
}

// benchServer is one server process under test.
type benchServer struct {
	name, url, token string
	pid              int
	stop             func()
}

func benchRepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				if _, err := os.Stat(filepath.Join(dir, ".venv", "bin", "python")); err == nil {
					return dir, nil
				}
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("cannot find the repository root with .venv (run from the checkout after scripts/setup.sh)")
}

func benchFreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startBenchServer starts one server with a token on a free loopback port and waits for /api.
func startBenchServer(ctx context.Context, name, root, self string) (*benchServer, error) {
	port, err := benchFreePort()
	if err != nil {
		return nil, err
	}
	token := strings.ReplaceAll(uuid.NewString(), "-", "")
	jupyter := filepath.Join(root, ".venv", "bin", "jupyter")
	tmp, err := os.MkdirTemp("", "pyrualean-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	var argv []string
	switch name {
	case "ours":
		argv = []string{self, "serve", "--port", strconv.Itoa(port), "--token", token}
	case "kernel_gateway":
		argv = []string{jupyter, "kernelgateway", "--KernelGatewayApp.ip=127.0.0.1", "--KernelGatewayApp.port=" + strconv.Itoa(port),
			"--KernelGatewayApp.auth_token=" + token, "--JupyterWebsocketPersonality.list_kernels=True", "--KernelGatewayApp.port_retries=0"}
	case "jupyter_server":
		argv = []string{jupyter, "server", "--no-browser", "--allow-root", "--ip=127.0.0.1", "--port=" + strconv.Itoa(port),
			"--ServerApp.port_retries=0", "--IdentityProvider.token=" + token, "--ServerApp.root_dir=" + tmp}
	default:
		return nil, fmt.Errorf("unknown server %q (ours, kernel_gateway, jupyter_server)", name)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "JUPYTER_RUNTIME_DIR="+filepath.Join(tmp, "runtime"), "JUPYTER_CONFIG_DIR="+filepath.Join(tmp, "config"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	pipe, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			logMu.Lock()
			if logBuf.Len() < 64<<10 {
				logBuf.WriteString(sc.Text() + "\n")
			}
			logMu.Unlock()
		}
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		os.RemoveAll(tmp)
	}
	s := &benchServer{name: name, url: fmt.Sprintf("http://127.0.0.1:%d", port), token: token, pid: cmd.Process.Pid, stop: stop}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if code, _, err := s.call(ctx, "GET", "/api/kernelspecs", nil); err == nil && code == 200 {
			return s, nil
		}
		select {
		case <-exited:
			logMu.Lock()
			defer logMu.Unlock()
			return nil, fmt.Errorf("%s exited at start:\n%s", name, logBuf.String())
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	stop()
	return nil, fmt.Errorf("%s did not answer within 90 s", name)
}

func (s *benchServer) call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "token "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, nil
}

// benchKernelConn is one kernel with its own WebSocket client (legacy JSON, as every server speaks it).
type benchKernelConn struct {
	id      string
	ws      *websocket.Conn
	session string
}

func (s *benchServer) startKernel(ctx context.Context, kname string) (*benchKernelConn, time.Duration, error) {
	t0 := time.Now()
	code, raw, err := s.call(ctx, "POST", "/api/kernels", map[string]any{"name": kname})
	if err != nil {
		return nil, 0, err
	}
	if code != 201 {
		return nil, 0, fmt.Errorf("POST /api/kernels: HTTP %d: %s", code, raw)
	}
	var m struct{ ID string }
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, 0, err
	}
	session := uuid.NewString()
	u := "ws" + strings.TrimPrefix(s.url, "http") + "/api/kernels/" + m.ID + "/channels?session_id=" + session + "&token=" + s.token
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, u, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("websocket: %w", err)
	}
	kc := &benchKernelConn{id: m.ID, ws: ws, session: session}
	// Ready = the first 1+1 answered: servers that answer POST before the kernel is up pay here.
	// (A loaded machine starting many kernels can take minutes for the first answer.)
	if _, err := kc.roundTrip("1+1", 5*time.Minute); err != nil {
		ws.Close()
		return nil, 0, fmt.Errorf("first execute: %w", err)
	}
	took := time.Since(t0)
	// Warm up: the first executes of a fresh kernel pay for imports.
	for range 2 {
		if _, err := kc.roundTrip("1+1", 2*time.Minute); err != nil {
			ws.Close()
			return nil, 0, fmt.Errorf("warm-up: %w", err)
		}
	}
	return kc, took, nil
}

// roundTrip sends one execute_request and waits for its execute_reply and its idle status.
func (kc *benchKernelConn) roundTrip(code string, timeout time.Duration) (time.Duration, error) {
	id := uuid.NewString()
	msg := map[string]any{
		"channel":       "shell",
		"header":        map[string]any{"msg_id": id, "msg_type": "execute_request", "session": kc.session, "username": "bench", "version": "5.3", "date": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "buffers": []any{},
		"content": map[string]any{"code": code, "silent": false, "store_history": true, "user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true},
	}
	raw, _ := json.Marshal(msg)
	t0 := time.Now()
	_ = kc.ws.SetWriteDeadline(t0.Add(30 * time.Second))
	if err := kc.ws.WriteMessage(websocket.TextMessage, raw); err != nil {
		return 0, err
	}
	gotReply, gotIdle := false, false
	_ = kc.ws.SetReadDeadline(t0.Add(timeout))
	for !gotReply || !gotIdle {
		_, data, err := kc.ws.ReadMessage()
		if err != nil {
			return 0, err
		}
		var m struct {
			Header struct {
				MsgType string `json:"msg_type"`
			} `json:"header"`
			Parent struct {
				MsgID string `json:"msg_id"`
			} `json:"parent_header"`
			Content struct {
				ExecutionState string `json:"execution_state"`
			} `json:"content"`
		}
		if json.Unmarshal(data, &m) != nil || m.Parent.MsgID != id {
			continue
		}
		switch {
		case m.Header.MsgType == "execute_reply":
			gotReply = true
		case m.Header.MsgType == "status" && m.Content.ExecutionState == "idle":
			gotIdle = true
		}
	}
	return time.Since(t0), nil
}

func runGatewayBench(ctx context.Context, s *benchServer, cfg gwBenchConfig) (*gwBenchResult, error) {
	res := &gwBenchResult{throughput: map[int]float64{}}
	time.Sleep(time.Second) // let the server settle before its idle RSS
	idle, err := rssMiB(s.pid)
	if err != nil {
		return nil, err
	}
	res.rssIdle = idle
	var conns []*benchKernelConn
	var starts []float64
	defer func() {
		// Shut every kernel down through the server (bounded concurrency), then the caller stops it.
		sem := make(chan struct{}, cfg.conc)
		var wg sync.WaitGroup
		for _, kc := range conns {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				kc.ws.Close()
				sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, _, _ = s.call(sctx, "DELETE", "/api/kernels/"+kc.id, nil)
			}()
		}
		wg.Wait()
	}()
	for li, n := range cfg.levels {
		// Start kernels up to n, cfg.conc at a time.
		need := n - len(conns)
		var mu sync.Mutex
		var firstErr error
		sem := make(chan struct{}, cfg.conc)
		var wg sync.WaitGroup
		for range need {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				kc, took, err := s.startKernel(ctx, cfg.kernel)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					return
				}
				conns = append(conns, kc)
				starts = append(starts, float64(took.Microseconds())/1000)
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return nil, fmt.Errorf("starting kernels: %w", firstErr)
		}
		fmt.Fprintf(cfg.log, "bench gateway: %s: %d kernels up\n", s.name, len(conns))
		if li == 0 {
			lat := make([]float64, 0, cfg.rounds)
			for range cfg.rounds {
				d, err := conns[0].roundTrip("1+1", time.Minute)
				if err != nil {
					return nil, fmt.Errorf("round trip: %w", err)
				}
				lat = append(lat, float64(d.Microseconds())/1000)
			}
			res.rttP50, res.rttP99 = gwPct(lat, 50), gwPct(lat, 99)
		}
		// Throughput: every kernel's client loops 1+1 for the duration.
		var done atomic.Int64
		var terr atomic.Value
		stopAt := time.Now().Add(cfg.dur)
		var twg sync.WaitGroup
		for _, kc := range conns {
			twg.Add(1)
			go func() {
				defer twg.Done()
				for time.Now().Before(stopAt) {
					if _, err := kc.roundTrip("1+1", 2*time.Minute); err != nil {
						terr.Store(err)
						return
					}
					done.Add(1)
				}
			}()
		}
		t0 := time.Now()
		twg.Wait()
		if err, _ := terr.Load().(error); err != nil {
			return nil, fmt.Errorf("throughput at %d kernels: %w", n, err)
		}
		res.throughput[n] = float64(done.Load()) / time.Since(t0).Seconds()
		fmt.Fprintf(cfg.log, "bench gateway: %s: %d kernels: %.1f exec/s\n", s.name, n, res.throughput[n])
	}
	if cfg.load > 0 {
		if err := runLoad(s, cfg, conns, res); err != nil {
			return nil, err
		}
	}
	if rss, err := rssMiB(s.pid); err == nil && len(conns) > 0 {
		res.rssPerKernel, res.rssOK = (rss-res.rssIdle)/float64(len(conns)), true
	}
	res.startP50 = gwPct(starts, 50)
	return res, nil
}

// runLoad has every kernel's client do cfg.load executes of 1+1 at once: total throughput and the
// latency distribution of all executes.
func runLoad(s *benchServer, cfg gwBenchConfig, conns []*benchKernelConn, res *gwBenchResult) error {
	lat := make([][]float64, len(conns))
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, kc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range cfg.load {
				d, err := kc.roundTrip("1+1", 2*time.Minute)
				if err != nil {
					errs[i] = err
					return
				}
				lat[i] = append(lat[i], float64(d.Microseconds())/1000)
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	var all []float64
	for i := range conns {
		if errs[i] != nil {
			return fmt.Errorf("load %dx%d: %w", len(conns), cfg.load, errs[i])
		}
		all = append(all, lat[i]...)
	}
	res.loadRate = float64(len(all)) / took.Seconds()
	res.loadP50, res.loadP99 = gwPct(all, 50), gwPct(all, 99)
	fmt.Fprintf(cfg.log, "bench gateway: %s: load %dx%d: %.1f exec/s, p50 %.1f ms, p99 %.1f ms\n", s.name, len(conns), cfg.load, res.loadRate, res.loadP50, res.loadP99)
	return nil
}

// rssMiB is the resident set of one process (not its children: the kernels are separate processes).
func rssMiB(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseFloat(f[0], 64)
				return kb / 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

func gwPct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p / 100 * float64(len(s)-1))
	return s[i]
}

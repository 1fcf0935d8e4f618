package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/kernel/bench"
)

// benchSetup makes the 1 MB PNG once per kernel (random pixels do not compress).
const benchSetup = `import io, numpy as np
from PIL import Image
from IPython.display import Image as _BenchImage, display
_b = io.BytesIO()
Image.fromarray(np.random.default_rng(0).integers(0, 256, (580, 580, 3), dtype=np.uint8)).save(_b, format="PNG")
_bench_png = _b.getvalue()
del _b`

var benchRows = []struct{ name, code string }{
	{"1+1 round trip", "1+1"},
	{"print 1 MB", "print('x' * 1_000_000)"},
	{"display 1 MB PNG", "display(_BenchImage(data=_bench_png))"},
}

// benchPeer is one timed client: ours in-process, or a Python peer in its own process.
type benchPeer struct {
	name string
	run  func(ctx context.Context, code string) (time.Duration, error)
	stop func()
}

// benchKernel times our client against jupyter_client's BlockingKernelClient and a raw pyzmq floor,
// interleaved round by round, each client on its own kernel of the same spec (so no client decodes
// another's megabytes while being timed), or with --shared all on one kernel.
func benchKernel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench kernel", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	rounds := fs.Int("n", 20, "timed rounds per row and client")
	kname := fs.String("kernel", "pyrualean", "kernelspec name")
	shared := fs.Bool("shared", false, "all clients on one kernel (each then also receives the others' iopub)")
	floodMB := fs.Int("flood-mb", 50, "megabytes the flood cell prints (0: no flood rows)")
	floodN := fs.Int("flood-n", 0, "timed rounds of the flood (default: --n, at most 5)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *rounds < 1 || *floodMB < 0 || *floodN < 0 {
		fmt.Fprintln(stderr, "pyrualean bench kernel: usage: pyrualean bench kernel [--json] [--n ROUNDS] [--kernel NAME] [--shared] [--flood-mb MB] [--flood-n ROUNDS]")
		return 2
	}
	if *floodN == 0 {
		*floodN = min(*rounds, 5)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "pyrualean bench kernel: %v\n", err)
		return 1
	}
	spec, err := kernel.FindSpec(*kname)
	if err != nil {
		return fail(err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lopts := kernel.LaunchOptions{Logger: logger}

	var kernels []*kernel.Kernel
	defer func() { shutdownAll(kernels) }()
	launch := func() (*kernel.Kernel, error) {
		k, err := kernel.Launch(ctx, spec, lopts)
		if err == nil {
			kernels = append(kernels, k)
		}
		return k, err
	}
	script, err := os.CreateTemp("", "pyrualean-bench-*.py")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(script.Name())
	script.Write(bench.ClientPy)
	script.Close()

	ours, err := launch()
	if err != nil {
		return fail(err)
	}
	peers := []*benchPeer{{name: "ours", run: func(ctx context.Context, code string) (time.Duration, error) {
		t0 := time.Now()
		r, err := ours.Client().Execute(ctx, code, kernel.ExecuteOptions{})
		d := time.Since(t0)
		if err == nil && r.Status != "ok" {
			err = fmt.Errorf("cell %q: %s", code, r.Status)
		}
		return d, err
	}, stop: func() {}}}
	for _, mode := range []string{"jupyter_client", "floor"} {
		k := ours
		if !*shared {
			if k, err = launch(); err != nil {
				return fail(err)
			}
		}
		p, err := startPyPeer(ctx, spec.Argv[0], script.Name(), mode, k.ConnectionFile())
		if err != nil {
			return fail(fmt.Errorf("%s peer: %w", mode, err))
		}
		defer p.stop()
		peers = append(peers, p)
	}
	for _, p := range peers {
		if _, err := p.run(ctx, benchSetup); err != nil {
			return fail(fmt.Errorf("%s setup: %w", p.name, err))
		}
		for _, r := range benchRows { // warm up every path once
			if _, err := p.run(ctx, r.code); err != nil {
				return fail(fmt.Errorf("%s warm-up: %w", p.name, err))
			}
		}
	}
	times := map[string]map[string][]float64{}
	for _, p := range peers {
		times[p.name] = map[string][]float64{}
	}
	for round := range *rounds {
		for _, row := range benchRows {
			for i := range peers {
				p := peers[(i+round)%len(peers)] // rotate who goes first
				if *shared {
					time.Sleep(20 * time.Millisecond) // let the others' copies of the last cell's output land
				}
				d, err := p.run(ctx, row.code)
				if err != nil {
					return fail(fmt.Errorf("%s %s: %w", p.name, row.name, err))
				}
				times[p.name][row.name] = append(times[p.name][row.name], float64(d.Microseconds())/1000)
			}
		}
	}
	var flood *floodResult
	if *floodMB > 0 {
		if flood, err = benchFlood(ctx, ours, peers[1:], *floodMB, *floodN); err != nil {
			return fail(err)
		}
	}
	for _, p := range peers {
		p.stop()
	}

	poolMs, err := benchPoolTake(ctx, spec, lopts)
	if err != nil {
		return fail(err)
	}

	type jsonRow struct {
		Name             string  `json:"name"`
		OursP50          float64 `json:"ours_p50_ms"`
		JupyterClientP50 float64 `json:"jupyter_client_p50_ms"`
		FloorP50         float64 `json:"floor_p50_ms"`
		RatioFloor       float64 `json:"ratio_floor"`
		RatioJC          float64 `json:"ratio_jupyter_client"`
	}
	var out struct {
		Rows       []jsonRow    `json:"rows"`
		PoolTakeMs float64      `json:"pool_take_ms"`
		Flood      *floodResult `json:"flood,omitempty"`
	}
	out.PoolTakeMs, out.Flood = agent.Round(poolMs, 3), flood
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	if !*asJSON {
		where := "each client on its own " + spec.Name + " kernel"
		if *shared {
			where = "all clients on one " + spec.Name + " kernel"
		}
		fmt.Fprintf(stdout, "kernel client latency, ms (p50 / p90 of %d interleaved rounds; %s)\n", *rounds, where)
		fmt.Fprintln(tw, "row\tours\tjupyter_client\tfloor (raw pyzmq)\tours/floor\tours/jupyter_client\t")
	}
	for _, row := range benchRows {
		o, j, f := times["ours"][row.name], times["jupyter_client"][row.name], times["floor"][row.name]
		r := jsonRow{Name: row.name, OursP50: agent.Round(pct(o, 50), 3), JupyterClientP50: agent.Round(pct(j, 50), 3), FloorP50: agent.Round(pct(f, 50), 3)}
		r.RatioFloor = agent.Round(r.OursP50/r.FloorP50, 3)
		r.RatioJC = agent.Round(r.OursP50/r.JupyterClientP50, 3)
		out.Rows = append(out.Rows, r)
		if !*asJSON {
			fmt.Fprintf(tw, "%s\t%.2f / %.2f\t%.2f / %.2f\t%.2f / %.2f\t%.2f×\t%.2f×\t\n", row.name,
				pct(o, 50), pct(o, 90), pct(j, 50), pct(j, 90), pct(f, 50), pct(f, 90), r.RatioFloor, r.RatioJC)
		}
	}
	if *asJSON {
		return printJSON(stdout, out)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "pool take (warm kernel ready): %.3f ms\n", poolMs)
	flood.print(stdout)
	return 0
}

// floodResult is a cell printing MB megabytes: our Execute against the kernel's own time for it.
type floodResult struct {
	MB            int     `json:"mb"`
	Rounds        int     `json:"rounds"`
	OursP50       float64 `json:"ours_p50_ms"`
	KernelBusyP50 float64 `json:"kernel_busy_p50_ms"` // status busy to idle by the kernel's clock
	DevNullP50    float64 `json:"devnull_p50_ms"`     // the same cell printing to /dev/null in the kernel
	JupyterP50    float64 `json:"jupyter_client_p50_ms"`
	FloorP50      float64 `json:"floor_p50_ms"`
	RatioKernel   float64 `json:"ratio_kernel"`
	RatioDevNull  float64 `json:"ratio_devnull"`
	RatioFloor    float64 `json:"ratio_floor"`
	RatioJC       float64 `json:"ratio_jupyter_client"`
	OmittedBytes  int64   `json:"omitted_bytes"` // what our client's default limits dropped (and marked)
}

// benchFlood times a cell printing mb MB, round by round: our Execute (and the kernel's busy time
// for that cell, from its status dates), the same cell printing to /dev/null inside the kernel (what
// producing the text costs Python alone), and the Python peers.
func benchFlood(ctx context.Context, ours *kernel.Kernel, peers []*benchPeer, mb, rounds int) (*floodResult, error) {
	flood, devnull := bench.FloodCell(mb, false), bench.FloodCell(mb, true)
	var o, k, d []float64
	peerTimes := map[string][]float64{}
	res := &floodResult{MB: mb, Rounds: rounds}
	for round := -1; round < rounds; round++ { // round -1 warms up
		t0 := time.Now()
		r, err := ours.Client().Execute(ctx, flood, kernel.ExecuteOptions{Timeout: 10 * time.Minute})
		wall := time.Since(t0)
		if err == nil && r.Status != "ok" {
			err = fmt.Errorf("status %s", r.Status)
		}
		if err != nil {
			return nil, fmt.Errorf("ours, flood: %w", err)
		}
		res.OmittedBytes = r.Omitted.StreamBytes
		t1 := time.Now()
		if r2, err := ours.Client().Execute(ctx, devnull, kernel.ExecuteOptions{Timeout: 10 * time.Minute}); err != nil || r2.Status != "ok" {
			return nil, fmt.Errorf("ours, flood to /dev/null: %v %v", err, r2)
		}
		dn := time.Since(t1)
		ps := map[string]time.Duration{}
		for _, p := range peers {
			if ps[p.name], err = p.run(ctx, flood); err != nil {
				return nil, fmt.Errorf("%s, flood: %w", p.name, err)
			}
		}
		if round < 0 {
			continue
		}
		o, k, d = append(o, ms(wall)), append(k, ms(r.Timing.Idle.Sub(r.Timing.Busy))), append(d, ms(dn))
		for n, t := range ps {
			peerTimes[n] = append(peerTimes[n], ms(t))
		}
	}
	res.OursP50, res.KernelBusyP50, res.DevNullP50 = agent.Round(pct(o, 50), 3), agent.Round(pct(k, 50), 3), agent.Round(pct(d, 50), 3)
	res.JupyterP50, res.FloorP50 = agent.Round(pct(peerTimes["jupyter_client"], 50), 3), agent.Round(pct(peerTimes["floor"], 50), 3)
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return agent.Round(a/b, 3)
	}
	res.RatioKernel, res.RatioDevNull = ratio(res.OursP50, res.KernelBusyP50), ratio(res.OursP50, res.DevNullP50)
	res.RatioFloor, res.RatioJC = ratio(res.OursP50, res.FloorP50), ratio(res.OursP50, res.JupyterP50)
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (f *floodResult) print(w io.Writer) {
	if f == nil {
		return
	}
	fmt.Fprintf(w, "cell printing %d MB (p50 of %d rounds): ours %.0f ms = %.2f× the kernel's own busy time (%.0f ms), %.1f× the cell printing to /dev/null (%.0f ms); "+
		"jupyter_client %.0f ms (ours %.2f×), floor %.0f ms (ours %.2f×); ours kept its limit and marked %d bytes omitted\n",
		f.MB, f.Rounds, f.OursP50, f.RatioKernel, f.KernelBusyP50, f.RatioDevNull, f.DevNullP50, f.JupyterP50, f.RatioJC, f.FloorP50, f.RatioFloor, f.OmittedBytes)
}

// benchPoolTake measures Take on a pool whose kernels are already launched and warmed.
func benchPoolTake(ctx context.Context, spec kernel.Spec, lopts kernel.LaunchOptions) (float64, error) {
	const size = 3
	p, err := kernel.NewPool(ctx, spec, size, "import numpy", lopts)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	deadline := time.Now().Add(120 * time.Second)
	for p.Ready() < size {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("pool not ready after 120 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var takes []float64
	var taken []*kernel.Kernel
	for range size {
		t0 := time.Now()
		k, err := p.Take(ctx)
		if err != nil {
			return 0, err
		}
		takes = append(takes, float64(time.Since(t0).Microseconds())/1000)
		taken = append(taken, k)
	}
	p.Close() // stop refills before shutting the taken ones
	shutdownAll(taken)
	return pct(takes, 50), nil
}

// startPyPeer runs client.py in mode against a kernel and returns a peer that times cells in it.
func startPyPeer(ctx context.Context, python, script, mode, connFile string) (*benchPeer, error) {
	cmd := exec.CommandContext(ctx, python, script, mode, connFile)
	cmd.Dir = filepath.Dir(script)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	out := bufio.NewReader(outPipe)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			in.Close()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		})
	}
	line, err := out.ReadBytes('\n')
	if err != nil {
		stop()
		return nil, fmt.Errorf("peer did not start: %w", err)
	}
	_ = line
	return &benchPeer{name: mode, stop: stop, run: func(ctx context.Context, code string) (time.Duration, error) {
		req, _ := json.Marshal(map[string]string{"code": code})
		if _, err := in.Write(append(req, '\n')); err != nil {
			return 0, err
		}
		line, err := out.ReadBytes('\n')
		if err != nil {
			return 0, fmt.Errorf("peer gone: %w", err)
		}
		var r struct {
			Ms     float64 `json:"ms"`
			Status string  `json:"status"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return 0, fmt.Errorf("peer said %q: %w", line, err)
		}
		if r.Status != "ok" {
			return 0, fmt.Errorf("cell %q: %s", code, r.Status)
		}
		return time.Duration(r.Ms * float64(time.Millisecond)), nil
	}}, nil
}

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s)-1)*p/100 + 0.5)
	return s[i]
}

// shutdownAll shuts kernels down at once, each within 10 s.
func shutdownAll(kernels []*kernel.Kernel) {
	var wg sync.WaitGroup
	for _, k := range kernels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			k.Shutdown(sctx)
		}()
	}
	wg.Wait()
}

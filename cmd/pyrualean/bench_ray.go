package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/eval/raycluster"
	"github.com/pyrualean/pyrualean/eval/rayjob"
	"github.com/pyrualean/pyrualean/eval/rayservice"
	"github.com/pyrualean/pyrualean/robotapi"
)

// benchRay runs one replay suite on a Ray cluster (`eval --engine ray`) and on the local pool
// (`eval --jobs N`, the anchor) in turn, --reps times each, and prints the medians and the Ray/local
// ratios of: the time from eval's start to its first finished episode, and the per-episode overhead
// (wall time x slots minus the episodes' own policy time, per episode). pyrualean's service job is
// started on the cluster first, once, and that start is timed on its own: a cluster pays it once,
// not per suite.
// Without --ray-address it starts a one-node cluster with --slots CPUs in namespaces of its own
// (root), and runs both ways inside them.
func benchRay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench ray", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tasks := fs.String("tasks", "stack_blocks,open_drawer", "tasks (as eval --tasks)")
	seeds := fs.String("seeds", "0-1", "seeds (as eval --seeds)")
	slots := fs.Int("slots", 2, "episodes at once: the local pool's --jobs and the cluster's CPUs (1 CPU per episode)")
	reps := fs.Int("reps", 3, "runs of each way (medians are quoted)")
	address := fs.String("ray-address", "", "an existing cluster's dashboard (default: start a one-node cluster here, as root)")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	inside := fs.Bool("in-namespace", false, "(internal) running in the namespaces the benchmark made")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *slots < 1 || *reps < 1 {
		fmt.Fprintln(stderr, "usage: pyrualean bench ray [--tasks SEL] [--seeds SEL] [--slots N] [--reps N] [--ray-address URL] [--json]")
		return exitUsage
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench ray: %v\n", err)
		return 1
	}
	if *address == "" && !*inside {
		// Start the cluster where it can bind only loopback, and run the whole benchmark there.
		cmd, err := raycluster.Reexec(ctx, append([]string{exe, "bench", "ray", "--in-namespace"}, args...)...)
		if err != nil {
			fmt.Fprintf(stderr, "pyrualean bench ray: %v (or pass --ray-address)\n", err)
			return 1
		}
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(stderr, "pyrualean bench ray: %v\n", err)
			return 1
		}
		return 0
	}
	dir, err := os.MkdirTemp("", "pyrualean-bench-ray-")
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench ray: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *address == "" {
		root, err := robotapi.Root()
		if err != nil {
			fmt.Fprintf(stderr, "pyrualean bench ray: %v\n", err)
			return 1
		}
		nodeTmp := filepath.Join(dir, "node-tmp") // the node's work folders, removed with dir
		os.Mkdir(nodeTmp, 0o755)
		env := append(os.Environ(), "PATH="+filepath.Dir(exe)+":"+filepath.Join(root, ".venv", "bin")+":"+os.Getenv("PATH"),
			"PYRUALEAN_ROOT="+root, "TMPDIR="+nodeTmp)
		fmt.Fprintf(stderr, "bench ray: starting a one-node cluster (%d CPUs) ...\n", *slots)
		t0 := time.Now()
		cl, err := raycluster.Start(ctx, raycluster.Options{Ray: filepath.Join(root, ".venv", "bin", "ray"), CPUs: *slots, TempDir: filepath.Join(dir, "ray"), Env: env})
		if err != nil {
			fmt.Fprintf(stderr, "pyrualean bench ray: %v\n", err)
			return 1
		}
		defer func() {
			if strays, err := cl.Stop(context.Background()); err != nil || len(strays) > 0 {
				fmt.Fprintf(stderr, "bench ray: stopping the cluster: %v, left %v\n", err, strays)
			}
		}()
		fmt.Fprintf(stderr, "bench ray: cluster up in %.1fs\n", time.Since(t0).Seconds())
		*address = cl.Address
	}
	svcStart, err := startService(ctx, *address, exe)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench ray: %v\n", err)
		return 1
	}
	common := []string{"eval", "--runtime", "replay", "--tasks", *tasks, "--seeds", *seeds, "--arms", "cells,tools", "--images", "none", "--json"}
	ways := []struct {
		name string
		args []string
	}{
		// --boot-ahead 0: the same number of episodes in flight as the cluster's slots.
		{"local pool", []string{"--jobs", strconv.Itoa(*slots), "--boot-ahead", "0"}},
		{"ray", []string{"--engine", "ray", "--ray-address", *address, "--ray-pyrualean", exe, "-v"}}, // -v: the suite's times (timedEval)
	}
	type figures struct {
		Name        string    `json:"name"`
		Episodes    int       `json:"episodes"`
		WallS       []float64 `json:"wall_s"`
		FirstS      []float64 `json:"first_finish_s"`
		OverheadS   []float64 `json:"overhead_per_episode_s"`
		StartupS    []float64 `json:"mean_startup_s"`
		SuiteUpS    []float64 `json:"suite_up_s,omitempty"`      // ray: eval's start to the suite's first line
		FirstStartS []float64 `json:"first_started_s,omitempty"` // ray: eval's start to the first episode's start
		MedWallS    float64   `json:"median_wall_s"`
		MedFirstS   float64   `json:"median_first_finish_s"`
		MedOverhead float64   `json:"median_overhead_per_episode_s"`
		MedStartup  float64   `json:"median_startup_s"`
	}
	res := make([]*figures, len(ways))
	for i, w := range ways {
		res[i] = &figures{Name: w.name}
	}
	for rep := range *reps {
		for i, w := range ways {
			fmt.Fprintf(stderr, "bench ray: %s, run %d/%d ...\n", w.name, rep+1, *reps)
			out := filepath.Join(dir, fmt.Sprintf("%d-%d", i, rep))
			r, err := timedEval(ctx, exe, append(append(append([]string{}, common...), w.args...), "--out", out))
			if err != nil {
				fmt.Fprintf(stderr, "pyrualean bench ray: %s: %v\n", w.name, err)
				return 1
			}
			man, err := eval.ReadManifest(out)
			if err != nil {
				fmt.Fprintf(stderr, "pyrualean bench ray: %v\n", err)
				return 1
			}
			cells, n := 0.0, 0
			for _, rec := range eval.LoadRecords(out, man) {
				cells += rec.Row.WallS
				n++
			}
			f := res[i]
			f.Episodes = n
			f.WallS = append(f.WallS, r.wall)
			f.FirstS = append(f.FirstS, r.first)
			f.OverheadS = append(f.OverheadS, (r.wall*float64(*slots)-cells)/float64(n))
			f.StartupS = append(f.StartupS, meanStartup(out))
			if r.suiteUp > 0 {
				f.SuiteUpS, f.FirstStartS = append(f.SuiteUpS, r.suiteUp), append(f.FirstStartS, r.firstStart)
			}
		}
	}
	for _, f := range res {
		f.MedWallS, f.MedFirstS, f.MedOverhead, f.MedStartup = median(f.WallS), median(f.FirstS), median(f.OverheadS), median(f.StartupS)
	}
	local, ray := res[0], res[1]
	ratios := map[string]float64{"wall": ray.MedWallS / local.MedWallS, "first_finish": ray.MedFirstS / local.MedFirstS,
		"overhead_per_episode": ray.MedOverhead / local.MedOverhead}
	if *asJSON {
		json.NewEncoder(stdout).Encode(map[string]any{"tasks": *tasks, "seeds": *seeds, "slots": *slots, "reps": *reps, "ways": res, "ray_over_local": ratios,
			"service_start_s": svcStart})
		return 0
	}
	fmt.Fprintf(stdout, "replay suite: tasks %s, seeds %s, both arms: %d episodes; %d slots each way; medians of %d runs\n", *tasks, *seeds, local.Episodes, *slots, *reps)
	fmt.Fprintf(stdout, "%-12s %9s %16s %14s %11s\n", "way", "wall_s", "first_finish_s", "overhead/ep_s", "startup_s")
	for _, f := range res {
		fmt.Fprintf(stdout, "%-12s %9.1f %16.1f %14.2f %11.2f\n", f.Name, f.MedWallS, f.MedFirstS, f.MedOverhead, f.MedStartup)
	}
	fmt.Fprintf(stdout, "%-12s %8.2fx %15.2fx %13.2fx\n", "ray/local", ratios["wall"], ratios["first_finish"], ratios["overhead_per_episode"])
	fmt.Fprintln(stdout, "first_finish_s: from eval's start (ray: finding the service, packaging, submission) to its first finished episode;")
	fmt.Fprintln(stdout, "overhead/ep_s: wall time x slots minus the episodes' own policy time, per episode; startup_s: kernel to robot ready, per episode")
	if len(ray.SuiteUpS) > 0 {
		fmt.Fprintf(stdout, "ray, after eval's start: the suite's first line %.2f s, the first episode started %.2f s (medians)\n",
			median(ray.SuiteUpS), median(ray.FirstStartS))
	}
	fmt.Fprintf(stdout, "ray: pyrualean's service job started once before the runs, in %.1f s (a cluster pays it once; eval starts it when it finds none)\n", svcStart)
	return 0
}

// evalTiming is one eval run's times: wall and first finished episode from its start; for Ray, also
// when the suite's first line was written and its first episode started, after eval's start (eval's
// log, eval/ray.go), so the fixed cost can be told apart.
type evalTiming struct{ wall, first, suiteUp, firstStart float64 }

var afterSubmit = regexp.MustCompile(`msg="ray: (suite started|episode started)".* after_submit_s=([0-9.]+)`)

// timedEval runs `pyrualean eval ... --json` and times it and its first finished episode.
func timedEval(ctx context.Context, exe string, args []string) (evalTiming, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return evalTiming{}, err
	}
	logs, err := cmd.StderrPipe()
	if err != nil {
		return evalTiming{}, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return evalTiming{}, err
	}
	var r evalTiming
	logsRead := make(chan struct{})
	go func() {
		defer close(logsRead)
		sc := bufio.NewScanner(logs)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			m := afterSubmit.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			v, _ := strconv.ParseFloat(m[2], 64)
			switch {
			case m[1] == "suite started" && r.suiteUp == 0:
				r.suiteUp = v
			case m[1] == "episode started" && r.firstStart == 0:
				r.firstStart = v
			}
		}
	}()
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if r.first == 0 && strings.Contains(sc.Text(), `"event":"finish"`) {
			r.first = time.Since(t0).Seconds()
		}
	}
	<-logsRead // before Wait, which closes the pipe
	err = cmd.Wait()
	r.wall = time.Since(t0).Seconds()
	if err != nil {
		return r, fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	if r.first == 0 {
		return r, fmt.Errorf("%s: no episode finished", strings.Join(args, " "))
	}
	return r, nil
}

// startService starts pyrualean's service job on the cluster (if it has none of this version) and
// says how long that took.
func startService(ctx context.Context, address, exe string) (float64, error) {
	client, err := rayjob.New(address)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if _, err := rayservice.Ensure(ctx, client, rayservice.Options{Pyrualean: exe}); err != nil {
		return 0, err
	}
	return time.Since(t0).Seconds(), nil
}

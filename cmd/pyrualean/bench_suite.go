package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// benchSuite runs one replay suite three ways in the same run: `eval --jobs 1`, `eval --jobs 2`, and
// the anchor, a shell loop of `pyrualean play` processes replaying the same actions (the cells arm
// from the reference solution, the tools arm from the tools trace eval wrote). It prints episodes per
// minute, the ratios to the shell loop, and eval's runner overhead per episode beyond its cells.
func benchSuite(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench suite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tasks := fs.String("tasks", "all", "tasks (as eval --tasks); the full bench is all 14 tabletop tasks")
	seeds := fs.String("seeds", "0-3", "seeds (as eval --seeds)")
	jobs := fs.Int("jobs", 2, "the parallel run's --jobs")
	ahead := fs.Int("boot-ahead", 1, "both eval runs' --boot-ahead (0: each episode boots when its slot is free)")
	keep := fs.String("dir", "", "keep the eval folders here (default: a temporary folder, removed)")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	sealed := fs.String("sealed", spec.SealAuto, "every way's --sealed (auto: play's default; off: the robot in the kernel, eval's warm kernel pool)")
	local := fs.String("local", "", "also run this embedded model (pyrualean models) over --local-episodes episodes in one eval and compare the first turn's latency of the 2nd..Nth episode with the 1st's (the shared server's prompt cache); skips the three-way run")
	localN := fs.Int("local-episodes", 4, "episodes of the --local run")
	reps := fs.Int("reps", 3, "repetitions of every way, interleaved (each repetition runs them all in turn); figures are medians")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *jobs < 1 || *ahead < 0 || *reps < 1 {
		fmt.Fprintln(stderr, "pyrualean bench suite: usage: pyrualean bench suite [--tasks SEL] [--seeds SEL] [--jobs N] [--boot-ahead N] [--reps N] [--sealed MODE] [--dir DIR] [--json]")
		return exitUsage
	}
	if !slices.Contains([]string{spec.SealOff, spec.SealAuto, spec.SealOn}, *sealed) {
		fmt.Fprintf(stderr, "pyrualean bench suite: --sealed %q: want off, auto or on\n", *sealed)
		return exitUsage
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench suite: %v\n", err)
		return 1
	}
	dir := *keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pyrualean-bench-suite-"); err != nil {
			fmt.Fprintf(stderr, "pyrualean bench suite: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
	}
	if *local != "" {
		return benchSuiteLocal(ctx, exe, dir, *local, *localN, *asJSON, stdout, stderr)
	}
	common := []string{"eval", "--runtime", "replay", "--tasks", *tasks, "--seeds", *seeds, "--arms", "cells,tools", "--sealed", *sealed, "--boot-ahead", strconv.Itoa(*ahead)}
	runEval := func(name string, n int, extra ...string) (way, *eval.Manifest, error) {
		out := filepath.Join(dir, name)
		cmd := exec.CommandContext(ctx, exe, append(append(common, extra...), "--jobs", strconv.Itoa(n), "--out", out)...)
		var errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &errOut
		t0 := time.Now()
		err := cmd.Run()
		w := way{Name: name, WallS: time.Since(t0).Seconds()}
		if err != nil {
			return w, nil, fmt.Errorf("%s: %w (eval folder %s)\n%s", name, err, out, tailLines(errOut.String(), 20))
		}
		man, err := eval.ReadManifest(out)
		if err != nil {
			return w, nil, err
		}
		for _, r := range eval.LoadRecords(out, man) {
			w.Episodes++
			w.CellsS += r.Row.WallS
			if r.Success != nil && *r.Success {
				w.Solved++
			}
		}
		w.StartupS = meanStartup(out)
		return w, man, nil
	}
	// One repetition: every way in turn, eval folders named by the repetition.
	runRep := func(r int) ([]*way, error) {
		sfx := ""
		if r > 0 {
			sfx = fmt.Sprintf("-rep%d", r+1)
		}
		fmt.Fprintf(stderr, "bench suite (%d/%d): eval --jobs 1 ...\n", r+1, *reps)
		one, man, err := runEval("jobs1"+sfx, 1)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "bench suite (%d/%d): eval --jobs %d ...\n", r+1, *reps, *jobs)
		par, _, err := runEval("jobs"+strconv.Itoa(*jobs)+sfx, *jobs)
		if err != nil {
			return nil, err
		}
		// Sealed episodes' robot servers are forked (eval's default): the same run with them exec'd
		// shows what the forker saves.
		var unforked *way
		if *sealed != spec.SealOff {
			fmt.Fprintf(stderr, "bench suite (%d/%d): eval --jobs %d --fork-robots=false ...\n", r+1, *reps, *jobs)
			w, _, err := runEval("jobs"+strconv.Itoa(*jobs)+"-unforked"+sfx, *jobs, "--fork-robots=false")
			if err != nil {
				return nil, err
			}
			unforked = &w
		}
		// The anchor: one play process per episode, from a shell loop, replaying the same actions.
		root, err := robotapi.Root()
		if err != nil {
			return nil, err
		}
		var script strings.Builder
		script.WriteString("set -e\n")
		loopDir := filepath.Join(dir, "shell"+sfx)
		n := 0
		for _, id := range man.Order {
			st := man.Episodes[id]
			from := filepath.Join(root, st.Solution)
			if st.Arm == "tools" {
				from = filepath.Join(dir, "jobs1"+sfx, filepath.FromSlash(st.Dir), "trace.ipynb")
			}
			fmt.Fprintf(&script, "%q play --runtime replay --sealed %s --robot %s --task %s --seed %d --arm %s --from %q --out %q >/dev/null 2>&1\n",
				exe, *sealed, st.Robot, st.Task, st.Seed, st.Arm, from, filepath.Join(loopDir, strconv.Itoa(n)))
			n++
		}
		fmt.Fprintf(stderr, "bench suite (%d/%d): shell loop of %d play processes ...\n", r+1, *reps, n)
		sh := exec.CommandContext(ctx, "/bin/sh", "-c", script.String())
		t0 := time.Now()
		if out, err := sh.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("shell loop: %w\n%s", err, out)
		}
		loop := way{Name: "shell loop of play", Episodes: n, WallS: time.Since(t0).Seconds(), StartupS: meanStartup(loopDir)}
		ways := []*way{&loop, &one, &par}
		if unforked != nil {
			ways = append(ways, unforked)
		}
		for _, w := range ways {
			w.PerMinute = float64(w.Episodes) / (w.WallS / 60)
		}
		for _, w := range ways {
			w.VsShellLoop = w.PerMinute / loop.PerMinute
		}
		// With one job the suite's wall time is its episodes' cells plus everything else the runner did.
		one.OverheadMS = 1000 * (one.WallS - one.CellsS) / float64(one.Episodes)
		for _, w := range ways[2:] {
			w.OverheadMS = 1000 * (w.WallS*float64(*jobs) - w.CellsS) / float64(w.Episodes)
		}
		return ways, nil
	}
	var runs [][]*way
	for r := range *reps {
		ways, err := runRep(r)
		if err != nil {
			fmt.Fprintf(stderr, "pyrualean bench suite: %v\n", err)
			return 1
		}
		runs = append(runs, ways)
	}
	ways := medianWays(runs)
	n := ways[0].Episodes
	if *asJSON {
		json.NewEncoder(stdout).Encode(map[string]any{"tasks": *tasks, "seeds": *seeds, "sealed": *sealed, "boot_ahead": *ahead, "reps": *reps, "ways": ways})
		return 0
	}
	fmt.Fprintf(stdout, "replay suite: tasks %s, seeds %s, both arms, sealed %s, boot-ahead %d: %d episodes; medians of %d repetitions\n", *tasks, *seeds, *sealed, *ahead, n, *reps)
	fmt.Fprintf(stdout, "%-20s %8s %9s %8s %12s %14s %10s\n", "way", "wall_s", "ep/min", "solved", "vs shell", "overhead/ep", "startup_s")
	for _, w := range ways {
		oh := "-"
		if w.OverheadMS != 0 {
			oh = fmt.Sprintf("%.0f ms", w.OverheadMS)
		}
		fmt.Fprintf(stdout, "%-20s %8.1f %9.1f %8s %11.2fx %14s %10.2f\n", w.Name, w.WallS, w.PerMinute, solvedText(w.Solved, w.Episodes, w == ways[0]), w.VsShellLoop, oh, w.StartupS)
	}
	for _, w := range ways {
		fmt.Fprintf(stdout, "  %-20s wall_s per repetition %v\n", w.Name, w.Walls)
	}
	fmt.Fprintln(stdout, "overhead/ep: wall time x jobs minus the episodes' own policy time (cells), per episode;")
	fmt.Fprintln(stdout, "startup_s: mean time from the episode's start to the robot ready (kernel + setup cell), from result.json")
	return 0
}

// way is one way of running the suite, as measured (or the median over repetitions).
type way struct {
	Name        string    `json:"name"`
	Episodes    int       `json:"episodes"`
	WallS       float64   `json:"wall_s"`
	Walls       []float64 `json:"wall_s_per_rep,omitempty"`
	PerMinute   float64   `json:"episodes_per_min"`
	CellsS      float64   `json:"cells_s"` // summed policy time (the episodes' own cells)
	OverheadMS  float64   `json:"overhead_per_episode_ms"`
	Solved      int       `json:"solved"`
	StartupS    float64   `json:"mean_startup_s"` // kernel to robot ready, per episode
	VsShellLoop float64   `json:"vs_shell_loop"`
}

// medianWays is each way's median over repetitions (runs[r][i] is way i of repetition r; episodes and
// solved are the first repetition's, the same replays each time); a ratio is
// the median of the repetitions' ratios, each taken within its own repetition.
func medianWays(runs [][]*way) []*way {
	out := make([]*way, len(runs[0]))
	for i := range out {
		pick := func(f func(*way) float64) float64 {
			var xs []float64
			for _, r := range runs {
				xs = append(xs, f(r[i]))
			}
			return median(xs)
		}
		w := *runs[0][i]
		w.WallS = pick(func(x *way) float64 { return x.WallS })
		w.CellsS = pick(func(x *way) float64 { return x.CellsS })
		w.StartupS = pick(func(x *way) float64 { return x.StartupS })
		w.OverheadMS = pick(func(x *way) float64 { return x.OverheadMS })
		w.VsShellLoop = pick(func(x *way) float64 { return x.VsShellLoop })
		w.PerMinute = float64(w.Episodes) / (w.WallS / 60)
		w.Walls = nil
		for _, r := range runs {
			w.Walls = append(w.Walls, math.Round(r[i].WallS*10)/10)
		}
		out[i] = &w
	}
	return out
}

func solvedText(k, n int, unknown bool) string {
	if unknown {
		return "-"
	}
	return fmt.Sprintf("%d/%d", k, n)
}

// meanStartup is the mean startup_s of the result.json files under dir.
func meanStartup(dir string) float64 {
	var sum float64
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "result.json" || strings.Contains(p, string(filepath.Separator)+"attempts"+string(filepath.Separator)) {
			return nil
		}
		if r, err := readResult(filepath.Dir(p)); err == nil {
			sum += r.StartupS
			n++
		}
		return nil
	})
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// benchSuiteLocal runs n one-call episodes of an embedded model in one eval (one shared llama.cpp
// server) and compares each episode's first LLM call latency with the first episode's.
func benchSuiteLocal(ctx context.Context, exe, dir, model string, n int, asJSON bool, stdout, stderr io.Writer) int {
	out := filepath.Join(dir, "local")
	args := []string{"eval", "--runtime", "local", "--model", model, "--tasks", "stack_blocks", "--seeds", fmt.Sprintf("0-%d", n-1),
		// --boot-ahead 0: no episode boots beside a measured turn (it would share the CPU with the model).
		"--arms", "cells", "--jobs", "1", "--boot-ahead", "0", "--max-turns", "1", "--openai-max-tokens", "128", "--budget-s", "90", "--retries", "0", "--out", out}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	fmt.Fprintf(stderr, "bench suite: %d episodes of %s on one embedded server ...\n", n, model)
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(stderr, "bench suite: eval: %v (episodes that did not finish are left out)\n", err)
	}
	man, err := eval.ReadManifest(out)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench suite: %v\n", err)
		return 1
	}
	type first struct {
		ID       string  `json:"id"`
		Started  string  `json:"started_at"`
		LatencyS float64 `json:"first_turn_latency_s"`
	}
	var firsts []first
	for _, id := range man.Order {
		turns, err := agent.ReadTurns(filepath.Join(out, filepath.FromSlash(man.Episodes[id].Dir), "turns.jsonl"))
		if err != nil || len(turns) == 0 || turns[0].StartedAt == "" {
			continue
		}
		firsts = append(firsts, first{ID: id, Started: turns[0].StartedAt, LatencyS: turns[0].LatencyS})
	}
	slices.SortFunc(firsts, func(a, b first) int { return strings.Compare(a.Started, b.Started) })
	if len(firsts) < 2 {
		fmt.Fprintf(stderr, "pyrualean bench suite: %d episodes made an LLM call; need 2\n", len(firsts))
		return 1
	}
	var rest []float64
	for _, f := range firsts[1:] {
		rest = append(rest, f.LatencyS)
	}
	ratio := median(rest) / firsts[0].LatencyS
	if asJSON {
		json.NewEncoder(stdout).Encode(map[string]any{"model": model, "episodes": firsts, "rest_median_over_first": ratio})
		return 0
	}
	fmt.Fprintf(stdout, "embedded %s, one shared server, %d episodes: first turn of episode 1 %.2f s; episodes 2..%d median %.2f s (%.2fx)\n",
		model, len(firsts), firsts[0].LatencyS, len(firsts), median(rest), ratio)
	return 0
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

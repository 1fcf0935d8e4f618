package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/suite"
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
	keep := fs.String("dir", "", "keep the suite folders here (default: a temporary folder, removed)")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *jobs < 1 {
		fmt.Fprintln(stderr, "pyrualean bench suite: usage: pyrualean bench suite [--tasks SEL] [--seeds SEL] [--jobs N] [--dir DIR] [--json]")
		return 2
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
	common := []string{"eval", "--runtime", "replay", "--tasks", *tasks, "--seeds", *seeds, "--arms", "cells,tools"}
	type way struct {
		Name        string  `json:"name"`
		Episodes    int     `json:"episodes"`
		WallS       float64 `json:"wall_s"`
		PerMinute   float64 `json:"episodes_per_min"`
		CellsS      float64 `json:"cells_s"` // summed policy time (the episodes' own cells)
		OverheadMS  float64 `json:"overhead_per_episode_ms"`
		Solved      int     `json:"solved"`
		StartupS    float64 `json:"mean_startup_s"` // kernel to robot ready, per episode
		VsShellLoop float64 `json:"vs_shell_loop"`
	}
	runEval := func(name string, n int) (way, *suite.Manifest, error) {
		out := filepath.Join(dir, name)
		cmd := exec.CommandContext(ctx, exe, append(common, "--jobs", strconv.Itoa(n), "--out", out)...)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		t0 := time.Now()
		err := cmd.Run()
		w := way{Name: name, WallS: time.Since(t0).Seconds()}
		if err != nil {
			return w, nil, fmt.Errorf("%s: %w", name, err)
		}
		man, err := suite.ReadManifest(out)
		if err != nil {
			return w, nil, err
		}
		for _, r := range suite.LoadRecords(out, man) {
			w.Episodes++
			w.CellsS += r.Row.WallS
			if r.Success != nil && *r.Success {
				w.Solved++
			}
		}
		w.StartupS = meanStartup(out)
		return w, man, nil
	}
	fmt.Fprintln(stderr, "bench suite: eval --jobs 1 ...")
	one, man, err := runEval("jobs1", 1)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench suite: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "bench suite: eval --jobs %d ...\n", *jobs)
	par, _, err := runEval("jobs"+strconv.Itoa(*jobs), *jobs)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench suite: %v\n", err)
		return 1
	}
	// The anchor: one play process per episode, from a shell loop, replaying the same actions.
	root, err := robotapi.Root()
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench suite: %v\n", err)
		return 1
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	loopDir := filepath.Join(dir, "shell")
	n := 0
	for _, id := range man.Order {
		st := man.Episodes[id]
		from := filepath.Join(root, st.Solution)
		if st.Arm == "tools" {
			from = filepath.Join(dir, "jobs1", filepath.FromSlash(st.Dir), "trace.ipynb")
		}
		fmt.Fprintf(&script, "%q play --runtime replay --robot %s --task %s --seed %d --arm %s --from %q --out %q >/dev/null 2>&1\n",
			exe, st.Robot, st.Task, st.Seed, st.Arm, from, filepath.Join(loopDir, strconv.Itoa(n)))
		n++
	}
	fmt.Fprintf(stderr, "bench suite: shell loop of %d play processes ...\n", n)
	sh := exec.CommandContext(ctx, "/bin/sh", "-c", script.String())
	t0 := time.Now()
	if out, err := sh.CombinedOutput(); err != nil {
		fmt.Fprintf(stderr, "pyrualean bench suite: shell loop: %v\n%s", err, out)
		return 1
	}
	loop := way{Name: "shell loop of play", Episodes: n, WallS: time.Since(t0).Seconds(), StartupS: meanStartup(loopDir)}
	ways := []*way{&loop, &one, &par}
	for _, w := range ways {
		w.PerMinute = float64(w.Episodes) / (w.WallS / 60)
	}
	for _, w := range ways {
		w.VsShellLoop = w.PerMinute / loop.PerMinute
	}
	// With one job the suite's wall time is its episodes' cells plus everything else the runner did.
	one.OverheadMS = 1000 * (one.WallS - one.CellsS) / float64(one.Episodes)
	par.OverheadMS = 1000 * (par.WallS*float64(*jobs) - par.CellsS) / float64(par.Episodes)
	if *asJSON {
		json.NewEncoder(stdout).Encode(map[string]any{"tasks": *tasks, "seeds": *seeds, "ways": ways})
		return 0
	}
	fmt.Fprintf(stdout, "replay suite: tasks %s, seeds %s, both arms: %d episodes\n", *tasks, *seeds, n)
	fmt.Fprintf(stdout, "%-20s %8s %9s %8s %12s %14s %10s\n", "way", "wall_s", "ep/min", "solved", "vs shell", "overhead/ep", "startup_s")
	for _, w := range ways {
		oh := "-"
		if w.OverheadMS != 0 {
			oh = fmt.Sprintf("%.0f ms", w.OverheadMS)
		}
		fmt.Fprintf(stdout, "%-20s %8.1f %9.1f %8s %11.2fx %14s %10.2f\n", w.Name, w.WallS, w.PerMinute, solvedText(w.Solved, w.Episodes, w.Name == loop.Name), w.VsShellLoop, oh, w.StartupS)
	}
	fmt.Fprintln(stdout, "overhead/ep: wall time x jobs minus the episodes' own policy time (cells), per episode;")
	fmt.Fprintln(stdout, "startup_s: mean time from the episode's start to the robot ready (kernel + setup cell), from result.json")
	return 0
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

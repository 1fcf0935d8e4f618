package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/eval/inproc"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// settingFlag records an episode setting given to eval, to pass on to every episode of every row.
type settingFlag struct {
	s    spec.Setting
	into map[string]string
}

func (f *settingFlag) String() string { return "" }
func (f *settingFlag) Set(v string) error { // checked per row, when the matrix is expanded
	if f.s.Repeat && f.into[f.s.Name] != "" {
		return fmt.Errorf("give --%s in a matrix row's table for eval (robot_options = {...})", f.s.Name)
	}
	f.into[f.s.Name] = v
	return nil
}
func (f *settingFlag) IsBoolFlag() bool { return f.s.Bool }

// evalFlags are eval's own flags plus every play setting.
type evalFlags struct {
	matrix, robot, suiteName, tasks, seeds, arms, runtime, models, out, status string
	jobs, bootAhead, maxConns, retries, samples                                int
	backoffS                                                                   float64
	asJSON, verbose, forkRobots                                                bool
	settings                                                                   map[string]string
	ray                                                                        rayFlags
}

func newEvalFlagSet(stderr io.Writer) (*flag.FlagSet, *evalFlags) {
	f := &evalFlags{settings: map[string]string{}}
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.matrix, "matrix", "", "matrix file (.toml, .yaml): rows of robot/tasks/seeds/arms/runtime/models/settings, instead of the flags below")
	fs.StringVar(&f.robot, "robot", robotapi.DefaultRobot, "robot (see pyrualean suites)")
	fs.StringVar(&f.suiteName, "suite", "", "benchmark suite of the robot")
	fs.StringVar(&f.tasks, "tasks", "all", "all, family:NAME or task names (comma-separated)")
	fs.StringVar(&f.seeds, "seeds", "", "seeds: 0-9, 3 or 0,2,5-7 (default: the robot's default seed)")
	fs.StringVar(&f.arms, "arms", "cells,tools", "arms, comma-separated")
	fs.StringVar(&f.runtime, "runtime", "", "as in play: "+strings.Join(runtimes.Names(), ", ")+" (replay replays each task's reference solution)")
	fs.StringVar(&f.models, "model", "", "model(s), comma-separated (as in play)")
	fs.StringVar(&f.out, "out", "", "eval folder (default runs/suite-<hash of the matrix>: the same command resumes)")
	fs.IntVar(&f.samples, "samples", 1, "rollouts of each (task, seed) instance, each with its own sampling seed (sent as the request's seed): a group for pass@K and training (a matrix row's samples = K wins)")
	fs.IntVar(&f.jobs, "jobs", defaultJobs(), "episodes acting at once (default from cores and memory)")
	fs.IntVar(&f.bootAhead, "boot-ahead", 1, "more episodes that may boot (kernel, robot) while --jobs act, then wait their turn; 0: boot only when a slot is free")
	fs.IntVar(&f.maxConns, "max-connections", 8, "requests in flight per LLM endpoint, over all episodes (0: no limit)")
	fs.IntVar(&f.retries, "retries", 2, "further attempts of an interrupted, boot_error or planner_error episode in one run")
	fs.Float64Var(&f.backoffS, "retry-backoff-s", 2, "wait before the first retry (doubles each time)")
	fs.BoolVar(&f.forkRobots, "fork-robots", true, "fork sealed episodes' robot servers from one process that has their modules imported (cheaper than exec'ing each; false: exec)")
	fs.BoolVar(&f.asJSON, "json", false, "stream events as JSON lines on stdout, then the results")
	fs.BoolVar(&f.verbose, "v", false, "log episodes' progress to stderr")
	fs.StringVar(&f.status, "status", "", "report the suite in DIR (running or not) and exit")
	f.ray.register(fs)
	for _, st := range spec.Settings() {
		if st.PerEpisode || fs.Lookup(st.Name) != nil {
			continue
		}
		fs.Var(&settingFlag{s: st, into: f.settings}, st.Name, "every episode: "+st.Usage)
	}
	return fs, f
}

// defaultJobs is one episode per core, fewer when memory is short (about 1 GiB per episode).
func defaultJobs() int {
	meminfo, _ := os.ReadFile("/proc/meminfo")
	return jobsFor(runtime.NumCPU(), string(meminfo))
}

// jobsFor is defaultJobs' rule: cpus, at most one per GiB of MemAvailable in meminfo (when it says),
// at least 1.
func jobsFor(cpus int, meminfo string) int {
	n := cpus
	for line := range strings.Lines(meminfo) {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if kb, err := strconv.Atoi(f[0]); err == nil {
					n = min(n, kb>>20)
				}
			}
		}
	}
	return max(n, 1)
}

// evalPlan is a validated eval invocation.
type evalPlan struct {
	matrix   eval.Matrix
	episodes []eval.Episode
	dir      string
}

// planEval builds and checks the matrix: every row's robot, tasks, seeds, arms, runtime and play
// settings are checked before anything runs, and errors name the row.
func planEval(ctx context.Context, f *evalFlags, set map[string]bool) (*evalPlan, error) {
	var m eval.Matrix
	if f.matrix != "" {
		for _, n := range []string{"robot", "suite", "tasks", "seeds", "arms", "runtime", "model"} {
			if set[n] {
				return nil, fmt.Errorf("--%s: the matrix file sets it (per row)", n)
			}
		}
		var err error
		if m, err = eval.ReadMatrix(f.matrix); err != nil {
			return nil, err
		}
		for i := range m.Rows {
			if m.Rows[i].Samples == 0 && f.samples > 1 {
				m.Rows[i].Samples = f.samples
			}
		}
		if len(f.settings) > 0 {
			for i := range m.Rows {
				s := maps.Clone(f.settings)
				maps.Copy(s, m.Rows[i].Settings) // a row's own setting wins
				m.Rows[i].Settings = s
			}
		}
	} else {
		r := eval.Row{Robot: f.robot, Suite: f.suiteName, Tasks: f.tasks, Seeds: f.seeds, Runtime: f.runtime, Settings: f.settings}
		if f.samples > 1 { // K = 1 leaves the matrix (its hash: the default folder) as before samples existed
			r.Samples = f.samples
		}
		r.Arms = splitList(f.arms)
		r.Models = splitList(f.models)
		m.Rows = []eval.Row{r}
	}
	m, eps, err := inproc.Plan(ctx, m)
	if err != nil {
		return nil, err
	}
	dir := f.out
	if dir == "" {
		dir = inproc.DefaultDir(m)
	}
	return &evalPlan{matrix: m, episodes: eps, dir: dir}, nil
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func cmdEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, f := newEvalFlagSet(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "pyrualean eval: %v\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pyrualean eval: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if f.status != "" {
		return evalStatus(f.status, f.asJSON, stdout, stderr)
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch {
	case f.jobs < 1 || f.samples < 1:
		fmt.Fprintf(stderr, "pyrualean eval: --jobs %d, --samples %d: must be >= 1\n", f.jobs, f.samples)
		return exitUsage
	case f.maxConns < 0 || f.retries < 0 || f.backoffS < 0 || f.bootAhead < 0:
		fmt.Fprintln(stderr, "pyrualean eval: --max-connections, --retries, --retry-backoff-s and --boot-ahead must be >= 0")
		return exitUsage
	}
	if err := f.ray.validate(set); err != nil {
		fmt.Fprintf(stderr, "pyrualean eval: %v\n", err)
		return exitUsage
	}
	plan, err := planEval(ctx, f, set)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean eval: %v\n", err)
		return exitUsage
	}
	level := slog.LevelError
	if f.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	var engine eval.Engine = eval.Local{Jobs: f.jobs + f.bootAhead}
	var exec eval.Executor
	var onPlan func([]eval.Job)
	if f.ray.engine == "ray" {
		ray, err := f.ray.engineFor(ctx, plan.dir, f.maxConns, logger, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "pyrualean eval: %v\n", err)
			return exitFailed
		}
		engine, exec = ray, ray
	} else {
		x := inproc.New(plan.dir, inproc.Options{Logger: logger, Jobs: f.jobs, BootAhead: f.bootAhead,
			MaxConnections: f.maxConns, NoFork: !f.forkRobots})
		defer x.Close()
		exec, onPlan = x, x.Expect
	}
	var view eval.View
	switch {
	case f.asJSON:
		view = eval.NewJSON(stdout)
	case isTerminal(stderr):
		view = eval.NewProgress(stderr)
	default:
		view = eval.NewLines(stderr)
	}
	retries := f.retries
	if retries == 0 {
		retries = -1
	}
	r := &eval.Runner{Dir: plan.dir, Engine: engine, Exec: exec, Retries: retries, OnPlan: onPlan,
		Backoff: time.Duration(f.backoffS * float64(time.Second)), Versions: eval.BuildVersions(), Events: view.Event, Logger: logger}
	if os.MkdirAll(plan.dir, 0o755) == nil {
		os.MkdirAll(filepath.Join(plan.dir, "episodes"), 0o755)
	}
	man, runErr := r.Run(ctx, plan.matrix, plan.episodes)
	view.Close()
	if man == nil {
		fmt.Fprintf(stderr, "pyrualean eval: %v\n", runErr)
		return exitFailed
	}
	recs, res, err := eval.SaveResults(r.Dir, man)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean eval: %v\n", err)
	}
	if f.asJSON {
		json.NewEncoder(stdout).Encode(map[string]any{"event": "results", "dir": r.Dir, "results": res})
	} else {
		eval.WriteResults(stdout, recs, res)
		fmt.Fprintf(stdout, "\neval folder %s  (report: pyrualean report %s --html report.html)\n", r.Dir, r.Dir)
	}
	if runErr != nil || res.Finished < res.Episodes {
		fmt.Fprintf(stderr, "pyrualean eval: %d of %d episodes unfinished (%v); run the same command again to resume\n", res.Episodes-res.Finished, res.Episodes, errOr(runErr, "retries spent"))
		return exitFailed
	}
	return 0
}

// isTerminal says whether w is a terminal a progress bar can draw on (one that reports a width).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false
	}
	width, _, err := term.GetSize(int(f.Fd()))
	return err == nil && width > 0
}

// evalStatus reports a eval folder, running or not, from its manifest and run folders.
func evalStatus(dir string, asJSON bool, stdout, stderr io.Writer) int {
	man, err := eval.ReadManifest(dir)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean eval --status: %v\n", err)
		return exitFailed
	}
	recs := eval.LoadRecords(dir, man)
	st := eval.StatusOf(man, recs)
	if asJSON {
		return printJSON(stdout, st)
	}
	eval.WriteStatus(stdout, st)
	return 0
}

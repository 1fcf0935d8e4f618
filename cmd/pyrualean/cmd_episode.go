package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/atomicfile"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/eval/inproc"
)

// cmdEpisode runs one suite episode from a job file (eval.NodeJob) and writes its outcome (suite.
// OutcomeRecord) to a file: what a cluster engine's task runs on its node, with the same Executor
// as a local eval. It ends with the process that started it (a Ray worker that dies takes its
// episode and kernel along), so a retried task never races an orphan.
func cmdEpisode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("episode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jobFile := fs.String("job", "", "the job (JSON: episode, dir, suite)")
	outFile := fs.String("outcome", "", "where to write the outcome (JSON)")
	parent := fs.Int("parent-pid", 0, "end at once if this is no longer the parent (default: the parent at start)")
	maxConns := fs.Int("max-connections", 8, "requests in flight per LLM endpoint from this episode (0: no limit)")
	verbose := fs.Bool("v", false, "log progress to stderr")
	node := fs.String("node", "", "the cluster node this runs on (a Ray node id; result.json host.node)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *jobFile == "" || *outFile == "" {
		fmt.Fprintln(stderr, "usage: pyrualean episode --job JOB.json --outcome OUT.json (run by eval --engine ray on a node)")
		return exitUsage
	}
	if err := dieWithParent(*parent); err != nil {
		fmt.Fprintf(stderr, "pyrualean episode: %v\n", err)
		return exitFailed
	}
	var job eval.NodeJob
	b, err := os.ReadFile(*jobFile)
	if err == nil {
		err = json.Unmarshal(b, &job)
	}
	if err == nil && (job.Episode.ID == "" || !filepath.IsAbs(job.Dir) || !filepath.IsAbs(job.Suite)) {
		err = errors.New("want an episode with an id, and absolute dir and eval folders")
	}
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean episode: %s: %v\n", *jobFile, err)
		return exitUsage
	}
	level := slog.LevelError
	if *verbose {
		level = slog.LevelInfo
	}
	// a Ray node runs one episode: no warm pool, no forker (its imports would serve nobody else)
	x := inproc.New(job.Suite, inproc.Options{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		MaxConnections: *maxConns, NoWarmKernels: true, NoFork: true, Node: *node})
	out := x.Execute(ctx, eval.Job{Episode: job.Episode, Dir: job.Dir})
	x.Close()
	if out.Status == "" {
		out.Status = agent.StatusError // as the runner records it
	}
	rec, _ := json.Marshal(out.Record())
	if err := atomicfile.Write(*outFile, append(rec, '\n')); err != nil {
		fmt.Fprintf(stderr, "pyrualean episode: %v\n", err)
		return exitFailed
	}
	return 0
}

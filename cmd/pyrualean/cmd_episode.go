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
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/robotserver"
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
	forkerSock := fs.String("robot-forker", "", "a running robot-server forker's socket (the node's, from `pyrualean robot-forker`): servers are forked from it, not exec'd")
	refDir := fs.String("reference-cache", "", "a folder (0700) keeping the robot's API reference for the episodes this node runs after this one")
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
	// a Ray node's process runs one episode: no warm pool, and no forker of its own (its imports would
	// serve nobody else); the node's forker if it has one
	x := inproc.New(job.Suite, inproc.Options{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		MaxConnections: *maxConns, NoWarmKernels: true, NoFork: *forkerSock == "", ForkerSocket: *forkerSock, Node: *node,
		ReferenceDir: *refDir})
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

// cmdRobotForker starts a robot-server forker and keeps it until its parent (a Ray node's host
// actor) ends or closes its stdin: the node's `pyrualean episode` processes fork their robot
// servers from it (--robot-forker) instead of exec'ing each. It prints "ready SOCKET" once it listens.
func cmdRobotForker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("robot-forker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	parent := fs.Int("parent-pid", 0, "end at once if this is no longer the parent (default: the parent at start)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: pyrualean robot-forker [--parent-pid PID] (run by eval --engine ray's service on each node)")
		return exitUsage
	}
	if err := dieWithParent(*parent); err != nil {
		fmt.Fprintf(stderr, "pyrualean robot-forker: %v\n", err)
		return exitFailed
	}
	root, err := robotapi.Root()
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean robot-forker: %v\n", err)
		return exitFailed
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f, err := robotserver.StartForker(ctx, robotserver.ForkerOptions{Root: root, Logger: logger})
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean robot-forker: %v\n", err)
		return exitFailed
	}
	defer f.Close()
	fmt.Fprintf(stdout, "ready %s\n", f.SocketPath())
	stdinClosed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case <-ctx.Done():
	case <-stdinClosed:
	}
	return 0
}

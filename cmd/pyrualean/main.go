// Command pyrualean runs LLM robot agents that write Python cells into real IPython kernels.
//
// Each subcommand lives in its own file (cmd_<name>.go) and has the signature
// func(ctx context.Context, args []string, stdout, stderr io.Writer) int, returning the exit status:
// 0 ok, 1 the work itself failed (a cell raised, an episode diverged, ...), 2 bad usage. The episode
// commands (play, mcp) and compare follow the original instead: 2 means an episode ended in boot_error or
// error (compare: unmatched or duplicate keys), and bad usage is 64 (EX_USAGE), so the two differ.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/pyrualean/pyrualean/robotapi"
)

// Exit statuses of the episode commands (play, mcp), summarize and compare.
const (
	exitFailed       = 1  // planner_error, interrupted; summarize --strict: unreadable run folders
	exitEpisodeError = 2  // boot_error or error, as the original; compare: unmatched or duplicate keys
	exitUsage        = 64 // a bad flag or value (sysexits EX_USAGE)
)

type command struct {
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	summary string
}

func commands() map[string]command {
	return map[string]command{
		"kernelspecs":  {cmdKernelspecs, "list the kernelspecs jupyter_client would find"},
		"exec":         {cmdExec, "run a .py (# %% cells) or .ipynb file in a fresh kernel"},
		"bench":        {cmdBench, "benchmarks: kernel, robot, tokens, gateway, suite, ray"},
		"api":          {cmdAPI, "print the robot API reference the agent sees"},
		"tasks":        {cmdTasks, "list a robot's tasks"},
		"suites":       {cmdSuites, "list robots, suites and whether they run here"},
		"play":         {cmdPlay, "run one episode (robot x task x seed x model)"},
		"eval":         {cmdEval, "run a suite (tasks x seeds x arms x models) in parallel, resumable"},
		"episode":      {cmdEpisode, "run one suite episode from a job file (what eval --engine ray runs on a node)"},
		"robot-forker": {cmdRobotForker, "keep a robot-server forker for a node's episodes (what eval --engine ray's service runs on a node)"},
		"report":       {cmdReport, "write a suite's self-contained HTML report"},
		"run":          {cmdRun, "run one program (--policy P.py defining run(robo)) against a fresh episode"},
		"generate":     {cmdGenerate, "single shot: ask the model once for a program, save it as policy.py, run it"},
		"prompt":       {cmdPrompt, "print the prompt the agent would get for play's episode flags (no model)"},
		"card":         {cmdCard, "print the episode's task card for play's episode flags (no model)"},
		"summarize":    {cmdSummarize, "tabulate run folders"},
		"compare":      {cmdCompare, "pair two sets of runs and compare them on jointly solved episodes"},
		"replay":       {cmdReplay, "re-execute an episode trace and report divergence"},
		"serve":        {cmdServe, "serve a Jupyter-compatible kernel gateway (--openenv: and OpenEnv's environment protocol)"},
		"rollouts":     {cmdRollouts, "export run folders as training records (rollouts export --format chat|trl|verifiers)"},
		"attach":       {cmdAttach, "attach a Jupyter Server / JupyterLab to a live episode's kernel"},
		"mcp":          {cmdMCP, "serve a live episode as an MCP server"},
		"models":       {cmdModels, "list and install embedded local models"},
	}
}

func usage(w io.Writer) {
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: pyrualean COMMAND [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, cmds[n].summary)
	}
}

func main() {
	preferCheckoutKernelspecs()
	os.Exit(runWithSignals(os.Args[1:]))
}

// preferCheckoutKernelspecs puts this checkout's kernelspecs (setup.sh installs `pyrualean` into
// .venv/share/jupyter) ahead of the user's on JUPYTER_PATH, for this process and the kernels, Jupyter
// Servers and runtimes it starts: a second checkout's setup must not redirect this binary's kernel.
func preferCheckoutKernelspecs() {
	root, err := robotapi.Root()
	if err != nil {
		return
	}
	dir := filepath.Join(root, ".venv", "share", "jupyter")
	if _, err := os.Stat(filepath.Join(dir, "kernels", "pyrualean", "kernel.json")); err != nil {
		return
	}
	if jp := os.Getenv("JUPYTER_PATH"); jp != "" {
		dir += string(os.PathListSeparator) + jp
	}
	os.Setenv("JUPYTER_PATH", dir)
}

// runWithSignals runs a command whose context ends on SIGINT or SIGTERM.
func runWithSignals(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, os.Stdout, os.Stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "pyrualean: unknown command %q (see pyrualean help)\n", args[0])
		return 2
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

// printJSON writes v as indented JSON, the --json form of every listing and bench; 1 when stdout fails.
func printJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return 1
	}
	return 0
}

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
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/mcp"
)

// mcpFlags are `pyrualean mcp`'s flags: the episode's (as play) plus the transport.
type mcpFlags struct {
	robot, suite, task, arm, out, images, feedback, primitives, httpAddr, model string
	seed, maxTurns, maxEnvSteps                                                 int
	budgetS, cellTimeoutS                                                       float64
	guides, verbose                                                             bool
}

func parseMCP(args []string, stderr io.Writer, now time.Time) (*mcpFlags, error) {
	f := &mcpFlags{}
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pyrualean mcp --robot R --task T --seed S [--arm cells|tools] [--out DIR] [--http ADDR]\n\n"+
			"Boots one episode and serves its tools as an MCP server: over stdio (default; stdout is the protocol,\n"+
			"logs go to stderr) or streamable HTTP at http://ADDR/mcp with --http. The episode ends when the\n"+
			"client disconnects (stdio), shortly after finish (http), at --budget-s, or on SIGINT/SIGTERM;\n"+
			"the run folder then holds result.json and trace.ipynb as for play. $PYRUALEAN_ROOT names the\n"+
			"repository when neither the working directory nor the executable lies inside it.")
		fs.PrintDefaults()
	}
	fs.StringVar(&f.robot, "robot", "tabletop", "robot (tabletop, libero, robotwin, robocasa, robodojo_xpl_rgb)")
	fs.StringVar(&f.suite, "suite", "", "benchmark suite")
	fs.StringVar(&f.task, "task", "", "task name (default: the robot's first task)")
	fs.IntVar(&f.seed, "seed", 0, "episode seed")
	fs.StringVar(&f.arm, "arm", agent.ArmCells, "cells (python + finish) or tools (one tool per primitive + finish)")
	fs.StringVar(&f.out, "out", "", "run folder (default runs/<time>-mcp-<robot>-<task>-<arm>)")
	fs.StringVar(&f.images, "images", agent.ImagesOnMotion, "on-motion, on-demand or none")
	fs.StringVar(&f.feedback, "feedback", agent.FeedbackRich, "pure or rich")
	fs.StringVar(&f.primitives, "primitives", agent.PrimitivesFull, "full or no-vla")
	fs.BoolVar(&f.guides, "guides", false, "add the robot's guides to the workspace")
	fs.IntVar(&f.maxTurns, "max-turns", 0, "maximum python/primitive calls (0: no limit; finish never counts)")
	fs.Float64Var(&f.budgetS, "budget-s", 1200, "wall-clock budget in seconds (0: none)")
	fs.Float64Var(&f.cellTimeoutS, "cell-timeout-s", 300, "per-cell timeout in seconds: the kernel is interrupted")
	fs.IntVar(&f.maxEnvSteps, "max-episode-steps", 10000, "simulator step budget")
	fs.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio")
	fs.StringVar(&f.model, "model", "", "model name recorded in result.json (the client's model)")
	fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	oneOf := func(name, v string, allowed ...string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("--%s %q: want one of %s", name, v, strings.Join(allowed, ", "))
	}
	for _, err := range []error{
		oneOf("arm", f.arm, agent.ArmCells, agent.ArmTools),
		oneOf("images", f.images, agent.ImagesOnMotion, agent.ImagesOnDemand, agent.ImagesNone),
		oneOf("feedback", f.feedback, agent.FeedbackPure, agent.FeedbackRich),
		oneOf("primitives", f.primitives, agent.PrimitivesFull, agent.PrimitivesNoVLA),
	} {
		if err != nil {
			return nil, err
		}
	}
	switch {
	case f.robot == "":
		return nil, errors.New("--robot: empty")
	case f.seed < 0:
		return nil, fmt.Errorf("--seed %d: must be >= 0", f.seed)
	case f.maxTurns < 0:
		return nil, fmt.Errorf("--max-turns %d: must be >= 0", f.maxTurns)
	case f.budgetS < 0:
		return nil, fmt.Errorf("--budget-s %g: must be >= 0", f.budgetS)
	case f.cellTimeoutS <= 0:
		return nil, fmt.Errorf("--cell-timeout-s %g: must be > 0", f.cellTimeoutS)
	case f.maxEnvSteps <= 0:
		return nil, fmt.Errorf("--max-episode-steps %d: must be > 0", f.maxEnvSteps)
	}
	if f.out == "" {
		task := f.task
		if task == "" {
			task = "default"
		}
		f.out = filepath.Join("runs", fmt.Sprintf("%s-mcp-%s-%s-%s", now.Format("20060102-150405"), f.robot, task, f.arm))
	}
	return f, nil
}

// cmdMCP serves a live episode as an MCP server.
func cmdMCP(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseMCP(args, stderr, time.Now())
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "pyrualean mcp: %v\n", err)
			return 2
		}
		return 0
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	out, err := filepath.Abs(f.out)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean mcp: %v\n", err)
		return 2
	}
	ep, err := agent.StartEpisode(ctx, agent.EpisodeConfig{
		Robot: f.robot, Suite: f.suite, Task: f.task, Seed: f.seed, Arm: f.arm, Images: f.images,
		Feedback: f.feedback, Primitives: f.primitives, Guides: f.guides, MaxTurns: f.maxTurns,
		Budget: time.Duration(f.budgetS * float64(time.Second)), CellTimeout: time.Duration(f.cellTimeoutS * float64(time.Second)),
		MaxEnvSteps: f.maxEnvSteps, Out: out, Model: f.model, Runtime: "mcp", Logger: logger,
		// A CLI may start us anywhere: $PYRUALEAN_ROOT names the repository when neither the working
		// directory nor the executable lies inside it.
		Root: os.Getenv("PYRUALEAN_ROOT"),
	})
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean mcp: %v\n", err)
		return 2
	}
	// The episode's context ends at the wall-clock budget or when the kernel dies.
	life, stop := ep.Context(ctx)
	defer stop()
	finished := make(chan struct{}, 1)
	srv := mcp.NewServer(ep.Toolkit(), mcp.Options{
		Version: "dev", Logger: logger, Life: life,
		Instructions: ep.Prompt().Text,
		OnCall: func(r mcp.CallRecord) {
			if r.Result.Finished {
				select {
				case finished <- struct{}{}:
				default:
				}
			}
		},
	})

	var serveErr error
	if f.httpAddr == "" {
		logger.Info("serving MCP over stdio", "run", out)
		// Stdout is the protocol: nothing else may be written to it.
		serveErr = srv.Run(life, &sdk.IOTransport{Reader: io.NopCloser(os.Stdin), Writer: nopWriteCloser{stdout}})
	} else {
		hs, err := mcp.ListenHTTP(srv, f.httpAddr, logger)
		if err != nil {
			ep.Finish(ctx, agent.StatusError, err)
			fmt.Fprintf(stderr, "pyrualean mcp: %v\n", err)
			return 2
		}
		fmt.Fprintf(stderr, "pyrualean mcp: serving %s (run folder %s)\n", hs.URL, out)
		select {
		case <-life.Done():
		case <-finished:
			// Let the client read finish's result before the endpoint goes away.
			select {
			case <-life.Done():
			case <-time.After(2 * time.Second):
			}
		}
		hs.Close()
	}
	var runErr error
	if cause := context.Cause(life); life.Err() != nil && !errors.Is(cause, context.Canceled) {
		runErr = cause // budget or a dead kernel
	} else if serveErr != nil && !errors.Is(serveErr, context.Canceled) && !errors.Is(serveErr, io.EOF) {
		logger.Info("MCP session ended", "err", serveErr)
	}
	stop()
	idle, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	_ = srv.Idle(idle)
	cancel()
	res, err := ep.Finish(context.WithoutCancel(ctx), "", runErr)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean mcp: %v\n", err)
	}
	line, _ := json.Marshal(map[string]any{"arm": res.Arm, "status": res.Status, "environment_success": res.EnvironmentSuccess,
		"finish": res.Finish, "tool_turns": res.ToolTurns, "stateful_calls": res.StatefulCalls, "env_steps": res.EnvSteps,
		"policy_wall_s": res.PolicyWallS, "run": out})
	if f.httpAddr == "" {
		fmt.Fprintln(stderr, string(line)) // stdout belongs to the protocol
	} else {
		fmt.Fprintln(stdout, string(line))
	}
	if res.Status == agent.StatusBootError || res.Status == agent.StatusError {
		return 2
	}
	return 0
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

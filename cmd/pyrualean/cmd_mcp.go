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
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/mcp"
	"github.com/pyrualean/pyrualean/spec"
)

// mcpFlags are `pyrualean mcp`'s flags: the episode's (as play's, without the runtime's: the client
// is the policy) plus the transport.
type mcpFlags struct {
	*episodeFlags
	httpAddr string
	verbose  bool
	episode  spec.Episode // validated, its run folder named
}

func parseMCP(ctx context.Context, args []string, stderr io.Writer, now time.Time) (*mcpFlags, error) {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pyrualean mcp --robot R --task T --seed S [--arm cells|tools] [--out DIR] [--http ADDR]\n\n"+
			"Boots one episode and serves its tools as an MCP server: over stdio (default; stdout is the protocol,\n"+
			"logs go to stderr) or streamable HTTP at http://ADDR/mcp with --http. The episode ends when the\n"+
			"client disconnects (stdio), shortly after finish (http), at --budget-s, or on SIGINT/SIGTERM;\n"+
			"the run folder then holds result.json and trace.ipynb as for play. $PYRUALEAN_ROOT names the\n"+
			"repository when neither the working directory nor the executable lies inside it.\n"+
			"Exit status: 0, 1 interrupted, 2 boot_error or error (as the original), 64 bad usage.")
		fs.PrintDefaults()
	}
	f := &mcpFlags{episodeFlags: newEpisodeFlags("mcp", fs, mcpSkips...)}
	fs.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio")
	fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	f.policy = "mcp"
	ep, err := f.finish(ctx, now)
	if err != nil {
		return nil, err
	}
	f.episode = ep
	return f, nil
}

// mcpSkips are the settings of a policy run by us, which an MCP client (the policy itself) has no use for.
var mcpSkips = []string{"runtime", "from", "reasoning", "base-url", "api-key-env", "openai-max-tokens", "openai-tool-choice",
	"openai-temperature", "openai-extra-body", "openai-images-in-tool", "openai-max-images", "openai-text-only", "record-tokens", "prices"}

// cmdMCP serves a live episode as an MCP server.
func cmdMCP(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseMCP(ctx, args, stderr, time.Now())
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "pyrualean mcp: %v\n", err)
			return exitUsage
		}
		return 0
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	out := f.episode.Out
	// A CLI may start us anywhere: $PYRUALEAN_ROOT names the repository when neither the working
	// directory nor the executable lies inside it.
	ep, err := agent.StartEpisode(ctx, f.episode, agent.Host{Logger: logger, Root: os.Getenv("PYRUALEAN_ROOT")})
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean mcp: %v\n", err)
		return exitEpisodeError
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
			return exitEpisodeError
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
	return statusExit(res.Status)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

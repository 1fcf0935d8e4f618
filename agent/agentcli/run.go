package agentcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/pyrualean/pyrualean/agent"
)

// agentCLI is what one agent CLI brings to runCLI, the attempt loop Codex and Claude Code share.
type agentCLI interface {
	// files names the CLI and its run-folder files.
	files() cliFiles
	// prepare readies the run once the CLI is resolved, before the MCP server starts; done (when not
	// nil, even with an error) runs when the run ends.
	prepare(ep Driver, cfg Config, s cliSetup) (done func(), err error)
	// command is one attempt's process (argv, environment, working directory) and its stdin.
	command(ep Driver, cfg Config, s cliSetup, r *run) (*exec.Cmd, io.Reader)
	// newStream follows one attempt's stdout.
	newStream() cliStream
}

// cliFiles are a CLI's name and run-folder files.
type cliFiles struct{ name, events, stderr, home string }

// cliStream follows one attempt's event stream, and tells what the attempt did once the CLI exited.
type cliStream interface {
	line(b []byte)
	session() string
	// turns are the attempt's LLM calls, in order.
	turns() []agent.Turn
	// settle hands the episode and info what the stream says beyond its turns (totals, cost, the
	// CLI's last message, cancelled calls).
	settle(ep Driver, info *Info, cfg Config)
	// failed says why the attempt failed; "" when it ended well (or at a ceiling, which is no failure).
	failed(code *int, stderr func() string) string
}

// runCLI drives ep with the CLI until it ends, finish was called (it then gets FinishGrace to wrap
// up), the budget runs out (an error wrapping agent.ErrBudgetExceeded) or ctx ends. A CLI that
// fails before the first tool call is run again, up to PlannerAttempts times.
func runCLI(ctx context.Context, ep Driver, cfg Config, c agentCLI) error {
	cfg.defaults()
	f := c.files()
	setup, err := prepare(ctx, ep, cfg, f.name, f.events, f.stderr, f.home)
	if err != nil {
		return err
	}
	done, err := c.prepare(ep, cfg, setup)
	if done != nil {
		defer done()
	}
	if err != nil {
		return err
	}
	r, cleanup, err := startRun(ctx, ep.Dir(), ep, cfg, f.name, f.events, f.stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	a := &attempts{ep: ep, cfg: cfg, cli: c, setup: setup, run: r, info: setup.info}
	for n := 1; ; n++ {
		why, end, err := a.once(n)
		switch {
		case end:
			return err
		case why == "":
			return nil
		case a.info.ToolCalls > 0 || n >= cfg.PlannerAttempts:
			return fmt.Errorf("%w: %s", agent.ErrPlanner, why)
		}
		cfg.Logger.Warn(f.name+" failed before its first tool call; retrying", "attempt", n, "err", why)
		if err := sleepCtx(r.ctx, cfg.PlannerRetryWait); err != nil {
			return err
		}
	}
}

// attempts are the CLI runs of one episode.
type attempts struct {
	ep    Driver
	cfg   Config
	cli   agentCLI
	setup cliSetup
	run   *run
	info  Info // published after each attempt
	turns int  // LLM calls recorded so far
}

// once runs the CLI for attempt n and records what it did. end says the run is over (with err, nil
// when the model finished); otherwise why is the attempt's failure, "" when it ended well.
func (a *attempts) once(n int) (why string, end bool, err error) {
	a.ep.Record().PlannerAttempts(n)
	st := a.cli.newStream()
	cmd, stdin := a.cli.command(a.ep, a.cfg, a.setup, a.run)
	done := make(chan struct{})
	code, killed, runErr := runProcess(a.run.ctx, runSpec{
		cmd: cmd, stdin: stdin, events: a.run.events, stderr: a.run.stderr, onLine: st.line,
		grace: a.cfg.KillGrace, stopEarly: finishWatch(a.run.session, a.cfg.FinishGrace, done),
	})
	close(done)
	a.info.ExitCode, a.info.Killed, a.info.SessionID, a.info.Attempts = code, killed, st.session(), n
	a.info.ToolCalls, a.info.Cancelled = a.run.session.toolCalls()
	publish(a.ep, a.info)
	for _, t := range st.turns() {
		a.turns++
		t.Turn = a.turns
		if err := a.ep.Record().Turn(t); err != nil {
			return "", true, err
		}
	}
	st.settle(a.ep, &a.info, a.cfg)
	publish(a.ep, a.info)
	if runErr != nil {
		return "", true, runErr
	}
	if err, ok := endReason(a.run.ctx, killed, a.ep.Finished()); ok {
		return "", true, err
	}
	f := a.cli.files()
	return st.failed(code, func() string { return tail(filepath.Join(a.ep.Dir(), f.stderr), 400) }), false, nil
}

// run is what both CLI runtimes set up before their first attempt: the CLI's working directory,
// its event and stderr files in the run folder, the budget's context and the MCP server.
type run struct {
	ctx       context.Context // ends at cfg.Budget (cause agent.ErrBudgetExceeded) or with the caller's
	workspace string          // the CLI's working directory
	events    *os.File
	stderr    *os.File
	session   *session
}

// startRun sets up a run in dir for the CLI called name. cleanup closes the MCP server (with the
// budget's cause, or "<name> run ended"), then ends the budget context and closes the files.
func startRun(ctx context.Context, dir string, ep Driver, cfg Config, name, eventsName, stderrName string) (r *run, cleanup func(), err error) {
	r = &run{workspace: filepath.Join(dir, "workspace")}
	if err := os.MkdirAll(r.workspace, 0o755); err != nil {
		return nil, nil, fmt.Errorf("cli: %w", err)
	}
	if r.events, err = createFile(dir, eventsName); err != nil {
		return nil, nil, err
	}
	if r.stderr, err = createFile(dir, stderrName); err != nil {
		r.events.Close()
		return nil, nil, err
	}
	bctx, cancel := budgetContext(ctx, cfg.Budget)
	closeAll := func() {
		cancel()
		r.stderr.Close()
		r.events.Close()
	}
	if r.session, err = serve(bctx, ep, cfg.Logger); err != nil {
		closeAll()
		return nil, nil, err
	}
	r.ctx = bctx
	return r, func() {
		// The cause is read before cancel, which would make it context.Canceled.
		cause := context.Cause(bctx)
		if cause == nil {
			cause = errors.New(name + " run ended")
		}
		r.session.close(cause)
		closeAll()
	}, nil
}

// cliSetup is what both runtimes resolve before a run: the binary, the API key, and the CLI's home
// directory in the run folder; the CLI's name and version are published to the episode.
type cliSetup struct {
	bin, key, home string
	info           Info // published already; the run loop adds exit codes, tool calls and cost
}

// prepare resolves the CLI called name (cfg.Bin or found on the path), its API key and version,
// publishes them as the episode's CLI info, and creates its home directory homeName in the run folder.
func prepare(ctx context.Context, ep Driver, cfg Config, name, eventsName, stderrName, homeName string) (cliSetup, error) {
	s := cliSetup{bin: cfg.Bin}
	var err error
	if s.bin == "" {
		if s.bin, err = FindBin(name); err != nil {
			return s, err
		}
	}
	if s.key, err = apiKey(cfg, name); err != nil {
		return s, err
	}
	s.info = Info{Name: name, Events: eventsName, Stderr: stderrName}
	if s.info.Version, err = Version(ctx, s.bin); err != nil {
		return s, err
	}
	publish(ep, s.info)
	s.home = filepath.Join(ep.Dir(), homeName)
	if cfg.Home != "" && name == "codex" {
		s.home = cfg.Home
	}
	if err := os.MkdirAll(s.home, 0o755); err != nil {
		return s, fmt.Errorf("cli: %w", err)
	}
	return s, nil
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

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

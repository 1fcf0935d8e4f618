package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/gateway"
	"github.com/pyrualean/pyrualean/openenv"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/robotserver"
	"github.com/pyrualean/pyrualean/spec"
)

// openenvFlags are serve's --openenv flags: the OpenEnv environment server at /ws beside the gateway.
type openenvFlags struct {
	on                   bool
	out                  string
	maxSessions          int
	idle                 time.Duration
	maxFrame             int64
	maxTurns, maxSteps   int
	maxBudgetS, maxCellS float64
	sealed               string
	allow, set           listFlag
	forker               *robotserver.Forker // the sessions' robot servers are forked from it (nil: exec'd)
}

func addOpenEnvFlags(fs *flag.FlagSet) *openenvFlags {
	f := &openenvFlags{}
	fs.BoolVar(&f.on, "openenv", false, "also serve OpenEnv's environment protocol at /ws (a session = one sealed episode at a time; token auth as the gateway's)")
	fs.StringVar(&f.out, "openenv-out", "runs/openenv", "folder the OpenEnv sessions' run folders go under")
	fs.IntVar(&f.maxSessions, "openenv-max-sessions", 4, "OpenEnv sessions at once (more are refused with CAPACITY_REACHED)")
	fs.DurationVar(&f.idle, "openenv-idle-timeout", 10*time.Minute, "an OpenEnv session with no frame for this long expires (its episode: interrupted)")
	fs.Int64Var(&f.maxFrame, "openenv-max-frame-bytes", 1<<20, "largest OpenEnv frame accepted from a client")
	fs.IntVar(&f.maxTurns, "openenv-max-turns", 50, "the most calls a client's episode may allow (max_turns; 0: no cap)")
	fs.IntVar(&f.maxSteps, "openenv-max-steps", 200, "steps an OpenEnv episode may take, refused calls included (they are not turns); the episode ends there (0: no limit)")
	fs.Float64Var(&f.maxBudgetS, "openenv-max-budget-s", 1200, "the most policy seconds a client's episode may have (budget_s; 0: no cap)")
	fs.Float64Var(&f.maxCellS, "openenv-max-cell-timeout-s", 300, "the longest a client's cell may run (cell_timeout_s; 0: no cap)")
	fs.StringVar(&f.sealed, "openenv-sealed", spec.SealOn, "on (episodes start sealed or not at all) or auto (unsealed where this machine has no sandbox, recorded sealed: false)")
	fs.Var(&f.allow, "openenv-allow", "settings a client may give at reset (repeatable or comma-separated; default: "+strings.Join(openenv.DefaultSettings, ",")+")")
	fs.Var(&f.set, "openenv-set", "a setting every OpenEnv episode starts from, NAME=VALUE as play's flags (repeatable; e.g. images=none)")
	return f
}

// server builds the OpenEnv server from the flags; nil when --openenv is off. The error is a usage one.
func (f *openenvFlags) server(gw *gateway.Server, log *slog.Logger) (*openenv.Server, error) {
	if !f.on {
		return nil, nil
	}
	switch {
	case f.maxSessions < 1 || f.idle <= 0 || f.maxFrame < 1024 || f.maxTurns < 0 || f.maxSteps < 0 || f.maxBudgetS < 0 || f.maxCellS < 0:
		return nil, errors.New("--openenv-max-sessions >= 1, --openenv-idle-timeout > 0, --openenv-max-frame-bytes >= 1024, and the caps >= 0")
	case f.sealed != spec.SealOn && f.sealed != spec.SealAuto:
		return nil, fmt.Errorf("--openenv-sealed %q: want on or auto (an OpenEnv episode is never unsealed on purpose)", f.sealed)
	}
	base := spec.New()
	for _, kv := range f.set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--openenv-set %q: want NAME=VALUE", kv)
		}
		if st, ok := spec.Lookup(k); ok && st.PerEpisode && !slices.Contains([]string{"robot", "suite", "task", "seed", "arm"}, st.Name) {
			return nil, fmt.Errorf("--openenv-set %q: %s is the server's own (runtime, run folder) or the client's", kv, st.Name)
		}
		if err := base.Set(k, v); err != nil {
			return nil, fmt.Errorf("--openenv-set: %w", err)
		}
	}
	base.Sealed = f.sealed
	var allow []string
	for _, a := range f.allow {
		a = strings.ReplaceAll(a, "_", "-")
		if _, ok := spec.Lookup(a); !ok {
			return nil, fmt.Errorf("--openenv-allow %q: %w", a, spec.ErrUnknownSetting)
		}
		if a == "sealed" || a == "out" || a == "runtime" || a == "from" {
			return nil, fmt.Errorf("--openenv-allow %q: the server decides it", a)
		}
		allow = append(allow, a)
	}
	out, err := filepath.Abs(f.out)
	if err != nil {
		return nil, err
	}
	if root, err := robotapi.Root(); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		f.forker, err = robotserver.StartForker(ctx, robotserver.ForkerOptions{Root: root, Logger: log})
		cancel()
		if err != nil {
			log.Warn("openenv: robot servers will be exec'd, not forked", "err", err)
		}
	}
	srv, err := openenv.New(openenv.Config{
		Base: base, Out: out, Robots: &robotapi.Registry{}, Host: agent.Host{Logger: log, Forker: f.forker},
		Limits:      openenv.Limits{Settings: allow, MaxTurns: f.maxTurns, MaxSteps: f.maxSteps, MaxBudgetS: f.maxBudgetS, MaxCellTimeoutS: f.maxCellS},
		MaxSessions: f.maxSessions, IdleTimeout: f.idle, MaxFrameBytes: f.maxFrame, CheckOrigin: gw.OriginAllowed,
		OnEpisode: func(ep *agent.Episode) func() { return listEpisode(gw, ep, log) }, Logger: log,
	})
	if err != nil {
		f.close()
	}
	return srv, err
}

// close stops the forker (once the sessions have ended: their servers run on until then).
func (f *openenvFlags) close() {
	if f.forker != nil {
		f.forker.Close()
	}
}

// listEpisode lists an OpenEnv episode's kernel and its /api/episodes entry in the gateway, as play
// --serve does, so people can watch (or join) a rollout from JupyterLab; the func removes them.
func listEpisode(gw *gateway.Server, ep *agent.Episode, log *slog.Logger) func() {
	kid, err := gw.AddLiveKernel(ep.PersonKernel(), gateway.LiveSpec{Name: liveSpecName(ep.ID()),
		DisplayName: "pyrualean OpenEnv episode " + ep.ID(), Base: ep.Kernel().Spec().Name})
	if err != nil {
		log.Warn("openenv: episode kernel not listed in the gateway", "episode", ep.ID(), "err", err)
		return func() {}
	}
	gw.AddEpisode(ep.Controller(), kid)
	return func() {
		gw.RemoveEpisode(ep.ID())
		gw.RemoveKernel(kid)
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/gateway"
	"github.com/pyrualean/pyrualean/prices"
	"github.com/pyrualean/pyrualean/spec"
)

// playFlags are `pyrualean play`'s flags: the episode's (spec.Settings) and what only play has.
type playFlags struct {
	*episodeFlags
	priceIn, priceCached, priceOut float64
	verbose                        bool
	serve, serveToken              string
	serveLinger                    time.Duration
}

func newPlayFlagSet(stderr io.Writer) (*flag.FlagSet, *playFlags) {
	fs := flag.NewFlagSet("play", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pyrualean play [--robot R | --suite S] [--task T] [--seed N] [--arm cells|tools|program] [--runtime NAME] [--model M] [flags]\n\n"+
			"Runs one episode and prints one JSON line (arm, status, environment_success, finish, ...).\n"+
			"Exit status: 0 the episode ran (solved or not), 1 planner_error or interrupted, 2 boot_error or\n"+
			"error (as the original), 64 bad usage (a flag or value refused before anything started).\n"+
			"Environment: PYRUALEAN_RUNTIME (default --runtime), PYRUALEAN_MODEL, PYRUALEAN_PRIMITIVES,\n"+
			"PYRUALEAN_CODEX_HOME (CODEX_HOME for --runtime codex), OPENAI_BASE_URL, OPENAI_API_KEY.")
		fs.PrintDefaults()
	}
	f := &playFlags{episodeFlags: newEpisodeFlags("play", fs)}
	fs.Float64Var(&f.priceIn, "price-input", -1, "$ per million input tokens (overrides --prices for the model)")
	fs.Float64Var(&f.priceCached, "price-cached", -1, "$ per million cached input tokens")
	fs.Float64Var(&f.priceOut, "price-output", -1, "$ per million output tokens")
	fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
	fs.StringVar(&f.serve, "serve", "", "serve a Jupyter-compatible gateway on ADDR (e.g. 127.0.0.1:8890) with this episode's kernel, for people to attach")
	fs.StringVar(&f.serveToken, "serve-token", "", "the gateway's token (default $PYRUALEAN_TOKEN, else a random one printed on stderr)")
	fs.DurationVar(&f.serveLinger, "serve-linger", 0, "with --serve: keep the kernel (its robot) and the gateway this long after the episode ends, for people to work in it (shown as \"episode over\"; Ctrl-C ends it sooner)")
	return fs, f
}

// playSetup is a validated play invocation.
type playSetup struct {
	episode spec.Episode
	host    agent.Host
	rt      runtimes.Runtime
	serve   string // gateway address; "" = none
	token   string
	linger  time.Duration // keep kernel and gateway after the end
	stderr  io.Writer
}

// parsePlay validates every flag before anything starts; the error is one line for the user.
func parsePlay(ctx context.Context, args []string, stderr io.Writer, now time.Time) (*playSetup, error) {
	fs, f := newPlayFlagSet(stderr)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	s := &playSetup{serve: f.serve, token: f.serveToken, linger: f.serveLinger, stderr: stderr}
	switch {
	case f.serveLinger < 0:
		return nil, fmt.Errorf("--serve-linger %s: want a duration >= 0", f.serveLinger)
	case f.serveLinger > 0 && f.serve == "":
		return nil, errors.New("--serve-linger keeps the --serve gateway: give --serve ADDR too")
	}
	if s.serve != "" {
		if _, _, err := net.SplitHostPort(s.serve); err != nil {
			return nil, fmt.Errorf("--serve %q: want HOST:PORT: %v", s.serve, err)
		}
		if s.token == "" {
			s.token = os.Getenv("PYRUALEAN_TOKEN")
		}
	}
	ep, err := f.finish(ctx, now)
	if err != nil {
		return nil, err
	}
	logger := cmdLogger(stderr, f.verbose)
	rt, err := runtimes.For(ep, runtimes.Wiring{Logger: logger, Progress: stderr})
	if err != nil {
		if ep.Policy.Runtime == "local" && f.spec.Policy.Runtime == "" {
			err = fmt.Errorf("%w; no --base-url or $OPENAI_BASE_URL, so the local runtime was chosen (name one with --runtime)", err)
		}
		return nil, err
	}
	if f.priceIn >= 0 || f.priceOut >= 0 || f.priceCached >= 0 {
		if f.priceIn < 0 || f.priceOut < 0 {
			return nil, errors.New("--price-input and --price-output go together")
		}
		cached := f.priceCached
		if cached < 0 {
			cached = f.priceIn
		}
		own := &prices.Table{Models: map[string]prices.Price{rt.Model(): {Input: f.priceIn, CachedInput: cached, Output: f.priceOut, Origin: "--price-input"}}}
		if ep.Policy.Prices != nil {
			own = ep.Policy.Prices.Merge(own)
		}
		ep.Policy.Prices = own
		if rt, err = runtimes.For(ep, runtimes.Wiring{Logger: logger, Progress: stderr}); err != nil {
			return nil, err
		}
	}
	ep.Policy.Model = rt.Model()
	s.episode, s.rt, s.host = ep, rt, agent.Host{Logger: logger}
	return s, nil
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// playLine is play's one line of stdout (the original's §11, plus the run folder).
type playLine struct {
	Arm                string            `json:"arm"`
	Status             string            `json:"status"`
	EnvironmentSuccess *bool             `json:"environment_success"`
	Finish             *agent.FinishInfo `json:"finish"`
	ToolTurns          int               `json:"tool_turns"`
	StatefulCalls      int               `json:"stateful_calls"`
	EnvSteps           int               `json:"env_steps"`
	PolicyWallS        float64           `json:"policy_wall_s"`
	LLMCalls           int               `json:"llm_calls"`
	InputTokens        int               `json:"input_tokens"`
	RunDir             string            `json:"run_dir"`
	Trace              string            `json:"trace"`
}

func cmdPlay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	s, err := parsePlay(ctx, args, stderr, time.Now())
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "pyrualean play: %v\n", err)
			return exitUsage
		}
		return 0
	}
	res, err := playEpisode(ctx, s)
	if res == nil { // nothing was recorded: the runtime could not start
		fmt.Fprintf(stderr, "pyrualean play: %v\n", err)
		if ctx.Err() != nil {
			return exitFailed
		}
		return exitEpisodeError
	}
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean play: %v\n", err)
	}
	line := playLine{
		Arm: res.Arm, Status: res.Status, EnvironmentSuccess: res.EnvironmentSuccess, Finish: res.Finish,
		ToolTurns: res.ToolTurns, StatefulCalls: res.StatefulCalls, EnvSteps: res.EnvSteps, PolicyWallS: res.PolicyWallS,
		LLMCalls: res.Generation.Turns, InputTokens: res.Generation.InputTokens,
		RunDir: s.episode.Out, Trace: filepath.Join(s.episode.Out, res.Files.Trace),
	}
	b, _ := json.Marshal(line)
	fmt.Fprintln(stdout, string(b))
	return statusExit(res.Status)
}

// statusExit is an episode command's exit status for the episode's status: 2 for boot_error and
// error (as the original), 1 for the other ways the work failed, 0 otherwise.
func statusExit(status string) int {
	switch status {
	case agent.StatusBootError, agent.StatusError:
		return exitEpisodeError
	case agent.StatusPlannerError, agent.StatusInterrupted:
		return exitFailed
	}
	return 0
}

// playEpisode boots the episode, runs the runtime and finishes. A boot failure returns the
// boot_error result written to result.json.
func playEpisode(ctx context.Context, s *playSetup) (*agent.Result, error) {
	// The runtime starts before the episode, so a model's load time is not policy time.
	if err := s.rt.Start(ctx); err != nil {
		return nil, err
	}
	defer s.rt.Close()
	s.episode.Policy.Model = s.rt.Model()
	ep, err := agent.StartEpisode(ctx, s.episode, s.host)
	if err != nil {
		if errors.Is(err, agent.ErrBoot) {
			if row, lerr := readResult(s.episode.Out); lerr == nil {
				return row, err
			}
		}
		return nil, err
	}
	if s.serve != "" {
		stopServe, err := serveEpisode(ctx, s, ep)
		if err != nil {
			runErr := fmt.Errorf("--serve: %w", err)
			return ep.Finish(context.WithoutCancel(ctx), agent.StatusError, runErr)
		}
		defer stopServe()
		if s.linger > 0 {
			// Finish keeps the kernel; it goes when the linger does (or Ctrl-C).
			ep.KeepKernel(time.Now().Add(s.linger)) // re-set from the real end below
			defer ep.Close(context.WithoutCancel(ctx))
			res, err := runtimes.Play(ctx, s.rt, ep)
			until := time.Now().Add(s.linger)
			ep.KeepKernel(until)
			fmt.Fprintf(s.stderr, "pyrualean play: episode over (%s); its kernel and gateway stay until %s (--serve-linger %s; Ctrl-C ends it sooner)\n",
				resultStatus(res), until.Format(time.TimeOnly), s.linger)
			select {
			case <-ctx.Done():
			case <-time.After(s.linger):
			case <-ep.Kernel().Done(): // nothing left to work in
			}
			return res, err
		}
	}
	return runtimes.Play(ctx, s.rt, ep)
}

func resultStatus(r *agent.Result) string {
	if r == nil {
		return "no result"
	}
	return r.Status
}

// serveEpisode runs the gateway in-process with the episode's kernel and its /api/episodes entry, so a
// person can attach JupyterLab to the kernel the agent drives. The returned func stops it.
func serveEpisode(ctx context.Context, s *playSetup, ep *agent.Episode) (func(), error) {
	srv := gateway.New(gateway.Config{Token: s.token, Logger: s.host.Logger})
	// The episode's kernel is listed under a spec of its own, so JupyterLab shows it apart from the
	// kernels its launcher starts and can connect to it without attach; interrupts through the gateway
	// are a person's (PersonKernel).
	kid, err := srv.AddLiveKernel(ep.PersonKernel(), gateway.LiveSpec{Name: liveSpecName(ep.ID()),
		DisplayName: "pyrualean episode " + ep.ID() + " (live agent kernel)", Base: ep.Kernel().Spec().Name})
	if err != nil {
		return nil, err
	}
	srv.AddEpisode(ep.Controller(), kid)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe(sctx, s.serve, func(a net.Addr) { ready <- a }) }()
	select {
	case a := <-ready:
		fmt.Fprintf(s.stderr, "pyrualean play: gateway http://%s token %s (episode %s, kernel %s)\n", a, srv.Token(), ep.ID(), kid)
		fmt.Fprintf(s.stderr, "  attach: jupyter lab --gateway-url=http://%s --GatewayClient.auth_token=%s, then pyrualean attach --gateway http://%s --gateway-token %s --server <lab url>\n", a, srv.Token(), a, srv.Token())
	case err := <-errc:
		cancel()
		return nil, err
	}
	return func() {
		srv.RemoveEpisode(ep.ID())
		srv.RemoveKernel(kid)
		cancel()
		<-errc
	}, nil
}

// liveSpecName is the kernelspec name an episode's kernel is listed under: pyrualean-episode-<id>,
// lowercased, other characters as '-'.
func liveSpecName(id string) string {
	return "pyrualean-episode-" + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, id)
}

func readResult(dir string) (*agent.Result, error) { return agent.ReadResult(dir) }

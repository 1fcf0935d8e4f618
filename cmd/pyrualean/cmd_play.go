package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/cli"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/gateway"
)

// playFlags are `pyrualean play`'s flags (the seed's, plus the openai runtime's).
type playFlags struct {
	episodeFlags
	model, cudaDevice, runtime                             string
	baseURL, apiKeyEnv, toolChoice, temperature, extraBody string
	from, reasoning, prices                                string
	promptProfile                                          string
	maxTokens, maxImages                                   int
	priceIn, priceCached, priceOut                         float64
	imagesInTool, textOnly, verbose                        bool
	serve, serveToken                                      string
	serveLinger                                            time.Duration
}

func newPlayFlagSet(stderr io.Writer) (*flag.FlagSet, *playFlags) {
	f := &playFlags{episodeFlags: episodeFlags{cmd: "play"}}
	fs := flag.NewFlagSet("play", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pyrualean play [--robot R | --suite S] [--task T] [--seed N] [--arm cells|tools] [--runtime NAME] [--model M] [flags]\n\n"+
			"Runs one episode and prints one JSON line (arm, status, environment_success, finish, ...).\n"+
			"Exit status: 0 the episode ran (solved or not), 1 planner_error or interrupted, 2 boot_error or\n"+
			"error (as the seed), 64 bad usage (a flag or value refused before anything started).\n"+
			"Environment: PYRUALEAN_RUNTIME (default --runtime), PYRUALEAN_MODEL, PYRUALEAN_PRIMITIVES,\n"+
			"PYRUALEAN_CODEX_HOME (CODEX_HOME for --runtime codex), OPENAI_BASE_URL, OPENAI_API_KEY.")
		fs.PrintDefaults()
	}
	f.register(fs)
	fs.StringVar(&f.model, "model", "", "model name sent to the endpoint (default $PYRUALEAN_MODEL, else gpt-6-astra)")
	fs.StringVar(&f.reasoning, "reasoning", "", "reasoning effort recorded in result.json (and sent as reasoning_effort when set; --runtime codex: default xhigh, as the seed)")
	fs.StringVar(&f.cudaDevice, "cuda-device", "", "CUDA_VISIBLE_DEVICES for the kernel")
	fs.StringVar(&f.runtime, "runtime", "", "openai (any OpenAI-compatible endpoint), local (embedded llama.cpp model), codex, claude, or replay (fixed actions, no model); default: $PYRUALEAN_RUNTIME, else openai when --base-url or $OPENAI_BASE_URL is set, else local")
	fs.StringVar(&f.from, "from", "", "replay: a trace (.ipynb) or a percent-format script (.py) of agent cells")
	fs.StringVar(&f.baseURL, "base-url", "", "OpenAI-compatible base URL (default $OPENAI_BASE_URL; --runtime openai without either: https://api.openai.com/v1)")
	fs.StringVar(&f.apiKeyEnv, "api-key-env", "", "environment variable holding the API key (default OPENAI_API_KEY; claude: ANTHROPIC_API_KEY)")
	fs.IntVar(&f.maxTokens, "openai-max-tokens", 0, "max_tokens per reply (0: server default)")
	fs.StringVar(&f.toolChoice, "openai-tool-choice", "", "tool_choice: auto, required or none (default: not sent)")
	fs.StringVar(&f.temperature, "openai-temperature", "", "temperature, sent even when 0 (default: not sent)")
	fs.StringVar(&f.extraBody, "openai-extra-body", "", "JSON object merged into every request body (top_p, top_k, chat_template_kwargs, ...)")
	fs.BoolVar(&f.imagesInTool, "openai-images-in-tool", false, "put images inside tool messages instead of a following user message")
	fs.IntVar(&f.maxImages, "openai-max-images", 0, "keep only the newest N images in the replayed history (0: all)")
	fs.BoolVar(&f.textOnly, "openai-text-only", false, "the model takes no images: send a note instead (set for --runtime local)")
	fs.StringVar(&f.prices, "prices", "", "price table JSON {model: {input, cached_input, output}} in $ per million tokens")
	fs.Float64Var(&f.priceIn, "price-input", -1, "$ per million input tokens (overrides --prices for --model)")
	fs.Float64Var(&f.priceCached, "price-cached", -1, "$ per million cached input tokens")
	fs.Float64Var(&f.priceOut, "price-output", -1, "$ per million output tokens")
	fs.StringVar(&f.promptProfile, "prompt-profile", "", "default (the seed's prompt) or compact (fewer words, the examples' primitives first, worked examples from other task families; cells arm); default: compact for --runtime local, else default")
	fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
	fs.StringVar(&f.serve, "serve", "", "serve a Jupyter-compatible gateway on ADDR (e.g. 127.0.0.1:8890) with this episode's kernel, for people to attach")
	fs.StringVar(&f.serveToken, "serve-token", "", "the gateway's token (default $PYRUALEAN_TOKEN, else a random one printed on stderr)")
	fs.DurationVar(&f.serveLinger, "serve-linger", 0, "with --serve: keep the kernel (its robot) and the gateway this long after the episode ends, for people to work in it (shown as \"episode over\"; Ctrl-C ends it sooner)")
	return fs, f
}

// playSetup is a validated play invocation.
type playSetup struct {
	episode  agent.EpisodeConfig
	runtime  string // the table's name for it
	rt       runtimes.Runtime
	settings runtimes.Settings
	serve    string // gateway address; "" = none
	token    string
	linger   time.Duration // keep kernel and gateway after the end
	stderr   io.Writer
}

// parsePlay validates every flag before anything starts; the error is one line for the user.
func parsePlay(args []string, stderr io.Writer, now time.Time) (*playSetup, error) {
	fs, f := newPlayFlagSet(stderr)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	implied := f.runtime == ""
	if implied {
		f.runtime = runtimes.Default(f.baseURL)
	}
	entry, err := runtimes.Lookup(f.runtime)
	if err != nil && implied {
		return nil, fmt.Errorf("$PYRUALEAN_RUNTIME: %w (fix or unset it, or pass --runtime)", err)
	} else if err != nil {
		return nil, fmt.Errorf("--runtime: %w", err)
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	switch {
	case entry.Name == "replay" && f.from == "":
		return nil, errors.New("--runtime replay needs --from TRACE.ipynb|CELLS.py")
	case entry.Name != "replay" && f.from != "":
		return nil, fmt.Errorf("--from is only for --runtime replay (the runtime is %s)", entry.Name)
	}
	s := &playSetup{runtime: entry.Name, serve: f.serve, token: f.serveToken, linger: f.serveLinger, stderr: stderr}
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
	prices := agent.PriceTable{}
	if f.prices != "" {
		t, err := agent.ReadPriceTable(f.prices)
		if err != nil {
			return nil, fmt.Errorf("--prices: %w", err)
		}
		prices = t
	}
	extra := map[string]any{}
	if f.extraBody != "" {
		if err := json.Unmarshal([]byte(f.extraBody), &extra); err != nil || extra == nil {
			return nil, fmt.Errorf("--openai-extra-body: want a JSON object: %v", errOr(err, "null"))
		}
	}
	var temp *float64
	if f.temperature != "" {
		t, err := strconv.ParseFloat(f.temperature, 64)
		if err != nil {
			return nil, fmt.Errorf("--openai-temperature %q: want a number in [0, 2]", f.temperature)
		}
		temp = &t
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if f.reasoning == "" && s.runtime == "codex" {
		f.reasoning = cli.CodexReasoningDefault // the seed's default effort for Codex
	}
	s.episode = f.config(now)
	s.episode.Logger = logger
	if s.episode.PromptProfile, err = promptProfile(f.promptProfile, s.runtime, f.arm); err != nil {
		return nil, err
	}
	s.settings = runtimes.Settings{Logger: logger, Progress: stderr,
		Model: f.model, Reasoning: f.reasoning, BaseURL: f.baseURL, APIKeyEnv: f.apiKeyEnv, Arm: f.arm, From: f.from,
		MaxTurns: f.maxTurns, Budget: s.episode.Budget, Prices: prices, CodexHome: os.Getenv("PYRUALEAN_CODEX_HOME"),
		OpenAI: runtimes.OpenAIOptions{MaxTokens: f.maxTokens, ToolChoice: f.toolChoice, Temperature: temp, ExtraBody: extra,
			ImagesInTool: f.imagesInTool, MaxImages: f.maxImages, TextOnly: f.textOnly},
	}
	rt, err := runtimes.New(s.runtime, s.settings)
	if err != nil {
		if s.runtime == "local" && implied {
			err = fmt.Errorf("%w; no --base-url or $OPENAI_BASE_URL, so the local runtime was chosen (name one with --runtime)", err)
		}
		return nil, err
	}
	s.rt = rt
	model := rt.Model()
	if f.priceIn >= 0 || f.priceOut >= 0 || f.priceCached >= 0 {
		if f.priceIn < 0 || f.priceOut < 0 {
			return nil, errors.New("--price-input and --price-output go together")
		}
		cached := f.priceCached
		if cached < 0 {
			cached = f.priceIn
		}
		prices[model] = agent.Price{Input: f.priceIn, CachedInput: cached, Output: f.priceOut}
	}
	s.episode.Model, s.episode.Runtime, s.episode.ReasoningEffort = model, s.runtime, f.reasoning
	s.episode.CUDADevice, s.episode.Prices = f.cudaDevice, prices
	return s, nil
}

// promptProfile resolves --prompt-profile: compact by default for the local runtime's small models in
// the cells arm, the seed's prompt otherwise.
func promptProfile(flag, runtime, arm string) (string, error) {
	switch {
	case flag == "" && runtime == "local" && arm == agent.ArmCells:
		return agent.ProfileCompact, nil
	case flag == "":
		return agent.ProfileDefault, nil
	case flag != agent.ProfileDefault && flag != agent.ProfileCompact:
		return "", fmt.Errorf("--prompt-profile %q: want default or compact", flag)
	case flag == agent.ProfileCompact && arm != agent.ArmCells:
		return "", fmt.Errorf("--prompt-profile compact is for --arm cells (the arm is %s)", arm)
	}
	return flag, nil
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// playLine is play's one line of stdout (seed §11, plus the run folder).
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
	s, err := parsePlay(args, stderr, time.Now())
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
// error (as the seed), 1 for the other ways the work failed, 0 otherwise.
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
	s.episode.Model = s.rt.Model()
	ep, err := agent.StartEpisode(ctx, s.episode)
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
	srv := gateway.New(gateway.Config{Token: s.token, Logger: s.episode.Logger})
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

func readResult(dir string) (*agent.Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		return nil, err
	}
	var r agent.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

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
	"github.com/pyrualean/pyrualean/gateway"
	"github.com/pyrualean/pyrualean/llm"
)

// playFlags are `pyrualean play`'s flags (the seed's, plus the openai runtime's).
type playFlags struct {
	episodeFlags
	model, cudaDevice, runtime                             string
	baseURL, apiKeyEnv, toolChoice, temperature, extraBody string
	from, reasoning, prices                                string
	maxTokens, maxImages                                   int
	priceIn, priceCached, priceOut                         float64
	imagesInTool, textOnly, verbose                        bool
	serve, serveToken                                      string
}

func newPlayFlagSet(stderr io.Writer) (*flag.FlagSet, *playFlags) {
	f := &playFlags{episodeFlags: episodeFlags{cmd: "play"}}
	fs := flag.NewFlagSet("play", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.register(fs)
	fs.StringVar(&f.model, "model", "", "model name sent to the endpoint (default $PYRUALEAN_MODEL, else gpt-6-astra)")
	fs.StringVar(&f.reasoning, "reasoning", "", "reasoning effort recorded in result.json (and sent as reasoning_effort when set)")
	fs.StringVar(&f.cudaDevice, "cuda-device", "", "CUDA_VISIBLE_DEVICES for the kernel")
	fs.StringVar(&f.runtime, "runtime", "", "openai (any OpenAI-compatible endpoint), local (embedded llama.cpp model), codex, claude, or replay (fixed actions, no model); default: openai when --base-url or $OPENAI_BASE_URL is set, else local")
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
	fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
	fs.StringVar(&f.serve, "serve", "", "serve a Jupyter-compatible gateway on ADDR (e.g. 127.0.0.1:8890) with this episode's kernel, for people to attach")
	fs.StringVar(&f.serveToken, "serve-token", "", "the gateway's token (default $PYRUALEAN_TOKEN, else a random one printed on stderr)")
	return fs, f
}

// playSetup is a validated play invocation.
type playSetup struct {
	episode agent.EpisodeConfig
	openai  agent.OpenAIConfig
	cli     cli.Config  // codex, claude
	local   llm.Options // local
	actions []agent.Action
	runtime string
	serve   string // gateway address; "" = none
	token   string
	stderr  io.Writer
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
	// With no runtime named, an endpoint given means openai; none means the embedded local model, so
	// play runs with no network and no API key.
	implied := f.runtime == ""
	if implied {
		f.runtime = "local"
		if f.baseURL != "" || os.Getenv("OPENAI_BASE_URL") != "" {
			f.runtime = "openai"
		}
	}
	if err := oneOf("runtime", f.runtime, "openai", "replay", "local", "codex", "claude"); err != nil {
		return nil, err
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	if err := oneOf("openai-tool-choice", f.toolChoice, "", "auto", "required", "none"); err != nil {
		return nil, err
	}
	switch {
	case f.maxImages < 0:
		return nil, fmt.Errorf("--openai-max-images %d: must be >= 0", f.maxImages)
	case f.maxTokens < 0:
		return nil, fmt.Errorf("--openai-max-tokens %d: must be >= 0", f.maxTokens)
	case f.runtime == "replay" && f.from == "":
		return nil, errors.New("--runtime replay needs --from TRACE.ipynb|CELLS.py")
	case f.runtime != "replay" && f.from != "":
		return nil, errors.New("--from is only for --runtime replay")
	}
	s := &playSetup{runtime: f.runtime, serve: f.serve, token: f.serveToken, stderr: stderr}
	if s.serve != "" {
		if _, _, err := net.SplitHostPort(s.serve); err != nil {
			return nil, fmt.Errorf("--serve %q: want HOST:PORT: %v", s.serve, err)
		}
		if s.token == "" {
			s.token = os.Getenv("PYRUALEAN_TOKEN")
		}
	}
	model := f.model
	if model == "" && (f.runtime == "openai" || f.runtime == "codex") {
		model = os.Getenv("PYRUALEAN_MODEL")
		if model == "" {
			model = "gpt-6-astra"
		}
	}
	if f.runtime == "replay" {
		model = "replay"
		acts, err := agent.LoadActions(f.from, f.arm)
		if err != nil {
			return nil, fmt.Errorf("--from: %w", err)
		}
		s.actions = acts
	}
	prices := agent.PriceTable{}
	if f.prices != "" {
		t, err := agent.ReadPriceTable(f.prices)
		if err != nil {
			return nil, fmt.Errorf("--prices: %w", err)
		}
		prices = t
	}
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
	s.episode = f.config(now)
	s.episode.Model, s.episode.Runtime, s.episode.ReasoningEffort = model, f.runtime, f.reasoning
	s.episode.CUDADevice, s.episode.Prices = f.cudaDevice, prices
	if f.runtime == "codex" || f.runtime == "claude" {
		if f.runtime == "claude" && f.model == "" {
			model = ""
		}
		s.cli = cli.Config{Model: model, ReasoningEffort: f.reasoning, BaseURL: f.baseURL, APIKeyEnv: f.apiKeyEnv,
			Budget: s.episode.Budget, MaxTurns: f.maxTurns}
		if model == "" {
			s.episode.Model = f.runtime
		}
	}
	if f.runtime == "local" {
		s.local = llm.Options{Model: f.model}
		if _, err := llm.Lookup(f.model); err != nil {
			hint := "see pyrualean models"
			if implied {
				hint += "; no --base-url or $OPENAI_BASE_URL, so the local runtime was chosen"
			}
			return nil, fmt.Errorf("--model: %w (%s)", err, hint)
		}
	}
	if f.runtime == "openai" || f.runtime == "local" {
		extra := map[string]any{}
		if f.extraBody != "" {
			if err := json.Unmarshal([]byte(f.extraBody), &extra); err != nil || extra == nil {
				return nil, fmt.Errorf("--openai-extra-body: want a JSON object: %v", errOr(err, "null"))
			}
		}
		if f.reasoning != "" {
			if _, set := extra["reasoning_effort"]; !set {
				extra["reasoning_effort"] = f.reasoning
			}
		}
		var temp *float64
		if f.temperature != "" {
			t, err := strconv.ParseFloat(f.temperature, 64)
			if err != nil || t < 0 || t > 2 {
				return nil, fmt.Errorf("--openai-temperature %q: want a number in [0, 2]", f.temperature)
			}
			temp = &t
		}
		base := f.baseURL
		if base == "" {
			base = os.Getenv("OPENAI_BASE_URL")
		}
		if base == "" {
			base = "https://api.openai.com/v1"
		}
		if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
			return nil, fmt.Errorf("--base-url %q: want an http(s) URL", base)
		}
		keyEnv := f.apiKeyEnv
		if keyEnv == "" {
			keyEnv = "OPENAI_API_KEY"
		}
		maxCalls := 0
		if f.maxTurns > 0 {
			maxCalls = f.maxTurns + 10
		}
		s.openai = agent.OpenAIConfig{
			BaseURL: base, APIKey: os.Getenv(keyEnv), Model: model, MaxTokens: f.maxTokens,
			ToolChoice: f.toolChoice, Temperature: temp, ExtraBody: extra, ImagesInToolMessages: f.imagesInTool, TextOnly: f.textOnly, MaxImages: f.maxImages,
			MaxLLMCalls: maxCalls, Prices: prices,
		}
	}
	return s, nil
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
			return 2
		}
		return 0
	}
	level := slog.LevelWarn
	if hasFlag(args, "v") {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	s.episode.Logger = logger
	s.openai.Logger = logger
	s.cli.Logger = logger
	s.local.Logger = logger
	res, err := playEpisode(ctx, s)
	if res == nil {
		fmt.Fprintf(stderr, "pyrualean play: %v\n", err)
		return 1
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
	switch res.Status {
	case agent.StatusBootError, agent.StatusError, agent.StatusPlannerError, agent.StatusInterrupted:
		return 1
	}
	return 0
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "-"+name || a == "--"+name {
			return true
		}
	}
	return false
}

// playEpisode boots the episode, runs the runtime and finishes. A boot failure returns the
// boot_error result written to result.json.
func playEpisode(ctx context.Context, s *playSetup) (*agent.Result, error) {
	if s.runtime == "local" {
		// The model loads before the episode starts, so its load time is not policy time.
		srv, err := llm.Start(ctx, s.local)
		if err != nil {
			return nil, fmt.Errorf("local model: %w", err)
		}
		defer srv.Stop()
		s.openai.BaseURL, s.openai.Model, s.openai.APIKey = srv.BaseURL, srv.Model, "local"
		s.openai.TextOnly = true // the embedded models are text models
		s.episode.Model = srv.Model
	}
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
	}
	pctx, cancel := ep.Context(ctx)
	var runErr error
	switch s.runtime {
	case "replay":
		runErr = agent.RunReplay(pctx, ep, s.actions)
	case "codex", "claude":
		runErr = cli.Run(pctx, s.runtime, ep, s.cli)
	default:
		runErr = agent.RunOpenAI(pctx, ep, s.openai)
	}
	if runErr != nil && pctx.Err() != nil && ctx.Err() == nil {
		// The policy context ended first: say why (budget or kernel death), not just "canceled".
		if cause := context.Cause(pctx); cause != nil && !errors.Is(runErr, cause) {
			runErr = fmt.Errorf("%w: %w", cause, runErr)
		}
	}
	cancel()
	return ep.Finish(context.WithoutCancel(ctx), "", runErr)
}

// serveEpisode runs the gateway in-process with the episode's kernel and its /api/episodes entry, so a
// person can attach JupyterLab to the kernel the agent drives. The returned func stops it.
func serveEpisode(ctx context.Context, s *playSetup, ep *agent.Episode) (func(), error) {
	srv := gateway.New(gateway.Config{Token: s.token, Logger: s.episode.Logger})
	kid := srv.AddKernel(ep.Kernel(), ep.Kernel().Spec().Name)
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

package runtimes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/llm"
)

// Local turn defaults: a small model on a few CPU cores writes a cell in well under this many tokens,
// and a reply that has not ended by then is looping (server.py cuts a loop back to its first writing).
// 512, not 384: drawer cells written with every keyword run to ~400 tokens; at 384 all three replies
// of open_drawer seed 1 were cut before their closing fence and nothing ran.
const (
	LocalMaxTokens   = 512
	LocalTemperature = 0.2
	// LocalSeed is the sampling seed every request carries unless the settings name one
	// (--openai-extra-body '{"seed": N}', or a suite's per-sample seeds): the same prompt then gets the
	// same reply, so an episode of the embedded model (make demo among them) replays as it ran. Without
	// it llama.cpp draws a seed per request, and the demo's first reply differed from run to run
	// (solved with its first call on one clean clone, not solved in ten calls on the next).
	LocalSeed = 1
	// localRequestTimeout only backs up the turn deadline, which is the real bound of a reply.
	localRequestTimeout = 3 * time.Hour
)

// localRuntime is an embedded llama.cpp server (package llm) behind the openai Chat. Episodes
// run at the same time share the one server (and its prompt cache). Its turns are bounded: each
// reply gets max_tokens and a deadline from the speed the server measured, and one past it ends
// the episode with a planner error instead of a retry. The prompt's shared prefix is computed once:
// llama.cpp keeps it across turns and episodes, and slot files under models/slots keep it across
// processes.
type localRuntime struct {
	opts     llm.Options
	srv      *llm.Server
	cfg      OpenAIConfig // the endpoint: the server's, once started
	loop     LoopConfig
	chat     Chat      // set by Start
	toolChat Chat      // the tools arm's (jsonCallChat), set by Start
	progress io.Writer // in-flight progress lines; nil: none
	logger   *slog.Logger

	// turn is the server's one slot: one request at a time. Episodes run at once take turns, each
	// turn's deadline starting when it has the slot, its prompt prefix restored when another held it.
	turn chan struct{}

	restart sync.Mutex      // one ensureServing at a time
	life    context.Context // Start's: a server ensureServing starts lives as long as the first, not an episode

	mu       sync.Mutex
	speed    speed
	slotKey  string          // the prompt prefix slot 0 holds (or was restored to)
	saved    map[string]bool // slot files known to exist
	restored map[string]int  // tokens restored per key (for the record)
}

// speed is the model's measured throughput on this machine, in tokens per second.
type speed struct{ prompt, gen float64 }

// Model is the registry name asked for until Start, then the model the server loaded.
func (r *localRuntime) Model() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg.Model
}

// server is the server in use (ensureServing may replace it while episodes run).
func (r *localRuntime) server() *llm.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv
}

func (r *localRuntime) Start(ctx context.Context) error {
	r.life = ctx
	srv, err := llm.Start(ctx, r.opts)
	if err != nil {
		return fmt.Errorf("local model: %w", err)
	}
	r.srv = srv
	r.cfg.BaseURL, r.cfg.Model = srv.BaseURL, srv.Model
	r.chat = NewOpenAIChat(r.cfg)
	r.toolChat = newJSONCallChat(r.cfg)
	sp, err := measureSpeed(ctx, srv)
	if err != nil {
		srv.Stop()
		return fmt.Errorf("local model: measuring its speed: %w", err)
	}
	r.speed = sp
	r.logger.Info("local model speed", "prompt_tok_s", agent.Round(sp.prompt, 3), "gen_tok_s", agent.Round(sp.gen, 3))
	return nil
}

func (r *localRuntime) Run(ctx context.Context, ep agent.Driver) error {
	if r.server() == nil {
		return fmt.Errorf("local runtime: Run before Start")
	}
	if err := r.ensureServing(ctx); err != nil {
		return err
	}
	key := r.prefixKey(ep)
	loop := r.loop
	loop.Admit = func(ctx context.Context) (func(), error) { return r.admit(ctx, key) }
	loop.Model = r.Model()
	loop.TurnDeadline = r.deadline
	loop.OnReply = func(ctx context.Context, t agent.Turn) { r.learn(ctx, key, t) }
	if r.progress != nil {
		loop.Watch = r.watch
	}
	r.mu.Lock()
	chat, toolChat := r.chat, r.toolChat
	r.mu.Unlock()
	if primitivesArm(ep.Toolkit().Tools()) {
		chat = toolChat
	} else {
		chat = blockChat{chat, ep.Prompt().ReplyStart}
	}
	return RunLoop(ctx, ep, chat, loop)
}

// blockChat is the cells arm's chat with the embedded server, whose replies are ```python blocks
// (llm/server.py): every block begins with start (Prompt.ReplyStart, the server's code_block_start;
// none if empty), and a block cut at max_tokens is answered with what happened instead of the loop's
// generic nudge (the small model otherwise writes the same overlong cell again).
type blockChat struct {
	Chat
	start string
}

func (c blockChat) Reply(ctx context.Context, req ChatRequest) (Reply, error) {
	if c.start != "" {
		extra := map[string]any{"code_block_start": c.start}
		for k, v := range req.Extra {
			extra[k] = v
		}
		req.Extra = extra
	}
	rep, err := c.Chat.Reply(ctx, req)
	if err == nil && len(rep.ToolCalls) == 0 && rep.FinishReason == "length" {
		rep.Nudge = cutCellNudge(rep.Usage.OutputTokens)
	}
	return rep, err
}

// cutCellNudge tells the model its cell ran out of tokens before the block closed.
func cutCellNudge(tokens int) string {
	return fmt.Sprintf("Your cell was cut off after %d tokens, before its closing ```, so nothing ran. "+
		"Write a short cell: a few lines of code that act (no comments copied from the task, no repeated lines), "+
		"and close it with ```.", tokens)
}

// primitivesArm says whether tools are the tools arm's (a tool per primitive): neither python (cells)
// nor run_program (program), whose code the server takes as a code block or a JSON string.
func primitivesArm(tools []agent.ToolSpec) bool {
	for _, t := range tools {
		if t.Name == "python" || t.Name == agent.ToolRunProgram {
			return false
		}
	}
	return len(tools) > 0
}

// ensureServing starts a server again when the one in use has gone: a reused server whose process
// ended (another play's), or ours, crashed. Without it every later episode of an eval failed at its
// first request, in a second each (measured: 80 of 140 before anyone looked).
func (r *localRuntime) ensureServing(ctx context.Context) error {
	r.restart.Lock()
	defer r.restart.Unlock()
	r.mu.Lock()
	old := r.srv
	r.mu.Unlock()
	gone := old.Serving(ctx)
	if gone == nil {
		return nil
	}
	r.logger.Warn("local model server gone; starting one", "url", old.BaseURL, "reused", old.Reused, "err", gone)
	srv, err := llm.Start(r.life, r.opts)
	if err != nil {
		return fmt.Errorf("local model: the server at %s has gone (%v) and another did not start: %w", old.BaseURL, gone, err)
	}
	old.Stop()
	cfg := r.cfg
	cfg.BaseURL, cfg.Model = srv.BaseURL, srv.Model
	r.mu.Lock()
	r.srv, r.cfg = srv, cfg
	r.chat, r.toolChat = NewOpenAIChat(cfg), newJSONCallChat(cfg)
	r.slotKey = "" // the new server's slot holds no prefix
	r.mu.Unlock()
	return nil
}

func (r *localRuntime) Close() error {
	if srv := r.server(); srv != nil {
		return srv.Stop()
	}
	return nil
}

// deadline is the longest a reply to requestChars characters may take: the whole request processed
// without any cache (about 3 characters a token for code and English) plus max_tokens generated, at
// the measured speeds, with a 50 % margin and 20 s of slack. A reply that needs longer is looping
// or the machine is swamped; either way waiting longer does not help.
func (r *localRuntime) deadline(requestChars int) time.Duration {
	r.mu.Lock()
	sp, maxTokens := r.speed, r.cfg.MaxTokens
	r.mu.Unlock()
	if maxTokens <= 0 {
		maxTokens = LocalMaxTokens
	}
	s := float64(requestChars)/3/sp.prompt + float64(maxTokens)/sp.gen
	return time.Duration((1.5*s + 20) * float64(time.Second))
}

// learn takes the speeds the server reported for a reply, and saves the prompt cache after an
// episode's first reply when no slot file holds its prefix yet.
func (r *localRuntime) learn(ctx context.Context, key string, t agent.Turn) {
	r.mu.Lock()
	if tm := t.Timings; tm != nil {
		// A few tokens say little about speed; keep the estimate until a real measurement comes.
		if tm.PromptN >= 64 && tm.PromptPerSecond > 0 {
			r.speed.prompt = tm.PromptPerSecond
		}
		if tm.PredictedN >= 16 && tm.PredictedPerSecond > 0 {
			r.speed.gen = tm.PredictedPerSecond
		}
	}
	srv := r.srv
	save := t.Turn == 1 && !r.saved[key] && srv.SlotFile(key) != ""
	if save {
		r.saved[key] = true
	}
	r.mu.Unlock()
	if !save {
		return
	}
	if _, err := os.Stat(srv.SlotFile(key)); err == nil {
		return
	}
	if n, err := srv.SaveSlot(ctx, key); err != nil {
		r.logger.Warn("local model: prompt cache not saved", "err", err)
	} else {
		r.logger.Info("local model: prompt cache saved", "tokens", n, "file", srv.SlotFile(key))
	}
}

// admit waits for the server's slot, then has it hold the prefix of key (useSlot).
func (r *localRuntime) admit(ctx context.Context, key string) (release func(), err error) {
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	r.useSlot(ctx, key)
	var once sync.Once
	return func() { once.Do(func() { <-r.turn }) }, nil
}

// useSlot restores the slot file of key into the server's slot when the slot holds another prefix
// (a fresh server, or another task family's episode ran last).
func (r *localRuntime) useSlot(ctx context.Context, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slotKey == key {
		return // llama.cpp still has it (its own prompt cache)
	}
	r.slotKey = key
	file := r.srv.SlotFile(key)
	if file == "" {
		return
	}
	if _, err := os.Stat(file); err != nil {
		return
	}
	r.saved[key] = true
	n, err := r.srv.RestoreSlot(ctx, key)
	if err != nil {
		r.logger.Warn("local model: prompt cache not restored", "err", err)
		return
	}
	r.restored[key] = n
	r.logger.Info("local model: prompt cache restored", "tokens", n, "file", file)
}

// prefixKey names the prompt prefix shared by episodes (everything before the task card), for one
// model file, context size, tool set and reply format (they change what the chat template renders
// before the prompt): a slot file saved under it serves any episode whose prompt starts so.
func (r *localRuntime) prefixKey(ep agent.Driver) string {
	prefix, _, _ := strings.Cut(ep.Prompt().Text, "# Task card")
	r.mu.Lock()
	srv, codeBlockTool := r.srv, r.cfg.ExtraBody["code_block_tool"]
	r.mu.Unlock()
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%v\x00", srv.Path, r.opts.CtxSize, codeBlockTool)
	for _, t := range ep.Toolkit().Tools() {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", t.Name, t.Description, t.Parameters)
	}
	h.Write([]byte(prefix))
	return srv.Model + "-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// watch prints the progress of a turn that takes more than a few seconds, from llama.cpp's /slots.
func (r *localRuntime) watch(ctx context.Context, turn int) {
	start := time.Now()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p, err := r.server().Progress(ctx)
		if err != nil || !p.Processing {
			continue
		}
		// llama.cpp counts the prompt in batches of 2048 tokens, the cached ones included.
		phase := fmt.Sprintf("reading the prompt: %d tokens done, %d of them from the cache", max(p.PromptProcessed, p.PromptCached), p.PromptCached)
		if p.Generated > 0 {
			phase = fmt.Sprintf("writing: %d tokens so far", p.Generated)
		}
		fmt.Fprintf(r.progress, "[local] turn %d, %s, %.0f s\n", turn, phase, time.Since(start).Seconds())
	}
}

// measureSpeed times one short request: prompt processing and generation speed on this machine,
// before any episode relies on them for its deadlines.
func measureSpeed(ctx context.Context, srv *llm.Server) (speed, error) {
	t, err := srv.Calibrate(ctx)
	if err != nil {
		return speed{}, err
	}
	if t.PromptPerSecond <= 0 || t.PredictedPerSecond <= 0 {
		return speed{}, fmt.Errorf("the server reported no speed (%+v)", t)
	}
	return speed{prompt: t.PromptPerSecond, gen: t.PredictedPerSecond}, nil
}

func newLocal(s Settings) (Runtime, error) {
	if _, err := llm.Lookup(s.Model); err != nil {
		return nil, fmt.Errorf("--model: %w (see pyrualean models)", err)
	}
	if s.BaseURL != "" {
		return nil, fmt.Errorf("--base-url %q: the local runtime serves its own model (use --runtime openai for an endpoint)", s.BaseURL)
	}
	s.BaseURL = "http://127.0.0.1" // validated here; Start puts in the server's
	s.OpenAI.TextOnly = true       // the embedded models are text models
	if s.OpenAI.MaxTokens == 0 {
		s.OpenAI.MaxTokens = LocalMaxTokens
	}
	if s.OpenAI.ToolChoice == "" {
		s.OpenAI.ToolChoice = "required" // the server then constrains the reply to one valid tool call
	}
	if s.OpenAI.Temperature == nil {
		t := LocalTemperature
		s.OpenAI.Temperature = &t
	}
	cfg, err := openaiConfig(s, s.Model)
	if err != nil {
		return nil, err
	}
	cfg.APIKey = "local"
	if _, set := cfg.ExtraBody["seed"]; !set {
		cfg.ExtraBody["seed"] = LocalSeed
	}
	if _, set := cfg.ExtraBody["code_block_tool"]; !set {
		// The server has the model write its python calls as ```python blocks (llm/server.py).
		cfg.ExtraBody["code_block_tool"] = "python"
	}
	// The server is on loopback: a failed request is not a flaky network, and a generation that ran
	// out its deadline would only run out again.
	cfg.HTTPAttempts = 1
	// The turn deadline (from the measured speed) bounds each reply; the HTTP client's own 10-minute
	// default would cut a first turn that a loaded 2-core machine reads for longer (measured: a 3,600-token
	// prompt at 7 tokens/s, then generation at well under 1 token/s, cut at 600 s with its deadline far off).
	cfg.RequestTimeout = localRequestTimeout
	loop := loopSettings(s, s.Model)
	loop.PlannerAttempts, loop.FinishGrace = 1, -1
	logger := s.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &localRuntime{
		opts: llm.Options{Model: s.Model, Logger: s.Logger, Port: s.Local.Port, SlotDir: s.Local.SlotDir},
		cfg:  cfg, loop: loop, progress: s.Progress, logger: logger,
		saved: map[string]bool{}, restored: map[string]int{}, turn: make(chan struct{}, 1),
	}, nil
}

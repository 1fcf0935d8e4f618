// Package runtimes drives episodes with a model. play, mcp and eval look a runtime up by name with
// its Settings, start it once, and run it on as many episodes as they like:
//
//	rt, err := runtimes.New("openai", settings) // validates the settings; starts nothing
//	err = rt.Start(ctx)                         // loads what it needs (the local model)
//	defer rt.Close()
//	res, err := runtimes.Play(ctx, rt, ep)      // drives ep, then ep.Finish
//
// The agent loop is written once and the model backends are small (smolagents' Model/agent split):
//
//   - loop.go: RunLoop, the loop: turns and the LLM-call ceiling, AwaitTurn before each decision and
//     what people did as a message, the planner retry before the first tool call (only for errors the
//     backend marked Retryable), the finish grace, the no-tool-call streak, turn deadlines and watch
//     hooks, and one agent.Turn per LLM call via Driver.Record().Turn (tokens.go: tokens.jsonl).
//   - history.go: the backend-neutral conversation the loop keeps (text, images, tool calls and
//     results): where images go, notes for text-only models, trimming old images.
//   - chat.go: Chat, what a backend implements: the conversation and tool specs in, one assistant
//     Reply (text, tool calls with ids, usage, timings, tokens, raw extras) or a classified error out.
//
// Backends and runtimes, one file each plus one line in Table:
//
//   - openai.go (+ httpdoer.go, openai_reply.go): any OpenAI-compatible chat completions endpoint.
//   - anthropic.go: the Anthropic Messages API.
//   - local.go: an embedded llama.cpp server (package llm) behind the openai Chat, with its turn
//     deadlines, progress and prompt-cache slots.
//   - generate.go: one single-shot request for a program (`pyrualean generate`), with any Chat.
//   - cli.go: the Codex CLI and Claude Code (package agent/cli), which run their own loops.
//   - scripted.go: fixed actions from a trace or a script, no model (`--runtime replay`).
//   - spec.go: a spec's policy to a runtime name (Resolve) and its Settings (SettingsFor).
//
// Adding a model backend: a file with a type implementing Chat and a constructor
// func(Settings) (Runtime, error) returning &chatRuntime{chat, loopSettings(s, model)}; one row in Table.
package runtimes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/prices"
)

// Runtime drives live episodes. One Runtime may drive many episodes, one after the other or at once.
type Runtime interface {
	// Model is the model name recorded in result.json (known after Start).
	Model() string
	// Start loads what Run needs (the local runtime's model server); it comes before any episode
	// starts, so load time is not policy time.
	Start(ctx context.Context) error
	// Run drives ep until the model calls finish, the episode ends, or ctx ends. It returns nil when
	// the model finished (or stopped on its own), an error wrapping agent.ErrPlanner when the provider
	// failed, or the context's error; the caller then calls ep.Finish, which derives the status.
	Run(ctx context.Context, ep agent.Driver) error
	// Close releases what Start started.
	Close() error
}

// Settings configure a runtime; each runtime reads the fields it needs and refuses the ones it cannot
// use. The zero value is each runtime's default.
type Settings struct {
	Model     string // "" : the runtime's default ($PYRUALEAN_MODEL for openai and codex)
	Reasoning string // reasoning effort: openai/local reasoning_effort, codex model_reasoning_effort, claude --effort
	BaseURL   string // "" : $OPENAI_BASE_URL (openai), else the runtime's default
	APIKeyEnv string // environment variable holding the API key ("" : OPENAI_API_KEY, claude ANTHROPIC_API_KEY)
	Arm       string // the episodes' arm (the scripted runtime checks its actions fit it)
	From      string // scripted: a trace (.ipynb) or a percent-format script (.py)
	MaxTurns  int    // the episodes' --max-turns (bounds the LLM calls)
	Budget    time.Duration
	Prices    *prices.Table
	OpenAI    OpenAIOptions // openai and local
	Local     LocalOptions  // local
	CodexHome string        // codex: CODEX_HOME to use instead of a fresh one in the run folder
	// HTTPClient carries the openai and local runtimes' requests (eval shares one, with per-endpoint
	// limits, among all its episodes); nil: a client of their own.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Progress gets the local runtime's progress lines while a slow turn runs (play: stderr); nil: none.
	Progress io.Writer
	// RecordTokens asks the endpoint for each reply's token ids and logprobs and writes them to
	// tokens.jsonl in the run folder (openai, local, anthropic where the API gives them).
	RecordTokens bool
}

// LocalOptions place the local runtime's server; the zero value is the usual one.
type LocalOptions struct {
	Port    int    // 0: llm.DefaultPort, reusing a server there that serves the model
	SlotDir string // saved prompt caches; "": models/slots
}

// OpenAIOptions are the request settings of the runtimes that make their own model calls (openai,
// local, anthropic): the --openai-* flags.
type OpenAIOptions struct {
	MaxTokens    int            // 0: server default
	ToolChoice   string         // "", "auto", "required", "none"
	Temperature  *float64       // sent even when 0
	ExtraBody    map[string]any // merged into every request body
	ImagesInTool bool           // images inside tool messages instead of a following user message
	MaxImages    int            // keep only the newest N images in the history (0: all)
	TextOnly     bool           // the model takes no images
}

// Entry is one line of the runtime table.
type Entry struct {
	Name    string
	Aliases []string // other names accepted on the command line
	Help    string
	// New validates settings and starts nothing, so eval can check every row before it runs.
	New func(Settings) (Runtime, error)
}

// Table is every runtime, in the order help lists them. Adding a runtime: one file, one line here.
func Table() []Entry {
	return []Entry{
		{Name: "openai", Help: "any OpenAI-compatible chat completions endpoint", New: newOpenAI},
		{Name: "anthropic", Help: "the Anthropic Messages API", New: newAnthropic},
		{Name: "local", Help: "an embedded llama.cpp model (see pyrualean models)", New: newLocal},
		{Name: "codex", Help: "the Codex CLI", New: newCodex},
		{Name: "claude", Help: "Claude Code", New: newClaude},
		{Name: "replay", Aliases: []string{"scripted"}, Help: "the scripted runtime: fixed actions from --from, no model", New: newScripted},
	}
}

// ErrUnknown means no runtime has the name asked for.
var ErrUnknown = errors.New("unknown runtime")

// Lookup finds a runtime by name or alias.
func Lookup(name string) (Entry, error) {
	for _, e := range Table() {
		if e.Name == name {
			return e, nil
		}
		for _, a := range e.Aliases {
			if a == name {
				return e, nil
			}
		}
	}
	return Entry{}, fmt.Errorf("%w %q: want one of %s", ErrUnknown, name, strings.Join(Names(), ", "))
}

// Names lists the names the command line accepts.
func Names() []string {
	var out []string
	for _, e := range Table() {
		out = append(out, e.Name)
		out = append(out, e.Aliases...)
	}
	return out
}

// New looks up the named runtime and configures it with settings; it starts nothing.
func New(name string, s Settings) (Runtime, error) {
	e, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return e.New(s)
}

// Default is the runtime used when none is named: $PYRUALEAN_RUNTIME, else openai when an endpoint is
// given (baseURL or $OPENAI_BASE_URL), else the embedded local model, so play runs with no network.
func Default(baseURL string) string {
	if v := os.Getenv("PYRUALEAN_RUNTIME"); v != "" {
		return v
	}
	if baseURL != "" || os.Getenv("OPENAI_BASE_URL") != "" {
		return "openai"
	}
	return "local"
}

// Play runs rt on a started episode within its policy context (budget, kernel death), then finishes
// it: the result is what result.json holds.
func Play(ctx context.Context, rt Runtime, ep *agent.Episode) (*agent.Result, error) {
	pctx, cancel := ep.Context(ctx)
	runErr := rt.Run(pctx, ep)
	if runErr != nil && pctx.Err() != nil && ctx.Err() == nil {
		// The policy context ended first: say why (budget or kernel death), not just "canceled".
		if cause := context.Cause(pctx); cause != nil && !errors.Is(runErr, cause) {
			runErr = fmt.Errorf("%w: %w", cause, runErr)
		}
	}
	cancel()
	return ep.Finish(context.WithoutCancel(ctx), "", runErr)
}

// nothingToStart is embedded by runtimes that start nothing.
type nothingToStart struct{}

func (nothingToStart) Start(context.Context) error { return nil }
func (nothingToStart) Close() error                { return nil }

// chatRuntime is a Chat driven by the loop: the openai and anthropic entries.
type chatRuntime struct {
	nothingToStart
	chat Chat
	loop LoopConfig
}

func (r *chatRuntime) Model() string { return r.loop.Model }
func (r *chatRuntime) Run(ctx context.Context, ep agent.Driver) error {
	return RunLoop(ctx, ep, r.chat, r.loop)
}

// loopSettings is the loop's part of settings, for a runtime whose Chat serves model.
func loopSettings(s Settings, model string) LoopConfig {
	maxCalls := 0
	if s.MaxTurns > 0 {
		maxCalls = s.MaxTurns + 10
	}
	o := s.OpenAI
	return LoopConfig{Model: model, Prices: s.Prices, ImagesInToolMessages: o.ImagesInTool, MaxImages: o.MaxImages,
		TextOnly: o.TextOnly, MaxLLMCalls: maxCalls, RecordTokens: s.RecordTokens, Logger: s.Logger}
}

// checkChatOptions validates the request settings; errors name the flag to fix.
func checkChatOptions(o OpenAIOptions) error {
	switch o.ToolChoice {
	case "", "auto", "required", "none":
	default:
		return fmt.Errorf("--openai-tool-choice %q: want one of auto, required, none", o.ToolChoice)
	}
	switch {
	case o.MaxImages < 0:
		return fmt.Errorf("--openai-max-images %d: must be >= 0", o.MaxImages)
	case o.MaxTokens < 0:
		return fmt.Errorf("--openai-max-tokens %d: must be >= 0", o.MaxTokens)
	case o.Temperature != nil && (*o.Temperature < 0 || *o.Temperature > 2):
		return fmt.Errorf("--openai-temperature %g: want a number in [0, 2]", *o.Temperature)
	}
	return nil
}

// baseURL is the --base-url flag, else $env, else def; it must be an http(s) URL.
func baseURL(flag, env, def string) (string, error) {
	base := flag
	if base == "" {
		base = os.Getenv(env)
	}
	if base == "" {
		base = def
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return "", fmt.Errorf("--base-url %q: want an http(s) URL", base)
	}
	return base, nil
}

// keyEnv is the environment variable holding the API key: --api-key-env, else def.
func keyEnv(s Settings, def string) string {
	if s.APIKeyEnv != "" {
		return s.APIKeyEnv
	}
	return def
}

// model is s.Model, else $PYRUALEAN_MODEL, else the original's default model.
func defaultModel(s Settings) string {
	if s.Model != "" {
		return s.Model
	}
	if v := os.Getenv("PYRUALEAN_MODEL"); v != "" {
		return v
	}
	return "gpt-6-astra"
}

package runtimes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/prices"
)

// OpenAIConfig configures the openai runtime: any OpenAI-compatible chat completions endpoint, and
// the loop that drives it (the fields after HTTPClient; LoopConfig documents them).
type OpenAIConfig struct {
	BaseURL     string
	APIKey      string
	Model       string
	MaxTokens   int            // 0: server default
	ToolChoice  string         // "", "auto", "required", "none"
	Temperature *float64       // sent even when 0 (go-openai would drop it)
	ExtraBody   map[string]any // merged into every request body (reasoning_effort among them)

	HTTPAttempts   int           // HTTP attempts per request (default 5)
	Backoff        time.Duration // first retry wait (default 2 s)
	MaxBackoff     time.Duration // (default 60 s)
	RequestTimeout time.Duration // one attempt's deadline (default 10 min)
	HTTPClient     *http.Client

	ImagesInToolMessages bool
	MaxImages            int
	TextOnly             bool
	PlannerAttempts      int
	PlannerRetryWait     time.Duration
	FinishGrace          int
	MaxLLMCalls          int
	RecordTokens         bool
	TurnDeadline         func(requestChars int) time.Duration
	Watch                func(ctx context.Context, turn int)
	OnReply              func(ctx context.Context, t agent.Turn)
	Prices               *prices.Table
	Logger               *slog.Logger
}

// loop is the config's loop part.
func (c OpenAIConfig) loop() LoopConfig {
	return LoopConfig{Model: c.Model, Prices: c.Prices, ImagesInToolMessages: c.ImagesInToolMessages,
		MaxImages: c.MaxImages, TextOnly: c.TextOnly, PlannerAttempts: c.PlannerAttempts,
		PlannerRetryWait: c.PlannerRetryWait, FinishGrace: c.FinishGrace, MaxLLMCalls: c.MaxLLMCalls,
		RecordTokens: c.RecordTokens, TurnDeadline: c.TurnDeadline, Watch: c.Watch, OnReply: c.OnReply, Logger: c.Logger}
}

// RunOpenAI drives an episode with a model behind an OpenAI-compatible endpoint: RunLoop with the
// openai Chat.
func RunOpenAI(ctx context.Context, ep agent.Driver, cfg OpenAIConfig) error {
	return RunLoop(ctx, ep, NewOpenAIChat(cfg), cfg.loop())
}

// openaiChat is the Chat of an OpenAI-compatible chat completions endpoint: the go-openai client over
// the provider doer (httpdoer.go), with what go-openai drops read from the raw reply (openai_reply.go).
type openaiChat struct {
	cfg    OpenAIConfig
	client *openai.Client
	effort string // the reasoning_effort the requests carry
}

// NewOpenAIChat is the Chat of the endpoint cfg names (its loop fields are not read).
func NewOpenAIChat(cfg OpenAIConfig) Chat {
	extra := map[string]any{}
	for k, v := range cfg.ExtraBody {
		extra[k] = v
	}
	if cfg.Temperature != nil {
		extra["temperature"] = *cfg.Temperature
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	oc.HTTPClient = newProviderDoer(cfg.HTTPClient, extra, httpPolicy{cfg.HTTPAttempts, cfg.Backoff, cfg.MaxBackoff, cfg.RequestTimeout}, cfg.Logger)
	c := &openaiChat{cfg: cfg, client: openai.NewClientWithConfig(oc)}
	if e, ok := extra["reasoning_effort"]; ok {
		c.effort = fmt.Sprint(e)
	}
	return c
}

var errNoChoices = errors.New("provider returned no choices")

func (c *openaiChat) Reply(ctx context.Context, req ChatRequest) (Reply, error) {
	oreq := openai.ChatCompletionRequest{Model: c.cfg.Model, Messages: openaiMessages(req.Messages),
		Tools: toolDefs(req.Tools), MaxTokens: c.cfg.MaxTokens}
	if c.cfg.ToolChoice != "" && len(req.Tools) > 0 {
		oreq.ToolChoice = c.cfg.ToolChoice
	}
	if req.Tokens {
		// top_logprobs 1, not 0: llama.cpp takes it as its n_probs and returns no logprobs for 0.
		oreq.LogProbs, oreq.TopLogProbs = true, 1
	}
	sink := &rawSink{Extra: req.Extra}
	resp, err := c.client.CreateChatCompletion(withRawSink(ctx, sink), oreq)
	r := Reply{Attempts: sink.Attempts, Effort: c.effort, Sampling: sink.Sampling}
	if err != nil {
		if providerFailure(err) {
			return r, Retryable(err)
		}
		// go-openai refused the request before sending it (e.g. a reasoning model that needs the
		// Responses API): no retry will help.
		return r, fmt.Errorf("model %s: %w (pick a chat-completions model with --model, or --runtime codex, which speaks the Responses API)", c.cfg.Model, err)
	}
	if len(resp.Choices) == 0 {
		return r, Retryable(errNoChoices)
	}
	r.Usage, r.Reasoning, r.Timings = parseRawCompletion(sink.Body)
	if r.Usage.Calls == 0 { // raw bytes unreadable: fall back on go-openai's view
		r.Usage = agent.Usage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens}
	}
	if req.Tokens {
		r.Tokens = parseTokens(sink.Body)
	}
	msg := resp.Choices[0].Message
	r.Text, r.FinishReason = msg.Content, string(resp.Choices[0].FinishReason)
	for _, tc := range msg.ToolCalls {
		r.ToolCalls = append(r.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return r, nil
}

// providerFailure says whether err came from the provider or the network (worth a planner retry),
// as opposed to the client refusing the request.
func providerFailure(err error) bool {
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	var netErr net.Error
	return errors.As(err, &apiErr) || errors.As(err, &reqErr) || errors.As(err, &netErr) ||
		errors.Is(err, ErrProviderUnreachable) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// openaiMessages lowers the conversation to chat completions messages. A message of one text part
// is a plain string (tool messages must be strings for most servers); images are data URLs.
func openaiMessages(msgs []Message) []openai.ChatCompletionMessage {
	out := make([]openai.ChatCompletionMessage, 0, len(msgs))
	for _, m := range msgs {
		om := openai.ChatCompletionMessage{Role: string(m.Role), ToolCallID: m.ToolCallID}
		switch {
		case m.Role == RoleAssistant:
			// go-openai omits empty content on assistant messages with tool calls; reasoning is not sent back.
			om.Content = m.Text()
			for _, tc := range m.ToolCalls {
				om.ToolCalls = append(om.ToolCalls, openai.ToolCall{ID: tc.ID, Type: openai.ToolTypeFunction,
					Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
			}
		case len(m.Parts) <= 1 && countImages([]Message{m}) == 0:
			om.Content = m.Text()
		default:
			om.MultiContent = openaiParts(m.Parts)
		}
		out = append(out, om)
	}
	return out
}

func openaiParts(parts []Part) []openai.ChatMessagePart {
	out := make([]openai.ChatMessagePart, 0, len(parts))
	for _, p := range parts {
		if p.Image == nil {
			out = append(out, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: p.Text})
			continue
		}
		out = append(out, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{
			URL: "data:image/png;base64," + p.Base64(), Detail: openai.ImageURLDetailAuto,
		}})
	}
	return out
}

// toolDefs converts a toolkit's specs to OpenAI function tools.
func toolDefs(specs []agent.ToolSpec) []openai.Tool {
	out := make([]openai.Tool, 0, len(specs))
	for _, s := range specs {
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: s.Name, Description: s.Description, Parameters: toolSchema(s),
		}})
	}
	return out
}

// toolSchema is the tool's JSON Schema, an empty object schema when it has none.
func toolSchema(s agent.ToolSpec) json.RawMessage {
	if len(s.Parameters) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return s.Parameters
}

func newOpenAI(s Settings) (Runtime, error) {
	cfg, err := openaiConfig(s, defaultModel(s))
	if err != nil {
		return nil, err
	}
	return &chatRuntime{chat: NewOpenAIChat(cfg), loop: loopSettings(s, cfg.Model)}, nil
}

// openaiConfig turns settings into the endpoint's config; errors name the flag to fix. The loop's
// part comes from loopSettings.
func openaiConfig(s Settings, model string) (OpenAIConfig, error) {
	o := s.OpenAI
	if err := checkChatOptions(o); err != nil {
		return OpenAIConfig{}, err
	}
	extra := map[string]any{}
	for k, v := range o.ExtraBody {
		extra[k] = v
	}
	if _, set := extra["reasoning_effort"]; s.Reasoning != "" && !set {
		extra["reasoning_effort"] = s.Reasoning
	}
	base, err := baseURL(s.BaseURL, "OPENAI_BASE_URL", "https://api.openai.com/v1")
	if err != nil {
		return OpenAIConfig{}, err
	}
	return OpenAIConfig{
		BaseURL: base, APIKey: os.Getenv(keyEnv(s, "OPENAI_API_KEY")), Model: model, MaxTokens: o.MaxTokens,
		ToolChoice: o.ToolChoice, Temperature: o.Temperature, ExtraBody: extra, HTTPClient: s.HTTPClient, Logger: s.Logger,
	}, nil
}

// OpenAIConfigFor is the config the openai runtime would run with under settings: its endpoint and
// its loop (RunOpenAI and GenerateProgram take it whole).
func OpenAIConfigFor(s Settings) (OpenAIConfig, error) {
	c, err := openaiConfig(s, defaultModel(s))
	if err != nil {
		return c, err
	}
	l := loopSettings(s, c.Model)
	c.Prices, c.ImagesInToolMessages, c.MaxImages, c.TextOnly = l.Prices, l.ImagesInToolMessages, l.MaxImages, l.TextOnly
	c.MaxLLMCalls, c.RecordTokens, c.Logger = l.MaxLLMCalls, l.RecordTokens, l.Logger
	return c, nil
}

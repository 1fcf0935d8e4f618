package runtimes

import (
	"context"
	"encoding/base64"
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

// OpenAIConfig configures the openai runtime: any OpenAI-compatible chat completions endpoint.
type OpenAIConfig struct {
	BaseURL     string
	APIKey      string
	Model       string
	MaxTokens   int            // 0: server default
	ToolChoice  string         // "", "auto", "required", "none"
	Temperature *float64       // sent even when 0 (go-openai would drop it)
	ExtraBody   map[string]any // merged into every request body
	// ImagesInToolMessages puts images inside the tool message; by default they go in a user message
	// right after the tool results, since many endpoints reject images in tool messages.
	ImagesInToolMessages bool
	// MaxImages keeps only the newest N images in the replayed history (older ones become a text
	// note); 0 keeps all. Providers cap images per request, and history is re-sent on every call.
	MaxImages int
	// TextOnly is for models that take no images (a local text model): images are replaced by a note.
	TextOnly bool

	HTTPAttempts     int           // HTTP attempts per request (default 5)
	Backoff          time.Duration // first retry wait (default 2 s)
	MaxBackoff       time.Duration // (default 60 s)
	RequestTimeout   time.Duration // one attempt's deadline (default 10 min)
	PlannerAttempts  int           // LLM-call attempts before the first tool call (default 3)
	PlannerRetryWait time.Duration // wait between those attempts (default 15 s)
	// FinishGrace is how many LLM calls the model gets to call finish once the robot has ended the
	// episode (task solved, step budget): 0 means the default, 2; < 0 means none (the local runtime:
	// a small model rarely calls finish and each call costs many seconds).
	FinishGrace int
	MaxLLMCalls int // safety ceiling on LLM calls (default max-turns+10, else 300)

	// TurnDeadline, when set, bounds each LLM call (the local runtime's, from the model's measured
	// speed): given the characters of the request, the time the reply may take. A reply past it is cut
	// and the episode ends with a planner error saying so, without a retry.
	TurnDeadline func(requestChars int) time.Duration
	// Watch, when set, runs alongside each LLM call until it returns (the local runtime's progress).
	Watch func(ctx context.Context, turn int)
	// OnReply, when set, sees each reply's record (the local runtime's speed and prompt cache).
	OnReply func(ctx context.Context, t agent.Turn)

	Prices     *prices.Table
	HTTPClient *http.Client
	Logger     *slog.Logger
}

func (c *OpenAIConfig) defaults() {
	if c.HTTPAttempts <= 0 {
		c.HTTPAttempts = 5
	}
	if c.Backoff <= 0 {
		c.Backoff = 2 * time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 60 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Minute
	}
	if c.PlannerAttempts <= 0 {
		c.PlannerAttempts = 3
	}
	if c.PlannerRetryWait <= 0 {
		c.PlannerRetryWait = 15 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

var errNoChoices = errors.New("provider returned no choices")

// llmClient is the production go-openai client behind the provider doer.
type llmClient struct {
	cfg    OpenAIConfig
	client *openai.Client
	price  *prices.Price
}

func newLLMClient(cfg OpenAIConfig) *llmClient {
	extra := map[string]any{}
	for k, v := range cfg.ExtraBody {
		extra[k] = v
	}
	if cfg.Temperature != nil {
		extra["temperature"] = *cfg.Temperature
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	oc.HTTPClient = &providerDoer{
		client: cfg.HTTPClient, extra: extra, attempts: cfg.HTTPAttempts, backoff: cfg.Backoff,
		maxBackoff: cfg.MaxBackoff, perAttempt: cfg.RequestTimeout, logger: cfg.Logger,
	}
	lc := &llmClient{cfg: cfg, client: openai.NewClientWithConfig(oc)}
	if p, ok := cfg.Prices.Lookup(cfg.Model); ok {
		lc.price = &p
	}
	return lc
}

// complete makes one chat completion and accounts for it.
func (lc *llmClient) complete(ctx context.Context, msgs []openai.ChatCompletionMessage, tools []openai.Tool) (openai.ChatCompletionMessage, agent.Turn, error) {
	req := openai.ChatCompletionRequest{
		Model: lc.cfg.Model, Messages: msgs, Tools: tools, MaxTokens: lc.cfg.MaxTokens,
	}
	if lc.cfg.ToolChoice != "" {
		req.ToolChoice = lc.cfg.ToolChoice
	}
	sink := &rawSink{}
	start := time.Now()
	resp, err := lc.client.CreateChatCompletion(withRawSink(ctx, sink), req)
	t := agent.Turn{StartedAt: start.UTC().Format(time.RFC3339Nano), LatencyS: round3(time.Since(start).Seconds()), Attempts: sink.Attempts, ToolCalls: []string{}}
	if err != nil {
		t.Error = err.Error()
		return openai.ChatCompletionMessage{}, t, err
	}
	if len(resp.Choices) == 0 {
		err := errNoChoices
		t.Error = err.Error()
		return openai.ChatCompletionMessage{}, t, err
	}
	u, reasoning, timings := parseRawCompletion(sink.Body)
	t.Timings = timings
	if u.Calls == 0 { // raw bytes unreadable: fall back on go-openai's view
		u = agent.Usage{Calls: 1, InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens}
	}
	t.Usage = u
	if lc.price != nil {
		c := lc.price.Cost(u.InputTokens, u.CachedTokens, u.OutputTokens)
		t.CostUSD = &c
	}
	msg := resp.Choices[0].Message
	t.FinishReason = string(resp.Choices[0].FinishReason)
	t.Content = msg.Content
	t.Reasoning = reasoning
	for _, tc := range msg.ToolCalls {
		t.ToolCalls = append(t.ToolCalls, tc.Function.Name)
	}
	return msg, t, nil
}

// turnDeadlineError is a reply cut at its TurnDeadline.
type turnDeadlineError struct {
	turn     int
	deadline time.Duration
	chars    int
}

func (e *turnDeadlineError) Error() string {
	return fmt.Sprintf("turn %d: no reply within its deadline of %s (%d characters sent; the deadline comes from the model's measured speed): the reply was cut",
		e.turn, e.deadline.Round(time.Second), e.chars)
}

// completeTurn is complete under the config's TurnDeadline and Watch.
func (lc *llmClient) completeTurn(ctx context.Context, msgs []openai.ChatCompletionMessage, tools []openai.Tool, turn int) (openai.ChatCompletionMessage, agent.Turn, error) {
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var deadline time.Duration
	chars := 0
	if lc.cfg.TurnDeadline != nil {
		for _, m := range msgs {
			chars += len(m.Content)
			for _, p := range m.MultiContent {
				chars += len(p.Text)
			}
			for _, tc := range m.ToolCalls {
				chars += len(tc.Function.Arguments)
			}
		}
		for _, t := range tools {
			chars += len(t.Function.Description) + len(fmt.Sprint(t.Function.Parameters))
		}
		deadline = lc.cfg.TurnDeadline(chars)
		var c context.CancelFunc
		callCtx, c = context.WithTimeoutCause(callCtx, deadline, errTurnDeadline)
		defer c()
	}
	if lc.cfg.Watch != nil {
		watchCtx, stop := context.WithCancel(callCtx)
		done := make(chan struct{})
		go func() { defer close(done); lc.cfg.Watch(watchCtx, turn) }()
		defer func() { stop(); <-done }()
	}
	msg, t, err := lc.complete(callCtx, msgs, tools)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(callCtx), errTurnDeadline) {
		return msg, t, &turnDeadlineError{turn: turn, deadline: deadline, chars: chars}
	}
	return msg, t, err
}

var errTurnDeadline = errors.New("turn deadline")

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// toolDefs converts a toolkit's specs to OpenAI function tools.
func toolDefs(specs []agent.ToolSpec) []openai.Tool {
	out := make([]openai.Tool, 0, len(specs))
	for _, s := range specs {
		params := s.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: s.Name, Description: s.Description, Parameters: params,
		}})
	}
	return out
}

func imageParts(images []agent.Image) []openai.ChatMessagePart {
	parts := make([]openai.ChatMessagePart, 0, len(images))
	for _, im := range images {
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{
			URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(im.PNG), Detail: openai.ImageURLDetailAuto,
		}})
	}
	return parts
}

// firstUserMessage holds the prompt text and the task card's images.
func firstUserMessage(p agent.Prompt) openai.ChatCompletionMessage {
	if len(p.Images) == 0 {
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: p.Text}
	}
	parts := []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: p.Text}}
	for _, im := range p.Images {
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: "Task card image: " + im.Name})
		parts = append(parts, imageParts([]agent.Image{im})...)
	}
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, MultiContent: parts}
}

// RunOpenAI drives an episode with a model behind an OpenAI-compatible endpoint until the model
// calls finish, the episode ends, or ctx ends. It returns nil when the model finished (or stopped
// on its own), an error wrapping agent.ErrPlanner when the provider failed after the first tool call, or
// the context's error. The caller then calls Episode.Finish, which derives the status.
func RunOpenAI(ctx context.Context, ep agent.Driver, cfg OpenAIConfig) error {
	cfg.defaults()
	lc := newLLMClient(cfg)
	tk := ep.Toolkit()
	tools := toolDefs(tk.Tools())
	prompt := ep.Prompt()
	if cfg.TextOnly && len(prompt.Images) > 0 {
		prompt.Text += fmt.Sprintf("\n[%d task card image(s) not shown: this model takes no images]\n", len(prompt.Images))
		prompt.Images = nil
	}
	msgs := []openai.ChatCompletionMessage{firstUserMessage(prompt)}
	maxCalls := cfg.MaxLLMCalls
	if maxCalls <= 0 {
		maxCalls = 300
	}
	toolCallsMade := 0
	plannerAttempts := 1
	ep.SetPlannerAttempts(plannerAttempts)
	noToolStreak := 0
	grace := -1 // LLM calls left to call finish once the robot says the episode is over
	for turn := 1; turn <= maxCalls; turn++ {
		if ep.Finished() || grace == 0 {
			return nil
		}
		if grace > 0 {
			grace--
		}
		// A person may hold the episode here (paused before the decision); what people did in the
		// kernel meanwhile reaches this decision as a user message.
		update, err := ep.AwaitTurn(ctx)
		if err != nil {
			return err
		}
		if !update.Empty() {
			msgs = append(msgs, humanMessage(update, cfg.TextOnly))
		}
		if cfg.MaxImages > 0 {
			msgs = dropOldImages(msgs, cfg.MaxImages)
		}
		msg, rec, err := lc.completeTurn(ctx, msgs, tools, turn)
		rec.Turn = turn
		var cut *turnDeadlineError
		if errors.As(err, &cut) {
			rec.Error = cut.Error()
			rec.Usage.Calls = 1
			_ = ep.RecordTurn(rec)
			return fmt.Errorf("%w: %w", agent.ErrPlanner, cut)
		}
		if err != nil {
			if ctx.Err() != nil {
				rec.Error = fmt.Sprintf("%v (the call was in flight)", context.Cause(ctx))
				_ = ep.RecordTurn(rec)
				return context.Cause(ctx)
			}
			rec.Usage.Calls = 1
			_ = ep.RecordTurn(rec)
			if !providerFailure(err) {
				// go-openai refused the request before sending it (e.g. a reasoning model that needs the
				// Responses API): no retry will help.
				return fmt.Errorf("%w: model %s: %w (pick a chat-completions model with --model, or --runtime codex, which speaks the Responses API)", agent.ErrPlanner, cfg.Model, err)
			}
			if toolCallsMade == 0 && plannerAttempts < cfg.PlannerAttempts {
				plannerAttempts++
				ep.SetPlannerAttempts(plannerAttempts)
				cfg.Logger.Warn("planner failed before its first tool call; retrying", "attempt", plannerAttempts, "err", err)
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(cfg.PlannerRetryWait):
				}
				continue
			}
			return fmt.Errorf("%w: %w", agent.ErrPlanner, err)
		}
		if ctx.Err() != nil { // the answer came back after the episode ended: do not act on it
			rec.Error = fmt.Sprintf("%v (after the reply arrived)", context.Cause(ctx))
			_ = ep.RecordTurn(rec)
			return context.Cause(ctx)
		}
		rec.Images = countImages(msgs)
		if err := ep.RecordTurn(rec); err != nil {
			return err
		}
		if cfg.OnReply != nil {
			cfg.OnReply(ctx, rec)
		}
		// go-openai omits empty content on assistant messages with tool calls; keep the message as sent.
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: msg.Content, ToolCalls: msg.ToolCalls, ReasoningContent: ""})
		if len(msg.ToolCalls) == 0 {
			noToolStreak++
			if noToolStreak >= 3 {
				return agent.ErrNoToolCall
			}
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser,
				Content: "Continue by calling a tool: use the tools to act, and call `finish` when you are done."})
			continue
		}
		noToolStreak = 0
		var followUp []openai.ChatMessagePart
		finished := false
		for _, tc := range msg.ToolCalls {
			res, err := tk.Call(ctx, tc.Function.Name, json.RawMessage(tc.Function.Arguments))
			if err != nil {
				return err
			}
			toolCallsMade++
			text := res.Text
			if text == "" {
				text = "(no output)"
			}
			tm := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: tc.ID, Content: text}
			if len(res.Images) > 0 && cfg.TextOnly {
				tm.Content = text + fmt.Sprintf("\n[%d image(s) not shown: this model takes no images]", len(res.Images))
			} else if len(res.Images) > 0 {
				names := make([]string, len(res.Images))
				for i, im := range res.Images {
					names[i] = im.Name
				}
				if cfg.ImagesInToolMessages {
					tm.Content = ""
					tm.MultiContent = append([]openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: text}}, imageParts(res.Images)...)
				} else {
					tm.Content = text + fmt.Sprintf("\n[%d image(s) attached below: %s]", len(res.Images), strings.Join(names, ", "))
					followUp = append(followUp, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText,
						Text: fmt.Sprintf("Images from call %s: %s", tc.ID, strings.Join(names, ", "))})
					followUp = append(followUp, imageParts(res.Images)...)
				}
			}
			msgs = append(msgs, tm)
			if res.Finished || res.EpisodeDone {
				finished = true
			}
		}
		if len(followUp) > 0 {
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, MultiContent: followUp})
		}
		if ep.Finished() {
			return nil
		}
		if finished && grace < 0 {
			// The robot ended the episode (task done, step budget): let the model call finish.
			switch {
			case cfg.FinishGrace < 0:
				return nil
			case cfg.FinishGrace == 0:
				grace = 2
			default:
				grace = cfg.FinishGrace
			}
		}
	}
	return fmt.Errorf("%w: reached the ceiling of %d LLM calls", agent.ErrNoToolCall, maxCalls)
}

// humanMessage tells the model what people did in its kernel, with their fresh camera images.
func humanMessage(u agent.HumanUpdate, textOnly bool) openai.ChatCompletionMessage {
	if len(u.Images) == 0 || textOnly {
		text := u.Text
		if len(u.Images) > 0 {
			text += fmt.Sprintf("\n[%d image(s) not shown: this model takes no images]", len(u.Images))
		}
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: text}
	}
	parts := append([]openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: u.Text}}, imageParts(u.Images)...)
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, MultiContent: parts}
}

// providerFailure says whether err came from the provider or the network (worth a planner retry),
// as opposed to the client refusing the request.
func providerFailure(err error) bool {
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	var netErr net.Error
	return errors.As(err, &apiErr) || errors.As(err, &reqErr) || errors.As(err, &netErr) ||
		errors.Is(err, ErrProviderUnreachable) || errors.Is(err, errNoChoices) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// dropOldImages replaces all but the newest keep image parts with a short text note.
func dropOldImages(msgs []openai.ChatCompletionMessage, keep int) []openai.ChatCompletionMessage {
	seen := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		parts := msgs[i].MultiContent
		for j := len(parts) - 1; j >= 0; j-- {
			if parts[j].Type != openai.ChatMessagePartTypeImageURL {
				continue
			}
			seen++
			if seen > keep {
				if j == len(parts)-1 || parts[j+1].Text != droppedImageNote {
					parts[j] = openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: droppedImageNote}
				} else {
					parts = append(parts[:j], parts[j+1:]...)
				}
			}
		}
		msgs[i].MultiContent = parts
	}
	return msgs
}

const droppedImageNote = "[older image removed to save context]"

func countImages(msgs []openai.ChatCompletionMessage) int {
	n := 0
	for _, m := range msgs {
		for _, p := range m.MultiContent {
			if p.Type == openai.ChatMessagePartTypeImageURL {
				n++
			}
		}
	}
	return n
}

// openaiRuntime is the openai table entry: RunOpenAI with a fixed config.
type openaiRuntime struct {
	nothingToStart
	cfg OpenAIConfig
}

func (r *openaiRuntime) Model() string { return r.cfg.Model }
func (r *openaiRuntime) Run(ctx context.Context, ep agent.Driver) error {
	return RunOpenAI(ctx, ep, r.cfg)
}

func newOpenAI(s Settings) (Runtime, error) {
	cfg, err := openaiConfig(s, defaultModel(s))
	if err != nil {
		return nil, err
	}
	return &openaiRuntime{cfg: cfg}, nil
}

// openaiConfig turns settings into the client's config; errors name the flag to fix.
func openaiConfig(s Settings, model string) (OpenAIConfig, error) {
	o := s.OpenAI
	switch o.ToolChoice {
	case "", "auto", "required", "none":
	default:
		return OpenAIConfig{}, fmt.Errorf("--openai-tool-choice %q: want one of auto, required, none", o.ToolChoice)
	}
	switch {
	case o.MaxImages < 0:
		return OpenAIConfig{}, fmt.Errorf("--openai-max-images %d: must be >= 0", o.MaxImages)
	case o.MaxTokens < 0:
		return OpenAIConfig{}, fmt.Errorf("--openai-max-tokens %d: must be >= 0", o.MaxTokens)
	case o.Temperature != nil && (*o.Temperature < 0 || *o.Temperature > 2):
		return OpenAIConfig{}, fmt.Errorf("--openai-temperature %g: want a number in [0, 2]", *o.Temperature)
	}
	extra := map[string]any{}
	for k, v := range o.ExtraBody {
		extra[k] = v
	}
	if _, set := extra["reasoning_effort"]; s.Reasoning != "" && !set {
		extra["reasoning_effort"] = s.Reasoning
	}
	base := s.BaseURL
	if base == "" {
		base = os.Getenv("OPENAI_BASE_URL")
	}
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return OpenAIConfig{}, fmt.Errorf("--base-url %q: want an http(s) URL", base)
	}
	keyEnv := s.APIKeyEnv
	if keyEnv == "" {
		keyEnv = "OPENAI_API_KEY"
	}
	maxCalls := 0
	if s.MaxTurns > 0 {
		maxCalls = s.MaxTurns + 10
	}
	return OpenAIConfig{
		BaseURL: base, APIKey: os.Getenv(keyEnv), Model: model, MaxTokens: o.MaxTokens, ToolChoice: o.ToolChoice,
		Temperature: o.Temperature, ExtraBody: extra, ImagesInToolMessages: o.ImagesInTool, TextOnly: o.TextOnly,
		MaxImages: o.MaxImages, MaxLLMCalls: maxCalls, Prices: s.Prices, HTTPClient: s.HTTPClient, Logger: s.Logger,
	}, nil
}

// OpenAIConfigFor is the config the openai runtime would run with under settings.
func OpenAIConfigFor(s Settings) (OpenAIConfig, error) { return openaiConfig(s, defaultModel(s)) }

package runtimes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/prices"
)

// LoopConfig configures the agent loop, whatever the backend.
type LoopConfig struct {
	Model  string        // for the price table
	Prices *prices.Table // prices each turn's cost
	// ImagesInToolMessages puts images inside the tool message; by default they go in a user message
	// right after the tool results, since many endpoints reject images in tool messages.
	ImagesInToolMessages bool
	// MaxImages keeps only the newest N images in the replayed history (older ones become a text
	// note); 0 keeps all. Providers cap images per request, and history is re-sent on every call.
	MaxImages int
	// TextOnly is for models that take no images (a local text model): images are replaced by a note.
	TextOnly bool

	PlannerAttempts  int           // LLM-call attempts before the first tool call (default 3)
	PlannerRetryWait time.Duration // wait between those attempts (default 15 s)
	// FinishGrace is how many LLM calls the model gets to call finish once the robot has ended the
	// episode (task solved, step budget): 0 means the default, 2; < 0 means none (the local runtime:
	// a small model rarely calls finish and each call costs many seconds).
	FinishGrace int
	MaxLLMCalls int // safety ceiling on LLM calls (default 300; the runtimes pass max-turns+10)

	// RecordTokens asks the backend for each reply's token ids and logprobs and writes them to
	// tokens.jsonl in the run folder, one line per LLM call.
	RecordTokens bool

	// TurnDeadline, when set, bounds each LLM call (the local runtime's, from the model's measured
	// speed): given the characters of the request, the time the reply may take. A reply past it is cut
	// and the episode ends with a planner error saying so, without a retry.
	TurnDeadline func(requestChars int) time.Duration
	// Watch, when set, runs alongside each LLM call until it returns (the local runtime's progress).
	Watch func(ctx context.Context, turn int)
	// OnReply, when set, sees each reply's record (the local runtime's speed and prompt cache).
	OnReply func(ctx context.Context, t agent.Turn)
	// Admit, when set, waits before each LLM call until the backend can take it (the local runtime's
	// one server slot, which the episodes of a suite share) and returns the func that frees it, once
	// the reply is handled (OnReply included). The wait is the turn's queued_s, outside its latency and
	// deadline, and the episode's clock stops meanwhile (agent.ModelWaiter): it is other episodes' time.
	Admit func(ctx context.Context) (release func(), err error)

	Logger *slog.Logger
}

func (c *LoopConfig) defaults() {
	if c.PlannerAttempts <= 0 {
		c.PlannerAttempts = 3
	}
	if c.PlannerRetryWait <= 0 {
		c.PlannerRetryWait = 15 * time.Second
	}
	if c.MaxLLMCalls <= 0 {
		c.MaxLLMCalls = 300
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// price is the model's price, nil when the table has none.
func (c *LoopConfig) price() *prices.Price {
	if p, ok := c.Prices.Lookup(c.Model); ok {
		return &p
	}
	return nil
}

// finishGrace is how many LLM calls the model gets to call finish after the robot ended the
// episode; 0: none.
func (c *LoopConfig) finishGrace() int {
	switch {
	case c.FinishGrace < 0:
		return 0
	case c.FinishGrace == 0:
		return 2
	}
	return c.FinishGrace
}

// RunLoop drives an episode with chat until the model calls finish, the episode ends, or ctx ends.
// It returns nil when the model finished (or stopped on its own), an error wrapping agent.ErrPlanner
// when the provider failed (after the planner retries, which end at the first tool call), an error
// wrapping agent.ErrNoToolCall when the model stopped calling tools, or the context's cause. The
// caller then calls Episode.Finish, which derives the status.
func RunLoop(ctx context.Context, ep agent.Driver, chat Chat, cfg LoopConfig) error {
	cfg.defaults()
	l := &loop{ep: ep, chat: chat, cfg: cfg, tk: ep.Toolkit(), grace: -1, attempts: 1}
	l.tools, l.price = l.tk.Tools(), cfg.price()
	if cfg.RecordTokens {
		l.tokens = newTokenLog(ep.Dir(), cfg.Logger)
		defer l.tokens.close()
	}
	l.history = []Message{firstUserMessage(ep.Prompt(), cfg.TextOnly)}
	ep.Record().PlannerAttempts(1)
	for turn := 1; turn <= cfg.MaxLLMCalls+l.cancelled; turn++ {
		if ep.Finished() || l.grace == 0 {
			return nil
		}
		if l.grace > 0 {
			l.grace--
		}
		if err := l.hearPeople(ctx); err != nil {
			return err
		}
		reply, err := l.call(ctx, turn)
		if errors.Is(err, errNotSent) {
			turn-- // a Pause came before the call was sent: this turn is still to be made
			continue
		}
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return err
		}
		if stop, err := l.act(ctx, reply); stop || err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: reached the ceiling of %d LLM calls", agent.ErrNoToolCall, cfg.MaxLLMCalls)
}

// loop is one episode's run of RunLoop.
type loop struct {
	ep      agent.Driver
	chat    Chat
	cfg     LoopConfig
	tk      agent.Toolkit
	tools   []agent.ToolSpec
	price   *prices.Price
	tokens  *tokenLog // nil unless RecordTokens
	history []Message

	toolCalls    int // tool calls made so far (the planner retries end at the first)
	attempts     int // planner attempts so far
	noToolStreak int // replies in a row without a tool call
	grace        int // LLM calls left to call finish once the robot said the episode is over; -1: not yet
	cancelled    int // LLM calls a person's Pause cut (not counted against MaxLLMCalls)
}

// errRetry says the call failed and will be tried again (a planner retry, or a call a Pause cut).
var errRetry = errors.New("retry the LLM call")

// errNotSent says a Pause came before the call was sent: nothing was asked, ask when the gate opens.
var errNotSent = errors.New("the LLM call was not sent")

// hearPeople waits while a person holds the episode (paused before the decision) and tells the
// model what people did in the kernel meanwhile; then it trims old images.
func (l *loop) hearPeople(ctx context.Context) error {
	update, err := l.ep.AwaitTurn(ctx)
	if err != nil {
		return err
	}
	if !update.Empty() {
		l.history = append(l.history, humanMessage(update, l.cfg.TextOnly))
	}
	if l.cfg.MaxImages > 0 {
		dropOldImages(l.history, l.cfg.MaxImages)
	}
	return nil
}

// call makes one LLM call and records it; a failed call is errRetry (a planner retry) or final.
func (l *loop) call(ctx context.Context, turn int) (Reply, error) {
	callCtx, cancel := l.ep.Decide(ctx)
	defer cancel()
	release, queued, err := l.admit(ctx, callCtx)
	if err != nil {
		return Reply{}, err
	}
	defer release()
	reply, rec, err := l.complete(ctx, callCtx, turn)
	rec.QueuedS = agent.Round(queued.Seconds(), 3)
	if errors.Is(err, agent.ErrDecisionPaused) {
		return reply, l.paused(rec)
	}
	if err != nil {
		return reply, l.failed(ctx, rec, err)
	}
	if ctx.Err() != nil { // the answer came back after the episode ended: do not act on it
		rec.Error = fmt.Sprintf("%v (after the reply arrived)", context.Cause(ctx))
		_ = l.ep.Record().Turn(rec)
		return reply, context.Cause(ctx)
	}
	rec.Images = countImages(l.history)
	if err := l.ep.Record().Turn(rec); err != nil {
		return reply, err
	}
	l.tokens.write(turn, reply.Tokens)
	if l.cfg.OnReply != nil {
		l.cfg.OnReply(ctx, rec)
	}
	l.history = append(l.history, Message{Role: RoleAssistant, Parts: textParts(reply.Text), ToolCalls: reply.ToolCalls, Raw: reply.Raw})
	return reply, nil
}

// admit waits for the backend to take the call (LoopConfig.Admit) with the episode's clock stopped.
// A Pause meanwhile means nothing was sent (errNotSent); the end of the episode, its cause.
func (l *loop) admit(ctx, callCtx context.Context) (release func(), queued time.Duration, err error) {
	if errors.Is(context.Cause(callCtx), agent.ErrDecisionPaused) || l.cfg.Admit == nil {
		return func() {}, 0, nil // complete says it was paused
	}
	start := time.Now()
	resume := func() {}
	if w, ok := l.ep.(agent.ModelWaiter); ok {
		resume = w.WaitForModel()
	}
	release, err = l.cfg.Admit(callCtx)
	resume()
	queued = time.Since(start)
	switch {
	case err == nil:
		return release, queued, nil
	case ctx.Err() != nil:
		return nil, queued, context.Cause(ctx)
	case errors.Is(context.Cause(callCtx), agent.ErrDecisionPaused):
		return nil, queued, errNotSent
	}
	return nil, queued, fmt.Errorf("%w: waiting for the model server: %w", agent.ErrPlanner, err)
}

// paused records a call a person's Pause cut (marked cancelled; tokens counted when known) and asks
// again: the loop goes back to AwaitTurn, which waits while the episode is paused.
func (l *loop) paused(rec agent.Turn) error {
	if rec.Turn == 0 { // paused before the call was sent: nothing to record
		return errNotSent
	}
	l.cancelled++
	rec.Cancelled, rec.Error, rec.Usage.Calls = true, agent.ErrDecisionPaused.Error(), 1
	_ = l.ep.Record().Turn(rec)
	return errRetry
}

// failed records a failed call and says what comes next: a planner retry (errRetry) while the
// model has made no tool call, or the end of the episode.
func (l *loop) failed(ctx context.Context, rec agent.Turn, err error) error {
	var cut *turnDeadlineError
	switch {
	case errors.As(err, &cut):
		rec.Error, rec.Usage.Calls = cut.Error(), 1
		_ = l.ep.Record().Turn(rec)
		return fmt.Errorf("%w: %w", agent.ErrPlanner, cut)
	case ctx.Err() != nil:
		rec.Error = fmt.Sprintf("%v (the call was in flight)", context.Cause(ctx))
		_ = l.ep.Record().Turn(rec)
		return context.Cause(ctx)
	}
	rec.Usage.Calls = 1
	_ = l.ep.Record().Turn(rec)
	if !IsRetryable(err) || l.toolCalls > 0 || l.attempts >= l.cfg.PlannerAttempts {
		return fmt.Errorf("%w: %w", agent.ErrPlanner, err)
	}
	l.attempts++
	l.ep.Record().PlannerAttempts(l.attempts)
	l.cfg.Logger.Warn("planner failed before its first tool call; retrying", "attempt", l.attempts, "err", err)
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(l.cfg.PlannerRetryWait):
	}
	return errRetry
}

// complete asks the backend for a reply under the turn's deadline and watch, and makes its record.
// callCtx is the call's context (the episode's, with a Pause's cut: Driver.Decide).
func (l *loop) complete(ctx, callCtx context.Context, turn int) (Reply, agent.Turn, error) {
	if errors.Is(context.Cause(callCtx), agent.ErrDecisionPaused) {
		return Reply{}, agent.Turn{}, agent.ErrDecisionPaused
	}
	var deadline time.Duration
	chars := 0
	if l.cfg.TurnDeadline != nil {
		chars = requestChars(l.history, l.tools)
		deadline = l.cfg.TurnDeadline(chars)
		var c context.CancelFunc
		callCtx, c = context.WithTimeoutCause(callCtx, deadline, errTurnDeadline)
		defer c()
	}
	if l.cfg.Watch != nil {
		watchCtx, stop := context.WithCancel(callCtx)
		done := make(chan struct{})
		go func() { defer close(done); l.cfg.Watch(watchCtx, turn) }()
		defer func() { stop(); <-done }()
	}
	start := time.Now()
	reply, err := l.chat.Reply(callCtx, ChatRequest{Messages: l.history, Tools: l.tools, Tokens: l.cfg.RecordTokens})
	rec := turnRecord(turn, start, reply, err, l.price)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(callCtx), agent.ErrDecisionPaused) {
		return reply, rec, agent.ErrDecisionPaused
	}
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(callCtx), errTurnDeadline) {
		return reply, rec, &turnDeadlineError{turn: turn, deadline: deadline, chars: chars}
	}
	return reply, rec, err
}

// turnRecord is one LLM call's line of turns.jsonl.
func turnRecord(turn int, start time.Time, r Reply, err error, price *prices.Price) agent.Turn {
	t := agent.Turn{Turn: turn, StartedAt: start.UTC().Format(time.RFC3339Nano), LatencyS: agent.Round(time.Since(start).Seconds(), 3),
		Attempts: r.Attempts, ToolCalls: []string{}, ReasoningEffort: r.Effort, Sampling: r.Sampling}
	if err != nil {
		t.Error = err.Error()
		return t
	}
	t.Usage = r.Usage
	t.Usage.Calls = 1
	if price != nil {
		c := price.Cost(t.Usage.InputTokens, t.Usage.CachedTokens, t.Usage.OutputTokens)
		t.CostUSD = &c
	}
	t.FinishReason, t.Content, t.Reasoning, t.Timings = r.FinishReason, r.Text, r.Reasoning, r.Timings
	for _, tc := range r.ToolCalls {
		t.ToolCalls = append(t.ToolCalls, tc.Name)
	}
	return t
}

// act runs the reply's tool calls (or nudges a model that made none); stop ends the loop.
func (l *loop) act(ctx context.Context, reply Reply) (stop bool, err error) {
	if len(reply.ToolCalls) == 0 {
		l.noToolStreak++
		if l.noToolStreak >= 3 {
			return true, agent.ErrNoToolCall
		}
		nudge := nudgeText
		if reply.Nudge != "" {
			nudge = reply.Nudge
		}
		l.history = append(l.history, Message{Role: RoleUser, Parts: textParts(nudge)})
		return false, nil
	}
	l.noToolStreak = 0
	ended, err := l.runTools(ctx, reply.ToolCalls)
	if err != nil || l.ep.Finished() {
		return true, err
	}
	if ended && l.grace < 0 {
		// The robot ended the episode (task done, step budget): let the model call finish.
		l.grace = l.cfg.finishGrace()
		return l.grace == 0, nil
	}
	return false, nil
}

const nudgeText = "Continue by calling a tool: use the tools to act, and call `finish` when you are done."

// runTools runs the calls in order and adds their results to the history; ended says the robot
// ended the episode or finish was called.
func (l *loop) runTools(ctx context.Context, calls []ToolCall) (ended bool, err error) {
	var images []Part
	for _, tc := range calls {
		res, err := l.tk.Call(ctx, tc.Name, json.RawMessage(tc.Arguments))
		if err != nil {
			return false, err
		}
		l.toolCalls++
		msg, follow := toolMessage(tc.ID, res, l.cfg)
		l.history = append(l.history, msg)
		images = append(images, follow...)
		ended = ended || res.Finished || res.EpisodeDone
	}
	if len(images) > 0 {
		l.history = append(l.history, Message{Role: RoleUser, Parts: images})
	}
	return ended, nil
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

var errTurnDeadline = errors.New("turn deadline")

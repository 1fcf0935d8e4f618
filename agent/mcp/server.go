// Package mcp serves one live episode's agent.Toolkit as a Model Context Protocol server (the official Go
// SDK), over stdio or streamable HTTP, so that agent CLIs (Codex, Claude Code) can drive the robot.
//
// Tool results are text plus image content and never structured content: Claude Code discards the whole
// content array when structuredContent is present (anthropics/claude-code#54737), which would drop the
// camera images. Every tool is annotated read-only (and closed-world, non-destructive), because
// `codex exec` has no approval UI and cancels calls to tools that might modify something
// (openai/codex#16685); the original annotates its tools the same way.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyrualean/pyrualean/agent"
)

// DefaultName is the MCP server name, hence the `mcp__pyrualean__<tool>` names Claude Code gives our tools.
const DefaultName = "pyrualean"

// Options configures NewServer. The zero value is usable.
type Options struct {
	Name         string // server name (default DefaultName)
	Version      string // server version (default "dev")
	Instructions string // sent to clients at initialize
	Logger       *slog.Logger

	// Life bounds every tool call. Calls do NOT stop when the client cancels its request (Codex cancels
	// on its own tool timeout and on interruptions): a cell that already reached the kernel runs to the
	// end so its output lands in the trace, and the next call waits for it. Only Life ending (the
	// runtime's budget, the process shutting down) cancels a running call. Default: never.
	Life context.Context

	// OnCall, if set, sees every call after it ran (also refused and failed ones), in call order.
	OnCall func(CallRecord)
}

// CallRecord is one tool call as the server saw it.
type CallRecord struct {
	Name      string          // the tool name after stripping a client prefix such as mcp__pyrualean__
	Args      json.RawMessage // arguments as received
	Result    agent.ToolResult
	Err       error // infrastructure failure from the Toolkit (the model saw an isError result)
	Cancelled bool  // the client cancelled the request before the result was ready
}

// Server is an MCP server for one Toolkit: the SDK server (Run it on a transport, or serve it with
// Handler/ListenHTTP) plus what our tool handler knows.
type Server struct {
	*sdk.Server
	h *handler
}

// Idle waits until no tool call is running (calls are serialised), or ctx ends. A runtime calls it
// after ending Options.Life and before finishing the episode, so no call races the episode's end.
func (s *Server) Idle(ctx context.Context) error {
	got := make(chan struct{})
	go func() { s.h.mu.Lock(); s.h.mu.Unlock(); close(got) }()
	select {
	case <-got:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// NewServer returns an MCP server exposing tk's tools. Calls are serialised: one episode, one robot.
func NewServer(tk agent.Toolkit, opts Options) *Server {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Life == nil {
		opts.Life = context.Background()
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: opts.Name, Version: opts.Version},
		&sdk.ServerOptions{Instructions: opts.Instructions, Logger: opts.Logger})
	h := &handler{tk: tk, opts: opts, known: map[string]bool{}}
	no := false
	for _, spec := range tk.Tools() {
		h.known[spec.Name] = true
		schema := objectSchema(spec.Parameters, opts.Logger, spec.Name)
		srv.AddTool(&sdk.Tool{
			Name:        spec.Name,
			Description: spec.Description,
			InputSchema: schema,
			Annotations: &sdk.ToolAnnotations{
				Title:           spec.Name,
				ReadOnlyHint:    true, // see the package comment: approval, not semantics
				DestructiveHint: &no,
				OpenWorldHint:   &no,
			},
		}, h.call)
	}
	srv.AddReceivingMiddleware(h.middleware)
	return &Server{Server: srv, h: h}
}

// objectSchema returns the tool's parameter schema as the SDK wants it: a JSON object of type
// "object" (it panics on anything else). A missing type is added; an unusable schema is replaced by
// an empty object schema, with an error in the log, so one bad tool cannot take the server down.
func objectSchema(raw json.RawMessage, logger *slog.Logger, tool string) map[string]any {
	m := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			logger.Error("tool schema is not a JSON object; using an empty one", "tool", tool, "err", err)
			m = map[string]any{}
		}
	}
	switch m["type"] {
	case nil:
		m["type"] = "object"
	case "object":
	default:
		logger.Error("tool schema is not of type object; using an empty one", "tool", tool, "type", m["type"])
		m = map[string]any{"type": "object"}
	}
	if _, ok := m["properties"]; !ok {
		m["properties"] = map[string]any{}
	}
	return m
}

type handler struct {
	tk    agent.Toolkit
	opts  Options
	known map[string]bool
	mu    sync.Mutex // serialises calls
}

// middleware strips client prefixes from tool names (the original does the same) and answers calls to
// tools we do not have with an isError result the model can read, instead of a JSON-RPC error that
// some clients surface as a failed turn.
func (h *handler) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		r, ok := req.(*sdk.CallToolRequest)
		if !ok || r.Params == nil {
			return next(ctx, method, req)
		}
		r.Params.Name = agent.StripToolPrefix(r.Params.Name)
		if !h.known[r.Params.Name] {
			return h.call(ctx, r)
		}
		return next(ctx, method, req)
	}
}

func (h *handler) call(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	name := req.Params.Name
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	res, cancelled, err := h.run(ctx, name, args)
	rec := CallRecord{Name: name, Args: args, Result: res, Err: err, Cancelled: cancelled}
	if err != nil {
		h.opts.Logger.Error("tool call failed", "tool", name, "err", err)
		msg, _ := json.Marshal(map[string]string{"error": "internal error: " + err.Error()})
		rec.Result = agent.ToolResult{Text: string(msg), IsError: true}
	} else if !h.known[name] && !res.IsError {
		// The Toolkit must refuse unknown tools; make sure the model sees a refusal either way.
		rec.Result.IsError = true
	}
	if h.opts.OnCall != nil {
		h.opts.OnCall(rec)
	}
	return Result(rec.Result), nil
}

// run executes one call under the server's lifetime, not the request's (see Options.Life);
// cancelled reports whether the client gave up on the request meanwhile.
func (h *handler) run(reqCtx context.Context, name string, args json.RawMessage) (res agent.ToolResult, cancelled bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.opts.Life.Err(); err != nil {
		return agent.ToolResult{}, false, fmt.Errorf("episode is over: %w", context.Cause(h.opts.Life))
	}
	callCtx, cancel := context.WithCancelCause(context.WithoutCancel(reqCtx))
	defer cancel(nil)
	stop := context.AfterFunc(h.opts.Life, func() { cancel(context.Cause(h.opts.Life)) })
	defer stop()
	res, err = h.tk.Call(callCtx, name, args)
	cancelled = reqCtx.Err() != nil
	if cancelled {
		h.opts.Logger.Warn("client cancelled a tool call; it ran to the end and is in the trace", "tool", name)
	}
	if err != nil && errors.Is(err, context.Canceled) && h.opts.Life.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(h.opts.Life))
	}
	return res, cancelled, err
}

// Result converts a ToolResult to MCP content: one text block, then one image block per PNG.
// No structured content (see the package comment).
func Result(r agent.ToolResult) *sdk.CallToolResult {
	text := r.Text
	if text == "" {
		text = "(no output)"
	}
	content := []sdk.Content{&sdk.TextContent{Text: text}}
	for _, im := range r.Images {
		content = append(content, &sdk.ImageContent{Data: im.PNG, MIMEType: "image/png"})
	}
	return &sdk.CallToolResult{Content: content, IsError: r.IsError}
}

// Package agent runs one robot episode: it boots the robot in a real IPython kernel, exposes the
// episode to a model as tools (the cells arm: python + finish; the tools arm: one tool per primitive +
// finish), executes what the model asks for as notebook cells, and records everything in a run folder
// (result.json, prompt.txt, turns.jsonl, calls.jsonl, trace.ipynb), incrementally.
//
// Runtimes (package agent/runtimes) drive an Episode through Driver and its Toolkit; the MCP server
// (agent/mcp) serves the same Toolkit to outside clients.
package agent

import (
	"context"
	"encoding/json"
	"strings"
)

// Toolkit is one live episode's tools: the cells arm (python, finish) or the tools arm (primitives, finish).
type Toolkit interface {
	Tools() []ToolSpec
	// Call runs one tool. The error is for infrastructure failures only (the kernel died, the context
	// ended); everything the model did wrong comes back as a ToolResult with IsError set.
	Call(ctx context.Context, name string, args json.RawMessage) (ToolResult, error)
}

// StripToolPrefix turns a client-qualified tool name into ours: "mcp__pyrualean__python" -> "python"
// (Claude Code's mcp__<server>__<tool>). It cuts at the last "__": a client's server name may hold
// "__" (Claude Code turns every character outside [A-Za-z0-9_-] into "_"), our tool names never do.
// "mcp__python" (no server part) is left alone.
func StripToolPrefix(name string) string {
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		return name
	}
	if i := strings.LastIndex(rest, "__"); i >= 0 {
		return rest[i+2:]
	}
	return name
}

// ToolSpec describes one tool: its name, what the model reads about it, and its JSON Schema.
type ToolSpec struct {
	Name        string
	Description string
	Parameters  json.RawMessage // a JSON Schema object
	ReadOnly    bool            // MCP readOnlyHint: lets Codex run it under approval_policy=never
	Stateful    bool            // a robot primitive that changes the simulation (tools arm)
}

// ToolResult is what one tool call gives back to the model.
type ToolResult struct {
	Text     string  // what the model reads (JSON feedback, seed format)
	Images   []Image // attached images, in order
	IsError  bool    // budget exhausted, unknown tool, malformed arguments, refused
	Finished bool    // finish was called or the episode is over: the model stops
	// EpisodeDone: the robot ended the episode (the task predicate fired, the step budget ran out)
	// and said so as episode_finished; the model may still call finish, as in the original.
	EpisodeDone bool

	recorded bool // its tool_turns.json row is written (a cell that ran); see recordingToolkit
}

// Image is one PNG attached to a tool result.
type Image struct {
	Name string
	PNG  []byte
}

// Episode statuses (the original's §5) plus "running" while an episode is live and "interrupted" for a run folder
// whose play process died before writing its final result.
const (
	StatusRunning      = "running"
	StatusCompleted    = "completed"
	StatusTimeout      = "timeout"
	StatusBootError    = "boot_error"
	StatusError        = "error"
	StatusCallBudget   = "call_budget"
	StatusPlannerError = "planner_error"
	StatusInterrupted  = "interrupted"
)

// MaxTextChars caps one tool result's text (the original's MAX_TEXT_CHARS).
const MaxTextChars = 20_000

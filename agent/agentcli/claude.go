package agentcli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/mcp"
)

// Claude Code run-folder files.
const (
	ClaudeEvents = "claude_events.jsonl" // `claude -p --output-format stream-json --verbose` stdout, verbatim
	ClaudeStderr = "claude_stderr.txt"
	ClaudeHome   = "claude_home" // CLAUDE_CONFIG_DIR
)

// claudeArgs builds the Claude Code arguments: print mode, stream-json in and out, our MCP server only,
// no settings or sessions from disk. Of the built-in tools only the original's read-only ones (Read, Glob,
// Grep) are offered, so the agent can read the guides its prompt points to; they are not in the allowed
// list, so Claude Code's own rule applies: reads in the working directory (the workspace) go through,
// anything outside it would need a person's approval, which dontAsk turns into a refusal.
func claudeArgs(cfg Config, mcpURL string, tools []agent.ToolSpec) []string {
	mcpConfig, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		mcp.DefaultName: map[string]any{"type": "http", "url": mcpURL}}})
	allowed := make([]string, 0, len(tools))
	for _, t := range tools {
		allowed = append(allowed, "mcp__"+mcp.DefaultName+"__"+t.Name)
	}
	// --include-partial-messages: the raw message_delta events carry each response's final output
	// tokens; the assistant lines only repeat the message_start snapshot.
	args := []string{"-p", "--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
		"--include-partial-messages",
		"--mcp-config", string(mcpConfig), "--strict-mcp-config",
		"--tools", strings.Join(claudeReadTools, ","), "--allowedTools", strings.Join(allowed, ","), "--permission-mode", "dontAsk",
		"--setting-sources", "", "--no-session-persistence", "--disable-slash-commands"}
	if cfg.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(cfg.MaxTurns+5)) // seed: N+5; the Toolkit enforces N
	}
	if cfg.Model != "" {
		args = append(args, "--model", cfg.Model)
	}
	if cfg.ReasoningEffort != "" {
		args = append(args, "--effort", cfg.ReasoningEffort)
	}
	return append(args, cfg.ExtraArgs...)
}

// claudeReadTools are the built-ins the original gives Claude Code (ClaudeAgentOptions tools=[...]).
var claudeReadTools = []string{"Read", "Glob", "Grep"}

// claudeInput is the first (and only) user message on stdin: the prompt text and the card images.
func claudeInput(p agent.Prompt) []byte {
	content := []any{map[string]any{"type": "text", "text": p.Text}}
	for _, im := range p.Images {
		content = append(content, map[string]any{"type": "image", "source": map[string]any{
			"type": "base64", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString(im.PNG)}})
	}
	b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": content}})
	return append(b, '\n')
}

// RunClaude drives ep with Claude Code in print mode until it ends, finish was called (it then gets
// FinishGrace to wrap up), the budget runs out (an error wrapping agent.ErrBudgetExceeded) or ctx ends.
func RunClaude(ctx context.Context, ep Driver, cfg Config) error {
	return runCLI(ctx, ep, cfg, claudeCLI{})
}

// claudeCLI is Claude Code's part of runCLI.
type claudeCLI struct{}

func (claudeCLI) files() cliFiles { return cliFiles{"claude", ClaudeEvents, ClaudeStderr, ClaudeHome} }

func (claudeCLI) prepare(Driver, Config, cliSetup) (func(), error) { return nil, nil }

func (claudeCLI) newStream() cliStream { return newClaudeStream(time.Now()) }

func (claudeCLI) command(ep Driver, cfg Config, s cliSetup, r *run) (*exec.Cmd, io.Reader) {
	toolTimeoutMS := 3600_000
	if cfg.Budget > 0 {
		toolTimeoutMS = int(cfg.Budget.Milliseconds()) + 60_000
	}
	env := []string{"CLAUDE_CONFIG_DIR=" + s.home,
		"ANTHROPIC_API_KEY=" + s.key,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1", "MCP_TIMEOUT=60000", "MCP_TOOL_TIMEOUT=" + strconv.Itoa(toolTimeoutMS),
		"MAX_MCP_OUTPUT_TOKENS=100000", "CLAUDE_CODE_MAX_RETRIES=" + strconv.Itoa(cfg.retries())}
	if cfg.BaseURL != "" {
		env = append(env, "ANTHROPIC_BASE_URL="+strings.TrimRight(cfg.BaseURL, "/"))
	}
	cmd := exec.Command(s.bin, claudeArgs(cfg, r.session.http.URL, ep.Toolkit().Tools())...)
	cmd.Dir = r.workspace
	cmd.Env = baseEnv(append(env, cfg.Env...)...)
	return cmd, bytes.NewReader(claudeInput(ep.Prompt()))
}

func (st *claudeStream) session() string { return st.sessionID }

// settle hands over the result line's totals and cost (authoritative: they count what the stream
// may not show) and keeps the final message.
func (st *claudeStream) settle(ep Driver, info *Info, cfg Config) {
	if st.result != nil {
		info.CostUSD = st.result.TotalCostUSD
		ep.Record().UsageTotals(st.totals, st.result.TotalCostUSD)
		if st.result.Result != "" {
			_ = os.WriteFile(filepath.Join(ep.Dir(), LastMessage), []byte(st.result.Result+"\n"), 0o644)
		}
	}
	if st.mcpStatus != "" && st.mcpStatus != "connected" {
		cfg.Logger.Warn("claude did not connect to the MCP server", "status", st.mcpStatus)
	}
}

func (st *claudeStream) failed(code *int, stderr func() string) string {
	r := st.result
	switch {
	case r == nil:
		return fmt.Sprintf("claude ended without a result (exit %s): %s", exitString(code), stderr())
	case r.Subtype == "error_max_turns":
		return "" // the turn ceiling: the episode ends unsolved, like an exhausted call budget
	case r.IsError && r.Subtype != "success":
		return fmt.Sprintf("claude %s: %s", r.Subtype, r.Result)
	case r.IsError:
		return "claude: " + r.Result
	}
	return ""
}

func exitString(code *int) string {
	if code == nil {
		return "signal"
	}
	return strconv.Itoa(*code)
}

// claudeStream follows Claude Code's stream-json output.
type claudeStream struct {
	now       func() time.Time
	inputAt   time.Time // when the model's latest input was complete (start, or the last tool result)
	current   string    // the message being streamed
	sessionID string
	mcpStatus string
	order     []string               // assistant message ids, in order
	byID      map[string]*agent.Turn // one Turn per API response
	result    *claudeResult
	totals    agent.Usage
}

type claudeResult struct {
	Subtype      string          `json:"subtype"`
	IsError      bool            `json:"is_error"`
	Result       string          `json:"result"`
	NumTurns     int             `json:"num_turns"`
	TotalCostUSD *float64        `json:"total_cost_usd"`
	Usage        *AnthropicUsage `json:"usage"`
}

// AnthropicUsage is the usage object of an Anthropic Messages API reply (Claude Code's stream
// repeats it; the anthropic runtime reads it from the API).
type AnthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	OutputTokensDetails      struct {
		ThinkingTokens int `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// Usage converts Anthropic counts: our input includes cache reads and writes (the original's §10).
func (u AnthropicUsage) Usage(calls int) agent.Usage {
	return agent.Usage{Calls: calls,
		InputTokens:  u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		CachedTokens: u.CacheReadInputTokens, OutputTokens: u.OutputTokens,
		ReasoningTokens: u.OutputTokensDetails.ThinkingTokens}
}

func newClaudeStream(start time.Time) *claudeStream {
	return &claudeStream{now: time.Now, inputAt: start, byID: map[string]*agent.Turn{}}
}

// turn returns the Turn for message id, creating it in order.
func (st *claudeStream) turn(id string, startedAt string) *agent.Turn {
	t := st.byID[id]
	if t == nil {
		if startedAt == "" {
			startedAt = st.inputAt.UTC().Format(time.RFC3339Nano)
		}
		t = &agent.Turn{StartedAt: startedAt, ToolCalls: []string{}}
		st.byID[id] = t
		st.order = append(st.order, id)
	}
	return t
}

// claudeEvent is one line of Claude Code's stream-json output (the fields read here).
type claudeEvent struct {
	Type       string `json:"type"`
	Subtype    string `json:"subtype"`
	SessionID  string `json:"session_id"`
	Timestamp  string `json:"timestamp"`
	MCPServers []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"mcp_servers"`
	Event   *claudeStreamEvent `json:"event"`
	Message *claudeMessage     `json:"message"`
}

// claudeStreamEvent is a raw API event (--include-partial-messages).
type claudeStreamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string          `json:"id"`
		Usage *AnthropicUsage `json:"usage"`
	} `json:"message"`
	Usage *struct {
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// claudeMessage is an assistant message as Claude Code repeats it.
type claudeMessage struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
		Name string `json:"name"`
	} `json:"content"`
	Usage *AnthropicUsage `json:"usage"`
}

func (st *claudeStream) line(b []byte) {
	var ev claudeEvent
	if json.Unmarshal(b, &ev) != nil {
		return
	}
	if ev.SessionID != "" {
		st.sessionID = ev.SessionID
	}
	switch ev.Type {
	case "system":
		for _, m := range ev.MCPServers {
			if m.Name == mcp.DefaultName {
				st.mcpStatus = m.Status
			}
		}
	case "stream_event":
		st.streamEvent(ev.Event)
	case "user":
		st.inputAt = st.now()
	case "assistant":
		st.assistant(ev.Message, ev.Timestamp)
	case "result":
		var r claudeResult
		if json.Unmarshal(b, &r) == nil {
			st.result = &r
			if r.Usage != nil {
				st.totals = r.Usage.Usage(len(st.order))
			}
		}
	}
}

// streamEvent takes a response's usage: its input at message_start, its final output tokens and
// latency at message_delta.
func (st *claudeStream) streamEvent(ev *claudeStreamEvent) {
	if ev == nil {
		return
	}
	switch ev.Type {
	case "message_start":
		if m := ev.Message; m != nil && m.ID != "" {
			st.current = m.ID
			t := st.turn(m.ID, "")
			if m.Usage != nil {
				t.Usage = m.Usage.Usage(1)
			}
		}
	case "message_delta":
		if t := st.byID[st.current]; t != nil {
			if ev.Usage != nil {
				t.Usage.OutputTokens = ev.Usage.OutputTokens
			}
			t.LatencyS = agent.Round(st.now().Sub(st.inputAt).Seconds(), 3)
		}
	}
}

// assistant takes a message's tool calls and text (and its usage, when no stream event gave it).
func (st *claudeStream) assistant(m *claudeMessage, timestamp string) {
	if m == nil {
		return
	}
	_, seen := st.byID[m.ID]
	t := st.turn(m.ID, timestamp)
	if m.Model == "<synthetic>" {
		// Claude Code's own message about a failed API call: a failed request, no usage.
		t.Usage = agent.Usage{Calls: 1}
		for _, c := range m.Content {
			t.Error += c.Text
		}
		return
	}
	if !seen && m.Usage != nil {
		t.Usage = m.Usage.Usage(1)
	}
	for _, c := range m.Content {
		switch c.Type {
		case "tool_use":
			t.ToolCalls = append(t.ToolCalls, agent.StripToolPrefix(c.Name))
		case "text":
			t.Content += c.Text
		}
	}
}

func (st *claudeStream) turns() []agent.Turn {
	out := make([]agent.Turn, 0, len(st.order))
	for _, id := range st.order {
		out = append(out, *st.byID[id])
	}
	return out
}

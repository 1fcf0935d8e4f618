package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
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
	cfg.defaults()
	setup, err := prepare(ctx, ep, cfg, "claude", ClaudeEvents, ClaudeStderr, ClaudeHome)
	if err != nil {
		return err
	}
	bin, key, home, dir, info := setup.bin, setup.key, setup.home, ep.Dir(), setup.info
	r, cleanup, err := startRun(ctx, dir, ep, cfg, "claude", ClaudeEvents, ClaudeStderr)
	if err != nil {
		return err
	}
	defer cleanup()
	bctx, s := r.ctx, r.session

	toolTimeoutMS := 3600_000
	if cfg.Budget > 0 {
		toolTimeoutMS = int(cfg.Budget.Milliseconds()) + 60_000
	}
	env := []string{"CLAUDE_CONFIG_DIR=" + home,
		"ANTHROPIC_API_KEY=" + key,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1", "MCP_TIMEOUT=60000", "MCP_TOOL_TIMEOUT=" + strconv.Itoa(toolTimeoutMS),
		"MAX_MCP_OUTPUT_TOKENS=100000", "CLAUDE_CODE_MAX_RETRIES=" + strconv.Itoa(cfg.retries())}
	if cfg.BaseURL != "" {
		env = append(env, "ANTHROPIC_BASE_URL="+strings.TrimRight(cfg.BaseURL, "/"))
	}
	env = append(env, cfg.Env...)

	turnBase := 0
	for attempt := 1; ; attempt++ {
		ep.SetPlannerAttempts(attempt)
		st := newClaudeStream(time.Now())
		cmd := exec.Command(bin, claudeArgs(cfg, s.http.URL, ep.Toolkit().Tools())...)
		cmd.Dir = r.workspace
		cmd.Env = baseEnv(env...)
		done := make(chan struct{})
		code, killed, runErr := runProcess(bctx, runSpec{
			cmd: cmd, stdin: bytes.NewReader(claudeInput(ep.Prompt())), events: r.events, stderr: r.stderr,
			onLine: st.line, grace: cfg.KillGrace, stopEarly: finishWatch(s, cfg.FinishGrace, done),
		})
		close(done)
		info.ExitCode, info.Killed, info.SessionID, info.Attempts = code, killed, st.sessionID, attempt
		info.ToolCalls, info.Cancelled = s.toolCalls()
		publish(ep, info)
		turns := st.turns()
		for i, t := range turns {
			t.Turn = turnBase + i + 1
			if err := ep.RecordTurn(t); err != nil {
				return err
			}
		}
		turnBase += len(turns)
		if st.result != nil {
			info.CostUSD = st.result.TotalCostUSD
			publish(ep, info)
			ep.SetUsageTotals(st.totals, st.result.TotalCostUSD)
			if st.result.Result != "" {
				_ = os.WriteFile(filepath.Join(dir, LastMessage), []byte(st.result.Result+"\n"), 0o644)
			}
		}
		if st.mcpStatus != "" && st.mcpStatus != "connected" {
			cfg.Logger.Warn("claude did not connect to the MCP server", "status", st.mcpStatus)
		}
		switch {
		case runErr != nil:
			return runErr
		}
		if err, ok := endReason(bctx, killed, ep.Finished()); ok {
			return err
		}
		var why string
		switch {
		case st.result == nil:
			why = fmt.Sprintf("claude ended without a result (exit %s): %s", exitString(code), tail(filepath.Join(dir, ClaudeStderr), 400))
		case st.result.Subtype == "error_max_turns":
			return nil // the turn ceiling: the episode ends unsolved, like an exhausted call budget
		case st.result.IsError:
			why = "claude: " + st.result.Result
			if st.result.Subtype != "success" {
				why = fmt.Sprintf("claude %s: %s", st.result.Subtype, st.result.Result)
			}
		default:
			return nil
		}
		if info.ToolCalls > 0 || attempt >= cfg.PlannerAttempts {
			return fmt.Errorf("%w: %s", agent.ErrPlanner, why)
		}
		cfg.Logger.Warn("claude failed before its first tool call; retrying", "attempt", attempt, "err", why)
		if err := sleepCtx(bctx, cfg.PlannerRetryWait); err != nil {
			return err
		}
	}
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
	Subtype      string       `json:"subtype"`
	IsError      bool         `json:"is_error"`
	Result       string       `json:"result"`
	NumTurns     int          `json:"num_turns"`
	TotalCostUSD *float64     `json:"total_cost_usd"`
	Usage        *claudeUsage `json:"usage"`
}

type claudeUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	OutputTokensDetails      struct {
		ThinkingTokens int `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// usage converts Anthropic counts: our input includes cache reads and writes (the original's §10).
func (u claudeUsage) usage(calls int) agent.Usage {
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

func (st *claudeStream) line(b []byte) {
	var ev struct {
		Type       string `json:"type"`
		Subtype    string `json:"subtype"`
		SessionID  string `json:"session_id"`
		Timestamp  string `json:"timestamp"`
		MCPServers []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"mcp_servers"`
		Event *struct {
			Type    string `json:"type"`
			Message *struct {
				ID    string       `json:"id"`
				Usage *claudeUsage `json:"usage"`
			} `json:"message"`
			Usage *struct {
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		} `json:"event"`
		Message *struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
				Name string `json:"name"`
			} `json:"content"`
			Usage *claudeUsage `json:"usage"`
		} `json:"message"`
	}
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
		if ev.Event == nil {
			return
		}
		switch ev.Event.Type {
		case "message_start":
			if m := ev.Event.Message; m != nil && m.ID != "" {
				st.current = m.ID
				t := st.turn(m.ID, "")
				if m.Usage != nil {
					t.Usage = m.Usage.usage(1)
				}
			}
		case "message_delta":
			if t := st.byID[st.current]; t != nil {
				if ev.Event.Usage != nil {
					t.Usage.OutputTokens = ev.Event.Usage.OutputTokens
				}
				t.LatencyS = round3(st.now().Sub(st.inputAt).Seconds())
			}
		}
	case "user":
		st.inputAt = st.now()
	case "assistant":
		if ev.Message == nil {
			return
		}
		_, seen := st.byID[ev.Message.ID]
		t := st.turn(ev.Message.ID, ev.Timestamp)
		if ev.Message.Model == "<synthetic>" {
			// Claude Code's own message about a failed API call: a failed request, no usage.
			seen, t.Usage = true, agent.Usage{Calls: 1}
			for _, c := range ev.Message.Content {
				t.Error += c.Text
			}
			return
		}
		if !seen && ev.Message.Usage != nil {
			t.Usage = ev.Message.Usage.usage(1)
		}
		for _, c := range ev.Message.Content {
			switch c.Type {
			case "tool_use":
				t.ToolCalls = append(t.ToolCalls, agent.StripToolPrefix(c.Name))
			case "text":
				t.Content += c.Text
			}
		}
	case "result":
		var r claudeResult
		if json.Unmarshal(b, &r) == nil {
			st.result = &r
			if r.Usage != nil {
				st.totals = r.Usage.usage(len(st.order))
			}
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

package agentcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// Codex run-folder files.
const (
	CodexEvents = "codex_events.jsonl" // `codex exec --json` stdout, verbatim (all attempts)
	CodexStderr = "codex_stderr.txt"
	CodexHome   = "codex_home" // CODEX_HOME: config, rollouts (sessions/**/rollout-*.jsonl)
	LastMessage = "last_message.md"
)

// codexFeaturesOff are Codex built-ins the robot agent must not have: the only way to act is our MCP
// tools (no shell, no sub-agents, no web or image tools, no skills).
var codexFeaturesOff = []string{"shell_tool", "unified_exec", "shell_snapshot", "multi_agent", "goals",
	"view_image", "apps", "plugins", "image_generation", "browser_use", "computer_use", "in_app_browser",
	"tool_suggest", "sleep_tool", "skill_search", "memories",
	// Without this, Codex retries an unreachable model server forever; we want a planner error.
	"unbounded_connection_retries"}

// CodexReasoningDefault is the reasoning effort Codex runs with unless told otherwise (the original's).
const CodexReasoningDefault = "xhigh"

// codexSandbox is the original's sandbox mode for Codex. With the shell and every other acting built-in
// turned off (codexFeaturesOff) it only bounds what Codex itself may write: the workspace.
const codexSandbox = "workspace-write"

// codexArgs builds `codex exec` arguments. mcpURL is our streamable HTTP MCP server.
func codexArgs(cfg Config, mcpURL, workspace, lastMessage string, images []string) []string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) } // a TOML basic string
	provider := "pyrualean"
	baseURL := cfg.BaseURL
	if baseURL == "" {
		baseURL = "https://api.openai.com/v1"
	}
	retries := cfg.retries()
	toolTimeout := 3600
	if cfg.Budget > 0 {
		toolTimeout = int(cfg.Budget/time.Second) + 60
	}
	args := []string{"exec", "--json", "--skip-git-repo-check", "--color", "never", "--ignore-rules",
		"-s", codexSandbox, "-C", workspace, "-o", lastMessage,
		"-c", "approval_policy=" + q("never"),
		"-c", "project_doc_max_bytes=0",
		"-c", "model_provider=" + q(provider),
		"-c", "model_providers." + provider + ".name=" + q(provider),
		"-c", "model_providers." + provider + ".base_url=" + q(strings.TrimRight(baseURL, "/")),
		"-c", "model_providers." + provider + ".wire_api=" + q("responses"),
		"-c", "model_providers." + provider + ".env_key=" + q(apiKeyEnv(cfg, "codex")),
		"-c", "model_providers." + provider + ".request_max_retries=" + strconv.Itoa(retries),
		"-c", "model_providers." + provider + ".stream_max_retries=" + strconv.Itoa(retries),
		"-c", "mcp_servers." + mcp.DefaultName + ".url=" + q(mcpURL),
		"-c", "mcp_servers." + mcp.DefaultName + ".startup_timeout_sec=60",
		"-c", "mcp_servers." + mcp.DefaultName + ".tool_timeout_sec=" + strconv.Itoa(toolTimeout),
		// Belt and braces against exec's auto-cancel of MCP calls (openai/codex#16685): our tools are
		// annotated read-only, and the server's tools are approved up front.
		"-c", "mcp_servers." + mcp.DefaultName + ".default_tools_approval_mode=" + q("approve"),
		"-c", "mcp_servers." + mcp.DefaultName + ".required=true",
	}
	if cfg.Model != "" {
		args = append(args, "-m", cfg.Model)
	}
	if cfg.ReasoningEffort != "" {
		args = append(args, "-c", "model_reasoning_effort="+q(cfg.ReasoningEffort))
	}
	for _, f := range codexFeaturesOff {
		args = append(args, "--disable", f)
	}
	for _, im := range images {
		args = append(args, "--image="+im) // one value per flag: -i takes many and would eat the "-"
	}
	args = append(args, cfg.ExtraArgs...)
	return append(args, "-") // the prompt comes on stdin
}

// ErrNoAPIKey means the API key's environment variable is empty.
var ErrNoAPIKey = errors.New("no API key")

// apiKey reads the key from its environment variable. A local server (BaseURL set) may need none:
// the CLI then gets a placeholder, since both refuse to start without a key.
func apiKey(cfg Config, runtime string) (string, error) {
	name := apiKeyEnv(cfg, runtime)
	if v := os.Getenv(name); v != "" {
		return v, nil
	}
	if cfg.BaseURL != "" {
		return "unused", nil
	}
	if runtime == "codex" && LoggedIn(cfg.Home) {
		return "", nil // Codex reads its login from CODEX_HOME
	}
	return "", fmt.Errorf("cli: %w: $%s is empty (set it, or name another variable with --api-key-env)", ErrNoAPIKey, name)
}

// LoggedIn says whether home is a CODEX_HOME that `codex login` has signed in (its auth.json): Codex then
// needs no API key, as the original runs it.
func LoggedIn(home string) bool {
	if home == "" {
		return false
	}
	fi, err := os.Stat(filepath.Join(home, "auth.json"))
	return err == nil && fi.Mode().IsRegular()
}

func apiKeyEnv(cfg Config, runtime string) string {
	if cfg.APIKeyEnv != "" {
		return cfg.APIKeyEnv
	}
	if runtime == "claude" {
		return "ANTHROPIC_API_KEY"
	}
	return "OPENAI_API_KEY"
}

// RunCodex drives ep with `codex exec --json` until Codex ends, finish was called (Codex then gets
// FinishGrace to wrap up), the budget runs out (an error wrapping agent.ErrBudgetExceeded) or ctx ends. See the package comment.
func RunCodex(ctx context.Context, ep Driver, cfg Config) error {
	return runCLI(ctx, ep, cfg, &codexCLI{})
}

// codexCLI is Codex's part of runCLI.
type codexCLI struct {
	home   string   // CODEX_HOME
	images []string // the prompt's images as files, for --image
}

func (*codexCLI) files() cliFiles { return cliFiles{"codex", CodexEvents, CodexStderr, CodexHome} }

// prepare writes the prompt's images; a home of Codex's own in the run folder keeps, at the end, only
// what is worth keeping.
func (c *codexCLI) prepare(ep Driver, cfg Config, s cliSetup) (done func(), err error) {
	c.home = s.home
	if cfg.Home == "" {
		done = func() { pruneCodexHome(s.home) }
	}
	c.images, err = writePromptImages(filepath.Join(ep.Dir(), CodexHome, "prompt_images"), ep.Prompt().Images)
	return done, err
}

func (c *codexCLI) newStream() cliStream { return &codexStream{home: c.home} }

func (c *codexCLI) command(ep Driver, cfg Config, s cliSetup, r *run) (*exec.Cmd, io.Reader) {
	cmd := exec.Command(s.bin, codexArgs(cfg, r.session.http.URL, r.workspace, filepath.Join(ep.Dir(), LastMessage), c.images)...)
	cmd.Dir = r.workspace
	env := []string{"CODEX_HOME=" + s.home}
	if s.key != "" { // else its login in CODEX_HOME
		env = append(env, apiKeyEnv(cfg, "codex")+"="+s.key)
	}
	cmd.Env = baseEnv(append(env, cfg.Env...)...)
	return cmd, strings.NewReader(ep.Prompt().Text)
}

func (st *codexStream) session() string { return st.threadID }

// turns are read from the attempt's rollout (one per model response); without one, a summary turn
// from turn.completed; and a failed request, which the rollout's usage records leave out.
func (st *codexStream) turns() []agent.Turn {
	turns := codexTurns(st.home, st.threadID)
	if len(turns) == 0 && st.usage != (agent.Usage{}) {
		turns = []agent.Turn{{Usage: st.usage}}
	}
	if st.failure != "" {
		turns = append(turns, agent.Turn{Error: st.failure, ToolCalls: []string{}, Usage: agent.Usage{Calls: 1}})
	}
	return turns
}

func (st *codexStream) settle(_ Driver, info *Info, cfg Config) {
	info.Cancelled = max(info.Cancelled, st.cancelledCalls)
	if info.Cancelled > 0 {
		cfg.Logger.Warn("codex gave up on MCP tool calls (their cells ran to the end)", "count", info.Cancelled)
	}
}

func (st *codexStream) failed(code *int, stderr func() string) string {
	switch {
	case st.failure != "":
		return "codex: " + st.failure
	case code != nil && *code != 0:
		return fmt.Sprintf("codex: codex exited with status %d: %s", *code, stderr())
	}
	return ""
}

// codexStream follows `codex exec --json` events.
type codexStream struct {
	home           string // CODEX_HOME, where the rollout is
	threadID       string
	usage          agent.Usage // sum of turn.completed usage
	failure        string      // turn.failed / error event message
	toolCalls      int
	cancelledCalls int
	lastMessage    string
}

func (st *codexStream) line(b []byte) {
	var ev struct {
		Type     string          `json:"type"`
		ThreadID string          `json:"thread_id"`
		Message  string          `json:"message"`
		Error    json.RawMessage `json:"error"`
		Usage    *codexUsage     `json:"usage"`
		Item     *struct {
			Type   string          `json:"type"`
			Text   string          `json:"text"`
			Status string          `json:"status"`
			Error  json.RawMessage `json:"error"`
		} `json:"item"`
	}
	if json.Unmarshal(b, &ev) != nil {
		return // Codex also prints plain log lines; the file keeps them
	}
	switch ev.Type {
	case "thread.started":
		st.threadID = ev.ThreadID
	case "turn.completed":
		if ev.Usage != nil {
			st.usage.Add(ev.Usage.usage())
		}
	case "turn.failed":
		st.failure = errorText(ev.Error)
	case "error":
		if st.failure == "" {
			st.failure = ev.Message
		}
	case "item.completed":
		if ev.Item == nil {
			return
		}
		switch ev.Item.Type {
		case "mcp_tool_call":
			st.toolCalls++
			// Codex gives up on a call when its tool timeout passes, or cancels it itself in exec
			// mode (unapproved tools, openai/codex#16685); either way the cell may still be running.
			if msg := strings.ToLower(errorText(ev.Item.Error)); strings.Contains(msg, "cancel") || strings.Contains(msg, "timed out") {
				st.cancelledCalls++
			}
		case "agent_message":
			st.lastMessage = ev.Item.Text
		}
	}
}

// errorText reads {"message": "..."} or a bare string.
func errorText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

type codexUsage struct {
	InputTokens           int `json:"input_tokens"`
	CachedInputTokens     int `json:"cached_input_tokens"`
	OutputTokens          int `json:"output_tokens"`
	ReasoningOutputTokens int `json:"reasoning_output_tokens"`
}

// usage converts Codex's counts: input includes cached (OpenAI semantics, as ours).
func (u codexUsage) usage() agent.Usage {
	return agent.Usage{Calls: 1, InputTokens: u.InputTokens, CachedTokens: u.CachedInputTokens,
		OutputTokens: u.OutputTokens, ReasoningTokens: u.ReasoningOutputTokens}
}

// codexTurns reads the rollout of thread (under home/sessions) and returns one Turn per model response:
// Codex records a token_usage_record per response, after the response's items.
func codexTurns(home, thread string) []agent.Turn {
	if thread == "" {
		return nil
	}
	var path string
	filepath.WalkDir(filepath.Join(home, "sessions"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "rollout-") && strings.Contains(d.Name(), thread) {
			path = p
		}
		return nil
	})
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseRollout(f)
}

func parseRollout(r io.Reader) []agent.Turn {
	var turns []agent.Turn
	cur := agent.Turn{ToolCalls: []string{}}
	var start time.Time
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var line struct {
			Timestamp string `json:"timestamp"`
			Type      string `json:"type"`
			Payload   struct {
				Type      string          `json:"type"`
				Name      string          `json:"name"`
				Role      string          `json:"role"`
				Content   json.RawMessage `json:"content"`
				Usage     *codexUsage     `json:"usage"`
				Namespace string          `json:"namespace"`
			} `json:"payload"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		ts, _ := time.Parse(time.RFC3339Nano, line.Timestamp)
		p := line.Payload
		switch {
		case line.Type == "response_item" && (p.Type == "function_call" || p.Type == "custom_tool_call"):
			cur.ToolCalls = append(cur.ToolCalls, agent.StripToolPrefix(p.Name))
		case line.Type == "response_item" && p.Type == "message" && p.Role == "assistant":
			var parts []struct {
				Text string `json:"text"`
			}
			json.Unmarshal(p.Content, &parts)
			for _, part := range parts {
				cur.Content += part.Text
			}
		case line.Type == "response_item" && p.Type == "function_call_output", line.Type == "event_msg" && p.Type == "task_started":
			start = ts // the next request starts after a tool result (or at the task start)
		case line.Type == "token_usage_record" && p.Usage != nil:
			cur.Usage = p.Usage.usage()
			if !start.IsZero() {
				cur.StartedAt = start.UTC().Format(time.RFC3339Nano)
				cur.LatencyS = agent.Round(ts.Sub(start).Seconds(), 3)
			}
			turns = append(turns, cur)
			cur = agent.Turn{ToolCalls: []string{}}
			start = ts
		}
	}
	return turns
}

// writePromptImages saves the prompt's images as PNG files for `codex exec --image`.
func writePromptImages(dir string, images []agent.Image) ([]string, error) {
	if len(images) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cli: %w", err)
	}
	var paths []string
	for i, im := range images {
		name := im.Name
		if name == "" {
			name = fmt.Sprintf("image_%d", i)
		}
		name = strings.TrimSuffix(filepath.Base(name), ".png") + ".png"
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, im.PNG, 0o644); err != nil {
			return nil, fmt.Errorf("cli: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// pruneCodexHome keeps what documents the run (the rollout under sessions/, the prompt images) and
// drops Codex's caches (skills copies, sqlite state: a few MB per run).
func pruneCodexHome(home string) {
	entries, err := os.ReadDir(home)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Name() != "sessions" && e.Name() != "prompt_images" {
			os.RemoveAll(filepath.Join(home, e.Name()))
		}
	}
}

// tail returns the last n bytes of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

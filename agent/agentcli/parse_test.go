package agentcli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
)

// The fixtures in testdata are real event streams and rollouts recorded from the pinned CLIs by
// cli_test.go (scripted model: 1000 input tokens, 200 cached, 50 output, 20 reasoning per request),
// with image data and long strings shortened.

func feed(t *testing.T, name string, line func([]byte)) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line(sc.Bytes())
	}
}

func per(n int, reasoning bool) agent.Usage {
	u := agent.Usage{Calls: n, InputTokens: 1000 * n, CachedTokens: 200 * n, OutputTokens: 50 * n}
	if reasoning {
		u.ReasoningTokens = 20 * n
	}
	return u
}

func TestCodexStream(t *testing.T) {
	tests := []struct {
		file      string
		usage     agent.Usage
		toolCalls int
		failure   string
		last      string
	}{
		{"codex_solved_events.jsonl", agent.Usage{InputTokens: 5000, CachedTokens: 1000, OutputTokens: 250, ReasoningTokens: 100, Calls: 1}, 4, "", "The red block is on the blue block."},
		{"codex_killed_events.jsonl", agent.Usage{}, 0, "", ""},
		{"codex_failed_events.jsonl", agent.Usage{}, 1, "We’re currently experiencing high demand, which may cause temporary errors.", ""},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			st := &codexStream{}
			feed(t, tc.file, st.line)
			if st.threadID == "" {
				t.Error("no thread id")
			}
			if st.usage != tc.usage || st.toolCalls != tc.toolCalls || st.failure != tc.failure || st.lastMessage != tc.last {
				t.Errorf("got usage %+v calls %d failure %q last %q; want %+v %d %q %q",
					st.usage, st.toolCalls, st.failure, st.lastMessage, tc.usage, tc.toolCalls, tc.failure, tc.last)
			}
		})
	}
}

func TestParseRollout(t *testing.T) {
	tests := []struct {
		file  string
		tools [][]string // tool calls per model request
	}{
		{"codex_solved_rollout.jsonl", [][]string{{"python"}, {"python"}, {"python"}, {"finish"}, {}}},
		// Killed while the first call ran: the answered request is there, its result is not.
		{"codex_killed_rollout.jsonl", [][]string{{"python"}}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			turns := parseRollout(f)
			if len(turns) != len(tc.tools) {
				t.Fatalf("%d turns, want %d", len(turns), len(tc.tools))
			}
			for i, turn := range turns {
				if turn.Usage != per(1, true) {
					t.Errorf("turn %d usage %+v", i, turn.Usage)
				}
				if !slices.Equal(turn.ToolCalls, tc.tools[i]) {
					t.Errorf("turn %d tool calls %v, want %v", i, turn.ToolCalls, tc.tools[i])
				}
				if _, err := time.Parse(time.RFC3339Nano, turn.StartedAt); err != nil || turn.LatencyS < 0 {
					t.Errorf("turn %d started %q latency %v", i, turn.StartedAt, turn.LatencyS)
				}
			}
			if last := turns[len(turns)-1]; len(tc.tools) == 5 && last.Content != "The red block is on the blue block." {
				t.Errorf("final message %q", last.Content)
			}
		})
	}
}

func TestClaudeStream(t *testing.T) {
	tests := []struct {
		file    string
		tools   [][]string
		result  bool // a result line was written
		isError bool
		totals  agent.Usage
		errs    int // synthetic (failed request) turns
	}{
		{"claude_solved_events.jsonl", [][]string{{"python"}, {"python"}, {"python"}, {"finish"}, {}}, true, false, per(5, false), 0},
		{"claude_killed_events.jsonl", [][]string{{"python"}}, false, false, agent.Usage{}, 0},
		{"claude_failed_events.jsonl", [][]string{{"python"}, {}}, true, true, agent.Usage{Calls: 2, InputTokens: 1000, CachedTokens: 200, OutputTokens: 50}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			st := newClaudeStream(time.Now())
			feed(t, tc.file, st.line)
			if st.sessionID == "" || st.mcpStatus != "connected" {
				t.Errorf("session %q mcp %q", st.sessionID, st.mcpStatus)
			}
			turns := st.turns()
			if len(turns) != len(tc.tools) {
				t.Fatalf("%d turns, want %d", len(turns), len(tc.tools))
			}
			errs := 0
			for i, turn := range turns {
				if !slices.Equal(turn.ToolCalls, tc.tools[i]) {
					t.Errorf("turn %d tool calls %v, want %v", i, turn.ToolCalls, tc.tools[i])
				}
				if turn.Error != "" {
					errs++
					if !strings.Contains(turn.Error, "500") || turn.Usage != (agent.Usage{Calls: 1}) {
						t.Errorf("failed turn %+v", turn)
					}
					continue
				}
				// Per-response usage: the final output tokens come from message_delta.
				if turn.Usage != per(1, false) {
					t.Errorf("turn %d usage %+v", i, turn.Usage)
				}
			}
			if errs != tc.errs {
				t.Errorf("%d failed turns, want %d", errs, tc.errs)
			}
			if (st.result != nil) != tc.result {
				t.Fatalf("result line: %v, want %v", st.result != nil, tc.result)
			}
			if st.result == nil {
				return
			}
			if st.result.IsError != tc.isError || st.totals != tc.totals || st.result.TotalCostUSD == nil {
				t.Errorf("result %+v totals %+v; want is_error %v totals %+v", st.result, st.totals, tc.isError, tc.totals)
			}
		})
	}
}

func TestCodexArgs(t *testing.T) {
	args := codexArgs(Config{Model: "gpt-x", ReasoningEffort: "xhigh", BaseURL: "http://h:1/v1/", APIKeyEnv: "K", Budget: time.Minute},
		"http://127.0.0.1:9/mcp", "/ws", "/run/last_message.md", []string{"/a.png", "/b.png"})
	joined := strings.Join(args, "\x00")
	for _, want := range []string{
		"exec\x00--json", "-s\x00workspace-write", "-m\x00gpt-x", `model_reasoning_effort="xhigh"`, `model_providers.pyrualean.base_url="http://h:1/v1"`,
		`model_providers.pyrualean.wire_api="responses"`, `model_providers.pyrualean.env_key="K"`,
		`mcp_servers.pyrualean.url="http://127.0.0.1:9/mcp"`, "mcp_servers.pyrualean.tool_timeout_sec=120",
		`mcp_servers.pyrualean.default_tools_approval_mode="approve"`, "--disable\x00shell_tool",
		"--image=/a.png\x00--image=/b.png", "-o\x00/run/last_message.md", "-C\x00/ws",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("codex args lack %q: %q", want, args)
		}
	}
	if args[len(args)-1] != "-" {
		t.Errorf("the prompt must come on stdin: last arg %q", args[len(args)-1])
	}
}

func TestClaudeArgs(t *testing.T) {
	tools := []agent.ToolSpec{{Name: "python"}, {Name: "finish"}}
	args := claudeArgs(Config{Model: "m", ReasoningEffort: "high", MaxTurns: 7}, "http://127.0.0.1:9/mcp", tools)
	joined := strings.Join(args, "\x00")
	for _, want := range []string{
		"-p\x00--output-format\x00stream-json\x00--verbose", "--strict-mcp-config", "--tools\x00Read,Glob,Grep\x00",
		"--allowedTools\x00mcp__pyrualean__python,mcp__pyrualean__finish", "--max-turns\x0012", "--model\x00m",
		"--effort\x00high", `{"mcpServers":{"pyrualean":{"type":"http","url":"http://127.0.0.1:9/mcp"}}}`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("claude args lack %q: %q", want, args)
		}
	}
}

func TestAPIKey(t *testing.T) {
	t.Setenv("PYR_TEST_KEY", "sk-1")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant")
	loggedIn, bare := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(loggedIn, "auth.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     Config
		runtime string
		want    string
		err     bool
	}{
		{"named variable", Config{APIKeyEnv: "PYR_TEST_KEY"}, "codex", "sk-1", false},
		{"claude default variable", Config{}, "claude", "sk-ant", false},
		{"empty, remote endpoint", Config{}, "codex", "", true},
		{"empty, local server", Config{BaseURL: "http://127.0.0.1:8080/v1"}, "codex", "unused", false},
		{"empty, codex login's home", Config{Home: loggedIn}, "codex", "", false},
		{"empty, a home not signed in", Config{Home: bare}, "codex", "", true},
		{"empty, claude with a codex home", Config{Home: loggedIn, APIKeyEnv: "OPENAI_API_KEY"}, "claude", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := apiKey(tc.cfg, tc.runtime)
			if got != tc.want || (err != nil) != tc.err || (err != nil && !errors.Is(err, ErrNoAPIKey)) {
				t.Errorf("apiKey = %q, %v; want %q, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestRunProcess(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		budget  time.Duration
		stop    bool
		killed  string
		exit    int // -1: ended by a signal
		lines   int
		descend bool // the script prints a background child's pid, which must be gone afterwards
	}{
		{"exits on its own", "echo a; echo b; exit 3", 0, false, "", 3, 2, false},
		{"a child keeps stdout open", "sleep 60 & echo $!", 0, false, "", 0, 1, true},
		{"budget", "echo a; sleep 60", 300 * time.Millisecond, false, "budget", -1, 1, false},
		{"ignores SIGTERM", "trap '' TERM; echo a; sleep 60 & echo $!; wait", 300 * time.Millisecond, false, "budget", -1, 2, true},
		{"ended after finish", "echo a; sleep 60", 0, true, "after_finish", -1, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := budgetContext(context.Background(), tc.budget)
			defer cancel()
			stop := make(chan string, 1)
			if tc.stop {
				time.AfterFunc(300*time.Millisecond, func() { stop <- "after_finish" })
			}
			var lines []string
			start := time.Now()
			code, killed, err := runProcess(ctx, runSpec{cmd: exec.Command("sh", "-c", tc.script), stdin: strings.NewReader(""),
				onLine: func(b []byte) { lines = append(lines, string(b)) }, grace: 500 * time.Millisecond, stopEarly: stop})
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > 15*time.Second {
				t.Errorf("took %s", took)
			}
			got := -1
			if code != nil {
				got = *code
			}
			if killed != tc.killed || got != tc.exit || len(lines) != tc.lines {
				t.Errorf("killed %q exit %d lines %q; want %q %d and %d lines", killed, got, lines, tc.killed, tc.exit, tc.lines)
			}
			if tc.descend && len(lines) > 0 {
				pid, _ := strconv.Atoi(lines[len(lines)-1])
				time.Sleep(200 * time.Millisecond) // let init reap it
				if pid > 0 && alive(pid) {
					t.Errorf("the child %d survived", pid)
				}
			}
		})
	}
}

// alive says whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

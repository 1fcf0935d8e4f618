package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/agentcli"
	"github.com/pyrualean/pyrualean/agent/agentcli/scripted"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

func TestCmdMCPBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined"},
		{"arm", []string{"--arm", "legs"}, `--arm "legs"`},
		{"images", []string{"--images", "always"}, `--images "always"`},
		{"seed", []string{"--seed", "-1"}, `--seed "-1"`},
		{"budget", []string{"--budget-s", "-5"}, `--budget-s "-5"`},
		{"argument", []string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cmdMCP(context.Background(), tc.args, &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d and %q", code, stdout.String(), stderr.String(), exitUsage, tc.want)
			}
		})
	}
}

func callText(res *sdk.CallToolResult) (text string, images int) {
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			text += c.Text
		case *sdk.ImageContent:
			if c.MIMEType == "image/png" && bytes.HasPrefix(c.Data, []byte("\x89PNG")) {
				images++
			}
		}
	}
	return text, images
}

func readMCPResult(t *testing.T, dir string) agent.Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r agent.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

var built struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// buildPyrualean builds the binary once per test process.
func buildPyrualean(t *testing.T) string {
	t.Helper()
	nbtest.Heavy(t, "the pyrualean binary serving an episode")
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "pyrualean-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "pyrualean")
		built.out, built.err = exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.path
}

// TestCmdMCPStdio runs the built binary as a stdio MCP server for a tools-arm episode and drives it with
// the go-sdk's own client.
func TestCmdMCPStdio(t *testing.T) {
	bin := buildPyrualean(t)
	out := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "mcp", "--robot", "tabletop", "--task", "stack_blocks", "--seed", "0",
		"--arm", "tools", "--images", "on-demand", "--max-turns", "3", "--out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "pyrualean-test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	if cs.InitializeResult().ServerInfo.Name != "pyrualean" || !strings.Contains(cs.InitializeResult().Instructions, "stack") {
		t.Errorf("initialize: server %+v, instructions %.200q", cs.InitializeResult().ServerInfo, cs.InitializeResult().Instructions)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, tool := range tools.Tools {
		have[tool.Name] = true
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("%s: not annotated read-only", tool.Name)
		}
	}
	for _, want := range []string{"state", "show", "move_to", "finish"} {
		if !have[want] {
			t.Errorf("tools arm lacks %s (have %v)", want, have)
		}
	}
	if have["python"] {
		t.Error("tools arm offers python")
	}
	steps := []struct {
		name    string
		tool    string
		args    map[string]any
		isError bool
		text    string
		images  int
	}{
		{"state", "state", map[string]any{}, false, "eef", 0},
		{"show", "show", map[string]any{"camera": "agentview"}, false, "", 1},
		{"a primitive's ValueError is a normal result", "move_to", map[string]any{"xyz": "up"}, false, "ValueError", 0},
		{"unknown tool", "fly", map[string]any{}, true, "fly", 0},
		{"budget exhausted", "state", map[string]any{}, true, "budget", 0},
		{"finish", "finish", map[string]any{"status": "failure", "summary": "stdio test"}, false, "", 0},
	}
	for _, s := range steps {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: s.tool, Arguments: s.args})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		text, images := callText(res)
		t.Logf("%s: isError=%v images=%d %.200s", s.name, res.IsError, images, text)
		if res.IsError != s.isError || !strings.Contains(text, s.text) || images != s.images || res.StructuredContent != nil {
			t.Errorf("%s: isError=%v images=%d structured=%v text=%.300q; want isError=%v images=%d text with %q",
				s.name, res.IsError, images, res.StructuredContent != nil, text, s.isError, s.images, s.text)
		}
	}
	// Closing the session closes the server's stdin: the episode ends and the process exits.
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Exited() || cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("server process: %v\n%s", cmd.ProcessState, stderr.String())
	}
	r := readMCPResult(t, out)
	if r.Status != agent.StatusCallBudget || r.Finish == nil || r.Finish.Summary != "stdio test" || r.Runtime != "mcp" {
		t.Errorf("result.json: status %s finish %+v runtime %s", r.Status, r.Finish, r.Runtime)
	}
	if !strings.Contains(stderr.String(), `"status":"call_budget"`) {
		t.Errorf("no summary line on stderr:\n%s", stderr.String())
	}
}

// TestCmdMCPHTTP serves a cells episode over streamable HTTP; the command exits after finish.
func TestCmdMCPHTTP(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	out := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	var stdout bytes.Buffer
	var code int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		code = cmdMCP(ctx, []string{"--task", "stack_blocks", "--http", "127.0.0.1:0", "--out", out, "--budget-s", "120", "--images", "on-demand"}, &stdout, pw)
		pw.Close()
	}()
	urlRE := regexp.MustCompile(`serving (http://\S+/mcp)`)
	sc := bufio.NewScanner(pr)
	var url string
	var log strings.Builder
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		wg.Wait()
		t.Fatalf("no URL announced (exit %d):\n%s", code, log.String())
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "pyrualean-test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "python", Arguments: map[string]any{"code": "robo.show('agentview')\nprint('shown')"}})
	if err != nil {
		t.Fatal(err)
	}
	if text, images := callText(res); res.IsError || !strings.Contains(text, "shown") || images != 1 {
		t.Errorf("python: isError=%v images=%d text=%.300q", res.IsError, images, text)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "finish", Arguments: map[string]any{"status": "failure", "summary": "http test"}})
	if err != nil || res.IsError {
		t.Fatalf("finish: %v %+v", err, res)
	}
	cs.Close()
	wg.Wait()
	if code != 0 || !strings.Contains(stdout.String(), `"status":"completed"`) {
		t.Errorf("exit %d, stdout %s", code, stdout.String())
	}
	if r := readMCPResult(t, out); r.Status != agent.StatusCompleted || r.Finish == nil || r.Finish.Summary != "http test" {
		t.Errorf("result.json: %+v", r)
	}
}

// TestCmdMCPUnderCLIs: the real agent CLIs start `pyrualean mcp` themselves as a stdio MCP server
// (the way a person would configure it) and drive an episode through it; only the model is scripted.
func TestCmdMCPUnderCLIs(t *testing.T) {
	bin := buildPyrualean(t)
	steps := []scripted.Step{
		{Tool: "python", Args: map[string]any{"code": "print('gripper', robo.state().gripper_opening)"}},
		{Tool: "finish", Args: map[string]any{"status": "failure", "summary": "stdio under a CLI"}},
		{Text: "done"},
	}
	for _, name := range []string{"codex", "claude"} {
		t.Run(name, func(t *testing.T) {
			cliBin, err := agentcli.FindBin(name)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			out := filepath.Join(dir, "run")
			serverArgs := []string{"mcp", "--task", "stack_blocks", "--max-turns", "3", "--out", out}
			root, err := agent.FindRoot()
			if err != nil {
				t.Fatal(err)
			}
			serverEnv := map[string]string{"PYRUALEAN_ROOT": root}
			var model *scripted.Server
			var cmd *exec.Cmd
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if name == "codex" {
				model = scripted.NewResponses(steps)
				q := func(v any) string { b, _ := json.Marshal(v); return string(b) }
				cmd = exec.CommandContext(ctx, cliBin, "exec", "--json", "--skip-git-repo-check", "-s", "read-only", "-C", dir, "-m", "scripted",
					"-c", `model_provider="scripted"`, "-c", `model_providers.scripted.name="scripted"`,
					"-c", "model_providers.scripted.base_url="+q(model.URL+"/v1"), "-c", `model_providers.scripted.wire_api="responses"`,
					"-c", `model_providers.scripted.env_key="SCRIPTED_KEY"`,
					"-c", "mcp_servers.pyrualean.command="+q(bin), "-c", "mcp_servers.pyrualean.args="+q(serverArgs),
					"-c", "mcp_servers.pyrualean.env={PYRUALEAN_ROOT="+q(root)+"}",
					// required: Codex waits for the server (the episode boots first) before the first turn.
					"-c", "mcp_servers.pyrualean.required=true", "-c", "mcp_servers.pyrualean.startup_timeout_sec=60",
					"--disable", "shell_tool", "--disable", "unified_exec", "stack the blocks")
				if err := os.Mkdir(filepath.Join(dir, "codex_home"), 0o755); err != nil {
					t.Fatal(err)
				}
				cmd.Env = append(os.Environ(), "CODEX_HOME="+filepath.Join(dir, "codex_home"), "SCRIPTED_KEY=sk-test")
			} else {
				model = scripted.NewMessages(steps)
				cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"pyrualean": map[string]any{
					"type": "stdio", "command": bin, "args": serverArgs, "env": serverEnv}}})
				cmd = exec.CommandContext(ctx, cliBin, "-p", "stack the blocks", "--output-format", "stream-json", "--verbose",
					"--mcp-config", string(cfg), "--strict-mcp-config", "--tools", "",
					"--allowedTools", "mcp__pyrualean__python,mcp__pyrualean__finish", "--model", "scripted",
					"--setting-sources", "", "--no-session-persistence")
				cmd.Env = append(os.Environ(), "CLAUDE_CONFIG_DIR="+filepath.Join(dir, "claude_home"), "ANTHROPIC_BASE_URL="+model.URL,
					"ANTHROPIC_API_KEY=sk-test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "MCP_TIMEOUT=60000")
			}
			defer model.Close()
			cmd.Dir = dir
			got, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, got)
			}
			results := model.ScriptedRequests()
			if len(results) != 3 {
				t.Fatalf("%d scripted requests, want 3:\n%s", len(results), got)
			}
			first := results[2].Results
			if len(first) != 2 || !strings.Contains(first[0].Text, "gripper 0.0") || first[0].IsError {
				t.Errorf("tool results %+v", first)
			}
			// The CLI closed our stdin when it ended; the server then finishes the episode.
			var r agent.Result
			for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) { // generous: a loaded machine
				if r = readMCPResult(t, out); r.Status != agent.StatusRunning {
					break
				}
			}
			if r.Status != agent.StatusCompleted || r.Finish == nil || r.Finish.Summary != "stdio under a CLI" {
				t.Errorf("result.json: status %s finish %+v", r.Status, r.Finish)
			}
		})
	}
}

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
		{"seed", []string{"--seed", "-1"}, "--seed -1"},
		{"budget", []string{"--budget-s", "-5"}, "--budget-s -5"},
		{"argument", []string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cmdMCP(context.Background(), tc.args, &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout.String(), stderr.String(), tc.want)
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

// TestCmdMCPStdio runs the built binary as a stdio MCP server for a tools-arm episode and drives it with
// the go-sdk's own client.
func TestCmdMCPStdio(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pyrualean")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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

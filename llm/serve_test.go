package llm

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	r, err := findRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// greedy decoding keeps the tiny test model's reply reproducible (go-openai omits a temperature of 0,
// so the smallest positive value stands for it; llama.cpp treats it as greedy).
var (
	greedy   float32 = math.SmallestNonzeroFloat32
	testSeed         = 7
)

var robotTools = []openai.Tool{
	{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: "python", Description: "Run Python code in the robot's kernel; returns stdout and errors.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"Python source"}},"required":["code"]}`),
	}},
	{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: "finish", Description: "End the episode.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`),
	}},
}

// TestServeToolCall is the end-to-end check: the smallest vetted model is installed (pip, cached under
// models/), llama.cpp's server starts, the production go-openai client gets a tool call back, a second
// Serve reuses the running server, and Stop ends the process.
func TestServeToolCall(t *testing.T) {
	nbtest.Heavy(t, "the llama.cpp model")
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	port := freePort(t)
	opts := Options{Model: TestModel, Root: root, Port: port, Threads: 1, CtxSize: 2048, Install: true}
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if s.Reused || s.PID == 0 || s.Model != TestModel {
		t.Fatalf("server %+v: want a fresh one", s)
	}

	cfg := openai.DefaultConfig("")
	cfg.BaseURL = s.BaseURL
	client := openai.NewClientWithConfig(cfg)
	msgs := []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: "You control a robot arm by writing Python. Call a tool."},
		{Role: openai.ChatMessageRoleUser, Content: "Print the robot's end-effector position."},
	}
	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model: s.Model, Messages: msgs, Tools: robotTools, ToolChoice: "required", MaxTokens: 256, Temperature: greedy, Seed: &testSeed,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || len(resp.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("want one tool call, got %+v", resp.Choices)
	}
	ch := resp.Choices[0]
	tc := ch.Message.ToolCalls[0]
	var args map[string]any
	if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
		t.Fatalf("arguments %q: %v", tc.Function.Arguments, err)
	}
	want := map[string]string{"python": "code", "finish": "summary"}[tc.Function.Name]
	if _, ok := args[want]; want == "" || !ok || ch.FinishReason != openai.FinishReasonToolCalls || tc.ID == "" {
		t.Fatalf("tool call %+v finish %q: want python(code) or finish(summary)", tc, ch.FinishReason)
	}
	if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
		t.Fatalf("usage not reported: %+v", resp.Usage)
	}

	// The tool result goes back as a tool message; the next turn must still work (history rendering).
	msgs = append(msgs, ch.Message, openai.ChatCompletionMessage{
		Role: openai.ChatMessageRoleTool, ToolCallID: tc.ID, Content: `{"stdout": "[0.4, 0.0, 0.3]\n"}`,
	})
	resp, err = client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model: s.Model, Messages: msgs, Tools: robotTools,
		ToolChoice: openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: "finish"}},
		MaxTokens:  96, Temperature: greedy, Seed: &testSeed,
	})
	if err != nil {
		t.Fatal(err)
	}
	if tcs := resp.Choices[0].Message.ToolCalls; len(tcs) != 1 || tcs[0].Function.Name != "finish" {
		t.Fatalf("named tool_choice: want a finish call, got %+v", resp.Choices[0].Message)
	}

	// Serve again on the same port: the running server is reused and its stop is a no-op.
	url2, stop2, err := Serve(ctx, opts)
	if err != nil || url2 != s.BaseURL {
		t.Fatalf("reuse: %q, %v; want %q", url2, err, s.BaseURL)
	}
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if _, err := probe(ctx, "127.0.0.1", port); err != nil {
		t.Fatalf("reused server's stop stopped it: %v", err)
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(time.Second):
		t.Fatal("process still running after Stop")
	}
	if _, err := probe(ctx, "127.0.0.1", port); !errors.Is(err, errNoServer) {
		t.Fatalf("port still answers after Stop: %v", err)
	}
}

func TestServeErrors(t *testing.T) {
	root := repoRoot(t)
	ctx := context.Background()

	// A port held by something that is not a llama.cpp server: a clear error, nothing started.
	busy := httptest.NewServer(http.NotFoundHandler())
	defer busy.Close()
	_, portStr, _ := net.SplitHostPort(busy.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		o    Options
		err  error
	}{
		{"unknown model", Options{Model: "nope", Root: root}, ErrUnknownModel},
		{"base model", Options{Model: "gemma3-270m", Root: root}, ErrNotChatModel},
		{"not installed", Options{Model: TestModel, Root: root, Dir: empty}, ErrNotInstalled},
		{"port busy", Options{Model: TestModel, Root: root, Port: port}, ErrPortBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Serve(ctx, tc.o)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
		})
	}
}

// TestServerDiesWithContext: cancelling the context Serve got ends the server process.
func TestServerDiesWithContext(t *testing.T) {
	nbtest.Heavy(t, "the llama.cpp model")
	root := repoRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, Options{Model: TestModel, Root: root, Port: freePort(t), Threads: 1, CtxSize: 1024, Install: true})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel()
	select {
	case <-s.Done():
	case <-time.After(15 * time.Second):
		s.Stop()
		t.Fatal("server still running 15 s after its context was cancelled")
	}
}

// TestServerPy runs the launcher's own unit tests (tool-call shaping) with the venv's pytest.
func TestServerPy(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command(filepath.Join(root, ".venv", "bin", "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
		filepath.Join(root, "llm", "test_server.py"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pytest llm/test_server.py: %v\n%s", err, out)
	}
}

package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ExchangesFile is the run-folder log of the agent's tool calls and exactly what each gave back (the
// ToolResult: text, images as files under ExchangeImagesDir), one JSON line per call, in order. A
// runtime's conversation history lives only in its memory; this file is what lets a trainer rebuild
// the conversation afterwards (pyrualean rollouts export), whoever drove the episode (a runtime, an
// MCP client, an OpenEnv client).
const (
	ExchangesFile     = "exchanges.jsonl"
	ExchangeImagesDir = "exchange_images"
	// ToolsFile holds the episode's tools as the model is offered them (OpenAI function tools).
	ToolsFile = "tools.json"
)

// Exchange is one line of exchanges.jsonl: one tool call and its result.
type Exchange struct {
	N int `json:"n"` // the call's place in the episode, 1-based (refused calls and finish included)
	// LLMTurn is the number of LLM calls recorded (turns.jsonl) when the call came: the turn whose
	// reply made it. 0: no LLM call was recorded (replay, an outside client such as OpenEnv's).
	LLMTurn     int             `json:"llm_turn"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	Text        string          `json:"text"`
	Images      []ExchangeImage `json:"images,omitempty"`
	IsError     bool            `json:"is_error,omitempty"`
	Finished    bool            `json:"finished,omitempty"`
	EpisodeDone bool            `json:"episode_done,omitempty"`
	// Error is the infrastructure failure that ended the call (kernel died, budget, cancelled): the
	// model got no result.
	Error string `json:"error,omitempty"`
}

// ExchangeImage is an image a result carried: its name as the model got it, and its file
// (relative to the run folder).
type ExchangeImage struct {
	Name string `json:"name"`
	File string `json:"file"`
}

// ReadExchanges reads a run folder's exchanges.jsonl; a line that is not an Exchange is an error
// naming it.
func ReadExchanges(path string) ([]Exchange, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Exchange
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for n := 1; sc.Scan(); n++ {
		var x Exchange
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return out, fmt.Errorf("%s: line %d: %w", path, n, err)
		}
		out = append(out, x)
	}
	return out, sc.Err()
}

// recordingToolkit is the episode's Toolkit as every driver sees it: the arm's toolkit, with each
// call and its result appended to exchanges.jsonl, and a tool_turns.json row for each call that ran no
// cell (finish, a refusal, an unknown tool, a spent budget: the original counts every call; a cell's
// row is written with what the judge said of it, calls.go).
type recordingToolkit struct {
	inner Toolkit
	e     *Episode
	mu    sync.Mutex
	n     int
}

// newRecordingToolkit wraps the arm's toolkit and writes tools.json.
func newRecordingToolkit(inner Toolkit, e *Episode) (*recordingToolkit, error) {
	b, err := json.MarshalIndent(OpenAITools(inner.Tools()), "", " ")
	if err == nil {
		err = e.files.writeFile(ToolsFile, append(b, '\n'))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ToolsFile, err)
	}
	return &recordingToolkit{inner: inner, e: e}, nil
}

// OpenAITools is specs in OpenAI's function-tool form ({"type": "function", "function": {...}}), as
// chat-completions endpoints, chat templates and tools.json take them.
func OpenAITools(specs []ToolSpec) []map[string]any {
	out := make([]map[string]any, 0, len(specs))
	for _, s := range specs {
		out = append(out, map[string]any{"type": "function", "function": map[string]any{
			"name": s.Name, "description": s.Description, "parameters": s.Parameters}})
	}
	return out
}

func (t *recordingToolkit) Tools() []ToolSpec { return t.inner.Tools() }

func (t *recordingToolkit) Call(ctx context.Context, name string, args json.RawMessage) (ToolResult, error) {
	llmTurn := t.e.book.llmTurns()
	start := time.Now()
	res, err := t.inner.Call(ctx, name, args)
	if err == nil && !res.recorded {
		status := "ok"
		if res.IsError {
			status = "error"
		}
		_ = t.e.book.toolTurn(toolTurn(StripToolPrefix(name), status, time.Since(start), nil))
	}
	t.record(llmTurn, StripToolPrefix(name), args, res, err)
	return res, err
}

func (t *recordingToolkit) record(llmTurn int, name string, args json.RawMessage, res ToolResult, callErr error) {
	t.mu.Lock()
	t.n++
	n := t.n
	t.mu.Unlock()
	if !json.Valid(args) { // malformed arguments are kept as the text they were
		b, _ := json.Marshal(string(args))
		args = b
	}
	x := Exchange{N: n, LLMTurn: llmTurn, Tool: name, Arguments: args, Text: res.Text, IsError: res.IsError,
		Finished: res.Finished, EpisodeDone: res.EpisodeDone}
	if callErr != nil {
		x.Error = callErr.Error()
	}
	for i, im := range res.Images {
		file := filepath.Join(ExchangeImagesDir, fmt.Sprintf("%03d_%d_%s", n, i, safeFileName(im.Name)))
		err := t.e.files.root.MkdirAll(ExchangeImagesDir, 0o755)
		if err == nil {
			err = t.e.files.writeFile(file, im.PNG)
		}
		if err != nil {
			t.e.log.Warn(ExchangesFile+": image not kept", "image", im.Name, "err", err)
			file = ""
		}
		x.Images = append(x.Images, ExchangeImage{Name: im.Name, File: filepath.ToSlash(file)})
	}
	if err := t.e.files.exchanges.Write(x); err != nil {
		t.e.log.Warn(ExchangesFile, "err", err)
	}
}

// safeFileName keeps an image name a single, plain file name.
func safeFileName(name string) string {
	name = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, filepath.Base(name))
	if name == "" || name == "." || name == ".." {
		name = "image"
	}
	if !strings.HasSuffix(name, ".png") {
		name += ".png"
	}
	return name
}

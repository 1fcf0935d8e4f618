package runtimes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pyrualean/pyrualean/agent"
)

// generateNote turns the program arm's prompt into a single-shot request (the original's `pyrualean generate`).
const generateNote = "\n# How to answer\n\nThis is a single-shot request: you cannot call tools or see any result. Reply with the " +
	"complete program, defining `run(robo)`, in one fenced ```python block; it will be run exactly once, as " +
	"`run_program` would run it.\n"

// ErrNoProgram is returned when the model's reply holds no python code block.
var ErrNoProgram = errors.New("the reply holds no fenced python code block")

// GenerateProgram asks the model behind cfg once for a program: Generate with the openai Chat.
func GenerateProgram(ctx context.Context, ep *agent.Episode, cfg OpenAIConfig) (string, error) {
	return Generate(ctx, ep, NewOpenAIChat(cfg), cfg.loop())
}

// Generate asks chat once for a program (the episode's prompt plus generateNote), records the LLM
// call like any turn, and returns the largest fenced python block of the reply, also written to
// <run folder>/policy.py.
func Generate(ctx context.Context, ep agent.Driver, chat Chat, cfg LoopConfig) (string, error) {
	p := ep.Prompt()
	p.Text += generateNote
	if cfg.TextOnly {
		p.Images = nil
	}
	ep.Record().PlannerAttempts(1)
	start := time.Now()
	reply, err := chat.Reply(ctx, ChatRequest{Messages: []Message{firstUserMessage(p, false)}})
	rec := turnRecord(1, start, reply, err, cfg.price())
	if err != nil {
		rec.Usage.Calls = 1
		_ = ep.Record().Turn(rec)
		return "", fmt.Errorf("%w: %w", agent.ErrPlanner, err)
	}
	if err := ep.Record().Turn(rec); err != nil {
		return "", err
	}
	code := agent.LargestPythonBlock(reply.Text)
	if code == "" {
		return "", ErrNoProgram
	}
	if err := os.WriteFile(filepath.Join(ep.Dir(), "policy.py"), []byte(code), 0o644); err != nil {
		return "", err
	}
	return code, nil
}

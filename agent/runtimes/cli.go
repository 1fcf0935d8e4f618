package runtimes

import (
	"context"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/cli"
)

// cliRuntime drives episodes with an agent CLI (package agent/cli) served the episode's tools over MCP.
type cliRuntime struct {
	nothingToStart
	name string // codex | claude
	cfg  cli.Config
}

// Model is the model asked for, else the CLI's name (it picks its own default).
func (r *cliRuntime) Model() string {
	if r.cfg.Model == "" {
		return r.name
	}
	return r.cfg.Model
}

func (r *cliRuntime) Run(ctx context.Context, ep agent.Driver) error {
	if r.name == "claude" {
		return cli.RunClaude(ctx, ep, r.cfg)
	}
	return cli.RunCodex(ctx, ep, r.cfg)
}

func cliConfig(s Settings, model string) cli.Config {
	return cli.Config{Model: model, ReasoningEffort: s.Reasoning, BaseURL: s.BaseURL, APIKeyEnv: s.APIKeyEnv,
		Budget: s.Budget, MaxTurns: s.MaxTurns, Home: s.CodexHome, Logger: s.Logger}
}

func checkClaude(Settings) error { return nil }

// newCodex: Codex gets $PYRUALEAN_MODEL or the original's model when none is named.
func newCodex(s Settings) (Runtime, error) {
	return &cliRuntime{name: "codex", cfg: cliConfig(s, defaultModel(s))}, nil
}

// newClaude: Claude Code picks its own default model when none is named.
func newClaude(s Settings) (Runtime, error) {
	return &cliRuntime{name: "claude", cfg: cliConfig(s, s.Model)}, nil
}

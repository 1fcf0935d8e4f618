package runtimes

import (
	"context"
	"fmt"
	"os"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/agentcli"
)

// cliRuntime drives episodes with an agent CLI (package agent/cli) served the episode's tools over MCP.
type cliRuntime struct {
	nothingToStart
	name string // codex | claude
	cfg  agentcli.Config
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
		return agentcli.RunClaude(ctx, ep, r.cfg)
	}
	return agentcli.RunCodex(ctx, ep, r.cfg)
}

func cliConfig(s Settings, model string) agentcli.Config {
	return agentcli.Config{Model: model, ReasoningEffort: s.Reasoning, BaseURL: s.BaseURL, APIKeyEnv: s.APIKeyEnv,
		Budget: s.Budget, MaxTurns: s.MaxTurns, Home: s.CodexHome, Logger: s.Logger}
}

// needKey refuses, before anything boots, a CLI runtime that could not reach its model: no key in its
// variable and no endpoint of the user's own. The error names the fixes.
func needKey(s Settings, runtime, keyEnv string) error {
	if s.APIKeyEnv != "" {
		keyEnv = s.APIKeyEnv
	}
	if os.Getenv(keyEnv) != "" || s.BaseURL != "" || (runtime == "codex" && agentcli.LoggedIn(s.CodexHome)) {
		return nil
	}
	login := ""
	if runtime == "codex" {
		login = ", or sign in with `codex login` and set PYRUALEAN_CODEX_HOME to its home (~/.codex)"
	}
	return fmt.Errorf("--runtime %s needs the model's API key: $%s is empty (set it, or name another variable with --api-key-env, "+
		"or give --base-url of your own endpoint%s; for an embedded model offline, --runtime local)", runtime, keyEnv, login)
}

// newCodex: Codex gets $PYRUALEAN_MODEL or the original's model when none is named.
func newCodex(s Settings) (Runtime, error) {
	if err := needKey(s, "codex", "OPENAI_API_KEY"); err != nil {
		return nil, err
	}
	return &cliRuntime{name: "codex", cfg: cliConfig(s, defaultModel(s))}, nil
}

// newClaude: Claude Code picks its own default model when none is named.
func newClaude(s Settings) (Runtime, error) {
	if err := needKey(s, "claude", "ANTHROPIC_API_KEY"); err != nil {
		return nil, err
	}
	return &cliRuntime{name: "claude", cfg: cliConfig(s, s.Model)}, nil
}

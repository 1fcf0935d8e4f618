package runtimes

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/pyrualean/pyrualean/agent/agentcli"
	"github.com/pyrualean/pyrualean/llm"
	"github.com/pyrualean/pyrualean/spec"
)

// Resolve fills in what a spec's policy leaves to be chosen: the runtime, when none is named
// ($PYRUALEAN_RUNTIME, else openai when an endpoint is given by BaseURL or $OPENAI_BASE_URL, else the
// embedded local runtime for an embedded model or none, else Codex, as the original runs any other
// model), its one name in the table, and Codex's default reasoning effort (the original's). The error
// names the fix.
func Resolve(p *spec.Policy) error {
	implied := p.Runtime == ""
	if implied {
		p.Runtime = chooseRuntime(p)
	}
	entry, err := Lookup(p.Runtime)
	switch {
	case err != nil && implied:
		return fmt.Errorf("$PYRUALEAN_RUNTIME: %w (fix or unset it, or pass --runtime)", err)
	case err != nil:
		return fmt.Errorf("--runtime: %w", err)
	}
	p.Runtime = entry.Name
	if p.Runtime == "codex" && p.Reasoning == "" {
		p.Reasoning = agentcli.CodexReasoningDefault
	}
	return nil
}

func chooseRuntime(p *spec.Policy) string {
	switch {
	case os.Getenv("PYRUALEAN_RUNTIME") != "":
		return os.Getenv("PYRUALEAN_RUNTIME")
	case p.BaseURL != "" || os.Getenv("OPENAI_BASE_URL") != "":
		return "openai"
	}
	model := p.Model
	if model == "" {
		model = os.Getenv("PYRUALEAN_MODEL")
	}
	if _, err := llm.Lookup(model); err == nil || model == "" {
		return "local"
	}
	return "codex"
}

// Wiring is how this process runs a runtime, apart from what the spec says: where to log, the HTTP
// client requests share, where progress lines go.
type Wiring struct {
	Logger     *slog.Logger
	HTTPClient *http.Client // nil: a client of the runtime's own
	Progress   io.Writer    // the local runtime's in-flight progress lines; nil: none
}

// SettingsFor are the settings the runtime of s runs with.
func SettingsFor(s spec.Episode, w Wiring) Settings {
	p := s.Policy
	o := p.OpenAI
	return Settings{
		Model: p.Model, Reasoning: p.Reasoning, BaseURL: p.BaseURL, APIKeyEnv: p.APIKeyEnv, Arm: s.Arm, From: p.From,
		MaxTurns: s.MaxCalls, Budget: s.Budget(), Prices: p.PriceTable(), CodexHome: os.Getenv("PYRUALEAN_CODEX_HOME"),
		OpenAI: OpenAIOptions{MaxTokens: o.MaxTokens, ToolChoice: o.ToolChoice, Temperature: o.Temperature, ExtraBody: o.ExtraBody,
			ImagesInTool: o.ImagesInTool, MaxImages: o.MaxImages, TextOnly: o.TextOnly},
		HTTPClient: w.HTTPClient, Logger: w.Logger, Progress: w.Progress, RecordTokens: p.RecordTokens,
	}
}

// For looks up the runtime of s (resolved: Resolve) and configures it; it starts nothing.
func For(s spec.Episode, w Wiring) (Runtime, error) {
	return New(s.Policy.Runtime, SettingsFor(s, w))
}

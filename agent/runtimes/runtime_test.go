package runtimes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/spec"
)

func TestTable(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "test-key") // the CLI runtimes refuse to start without their key
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	t.Setenv("ANTHROPIC_MODEL", "")
	for _, name := range []string{"openai", "anthropic", "local", "codex", "claude", "replay", "scripted"} {
		if _, err := Lookup(name); err != nil {
			t.Errorf("Lookup(%q): %v", name, err)
		}
	}
	if e, _ := Lookup("scripted"); e.Name != "replay" {
		t.Errorf("scripted is %q, want the replay entry", e.Name)
	}
	if _, err := Lookup("codexx"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "openai, anthropic, local, codex, claude, replay") {
		t.Errorf("unknown runtime: %v", err)
	}
	script := filepath.Join(t.TempDir(), "cells.py")
	os.WriteFile(script, []byte("# %%\nprint(1)\n"), 0o644)
	temp := 3.0
	cases := []struct {
		name  string
		s     Settings
		want  string // "" : accepted, with this model
		model string
	}{
		{"openai", Settings{Model: "m"}, "", "m"},
		{"openai", Settings{BaseURL: "ftp://x"}, "--base-url", ""},
		{"openai", Settings{OpenAI: OpenAIOptions{ToolChoice: "maybe"}}, "--openai-tool-choice", ""},
		{"openai", Settings{OpenAI: OpenAIOptions{Temperature: &temp}}, "--openai-temperature", ""},
		{"openai", Settings{OpenAI: OpenAIOptions{MaxImages: -1}}, "--openai-max-images", ""},
		{"local", Settings{Model: "gpt-4o"}, "pyrualean models", ""},
		{"anthropic", Settings{Model: "claude-x"}, "", "claude-x"},
		{"anthropic", Settings{}, "--model", ""},
		{"anthropic", Settings{Model: "claude-x", BaseURL: "api.anthropic.com"}, "--base-url", ""},
		{"anthropic", Settings{Model: "claude-x", OpenAI: OpenAIOptions{ToolChoice: "maybe"}}, "--openai-tool-choice", ""},
		{"replay", Settings{}, "--from", ""},
		{"replay", Settings{From: script, Arm: spec.ArmCells}, "", "replay"},
		{"replay", Settings{From: script, Arm: spec.ArmTools}, "--arm cells", ""},
		{"claude", Settings{}, "", "claude"},
		{"codex", Settings{Model: "gpt-x"}, "", "gpt-x"},
	}
	for _, c := range cases {
		rt, err := New(c.name, c.s)
		switch {
		case c.want == "" && (err != nil || rt.Model() != c.model):
			t.Errorf("%s %+v: %v, model %v; want model %q", c.name, c.s, err, rt, c.model)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %+v: %v; want an error naming %q", c.name, c.s, err, c.want)
		}
	}
}

func TestDefault(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "test-key") // the CLI runtimes refuse to start without their key
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	t.Setenv("PYRUALEAN_RUNTIME", "")
	t.Setenv("OPENAI_BASE_URL", "")
	if d := Default(""); d != "local" {
		t.Errorf("nothing set: %s", d)
	}
	if d := Default("http://127.0.0.1:1/v1"); d != "openai" {
		t.Errorf("base URL: %s", d)
	}
	t.Setenv("PYRUALEAN_RUNTIME", "codex")
	if d := Default("http://127.0.0.1:1/v1"); d != "codex" {
		t.Errorf("$PYRUALEAN_RUNTIME: %s", d)
	}
}

// TestOpenAIConfigFor: the config handed to RunOpenAI and GenerateProgram carries the loop's
// settings too (prices, images, the LLM-call ceiling), not only the endpoint.
func TestOpenAIConfigFor(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "test-key") // the CLI runtimes refuse to start without their key
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	c, err := OpenAIConfigFor(Settings{Model: "m", BaseURL: "http://h/v1", MaxTurns: 5, RecordTokens: true,
		OpenAI: OpenAIOptions{TextOnly: true, MaxImages: 3, ImagesInTool: true}})
	if err != nil || c.BaseURL != "http://h/v1" || c.Model != "m" || c.MaxLLMCalls != 15 || !c.TextOnly || c.MaxImages != 3 ||
		!c.ImagesInToolMessages || !c.RecordTokens {
		t.Errorf("%+v %v", c, err)
	}
}

// A CLI runtime without its model's key is refused before anything boots, naming the fixes.
func TestCLIRuntimesNeedTheirKey(t *testing.T) {
	for name, env := range map[string]string{"codex": "OPENAI_API_KEY", "claude": "ANTHROPIC_API_KEY"} {
		t.Setenv(env, "")
		_, err := New(name, Settings{})
		if err == nil || !strings.Contains(err.Error(), "$"+env+" is empty") || !strings.Contains(err.Error(), "--base-url") {
			t.Errorf("%s without a key: %v", name, err)
		}
		if _, err := New(name, Settings{BaseURL: "http://127.0.0.1:1/v1"}); err != nil {
			t.Errorf("%s with an endpoint of its own: %v", name, err)
		}
	}
	// Codex as the original runs it: `codex login`'s home, no key.
	t.Setenv("OPENAI_API_KEY", "")
	home := t.TempDir()
	if _, err := New("codex", Settings{CodexHome: home}); err == nil || !strings.Contains(err.Error(), "codex login") {
		t.Errorf("codex with a home that is not signed in: %v", err)
	}
	if err := os.WriteFile(filepath.Join(home, "auth.json"), []byte(`{"tokens": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New("codex", Settings{CodexHome: home}); err != nil {
		t.Errorf("codex signed in with codex login: %v", err)
	}
}

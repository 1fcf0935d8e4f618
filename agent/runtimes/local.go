package runtimes

import (
	"context"
	"fmt"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/llm"
)

// localRuntime is an embedded llama.cpp server (package llm) in front of the openai runtime. Episodes
// run at the same time share the one server (and its prompt cache).
type localRuntime struct {
	opts   llm.Options
	srv    *llm.Server
	openai openaiRuntime
}

// Model is the registry name asked for until Start, then the model the server loaded.
func (r *localRuntime) Model() string { return r.openai.cfg.Model }

func (r *localRuntime) Start(ctx context.Context) error {
	srv, err := llm.Start(ctx, r.opts)
	if err != nil {
		return fmt.Errorf("local model: %w", err)
	}
	r.srv = srv
	r.openai.cfg.BaseURL, r.openai.cfg.Model = srv.BaseURL, srv.Model
	return nil
}

func (r *localRuntime) Run(ctx context.Context, ep agent.Driver) error {
	if r.srv == nil {
		return fmt.Errorf("local runtime: Run before Start")
	}
	return r.openai.Run(ctx, ep)
}

func (r *localRuntime) Close() error {
	if r.srv == nil {
		return nil
	}
	return r.srv.Stop()
}

func newLocal(s Settings) (Runtime, error) {
	if _, err := llm.Lookup(s.Model); err != nil {
		return nil, fmt.Errorf("--model: %w (see pyrualean models)", err)
	}
	if s.BaseURL != "" {
		return nil, fmt.Errorf("--base-url %q: the local runtime serves its own model (use --runtime openai for an endpoint)", s.BaseURL)
	}
	s.BaseURL = "http://127.0.0.1" // validated here; Start puts in the server's
	s.OpenAI.TextOnly = true       // the embedded models are text models
	cfg, err := openaiConfig(s, s.Model)
	if err != nil {
		return nil, err
	}
	cfg.APIKey = "local"
	return &localRuntime{opts: llm.Options{Model: s.Model, Logger: s.Logger}, openai: openaiRuntime{cfg: cfg}}, nil
}

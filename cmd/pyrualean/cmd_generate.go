package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runtimes"
)

// cmdGenerate is the single-shot baseline: ask the model once (the program arm's prompt), keep the
// largest fenced python block of its reply as <run folder>/policy.py, then run it as `run` would.
func cmdGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, f, verbose := newProgramFlagSet("generate", stderr)
	model := fs.String("model", "", "model name sent to the endpoint (default $PYRUALEAN_MODEL, else gpt-6-astra)")
	baseURL := fs.String("base-url", "", "OpenAI-compatible base URL (default $OPENAI_BASE_URL, else https://api.openai.com/v1)")
	apiKeyEnv := fs.String("api-key-env", "OPENAI_API_KEY", "environment variable holding the API key")
	maxTokens := fs.Int("openai-max-tokens", 0, "max_tokens of the reply (0: server default)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	cfg, err := programConfig(fs, f, time.Now())
	base := firstNonEmpty(*baseURL, os.Getenv("OPENAI_BASE_URL"), "https://api.openai.com/v1")
	if err == nil && !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		err = fmt.Errorf("--base-url %q: want an http(s) URL", base)
	}
	if err == nil && *maxTokens < 0 {
		err = fmt.Errorf("--openai-max-tokens %d: must be >= 0", *maxTokens)
	}
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean generate: %v\n", err)
		return exitUsage
	}
	name := firstNonEmpty(*model, os.Getenv("PYRUALEAN_MODEL"), "gpt-6-astra")
	logger := cmdLogger(stderr, *verbose)
	cfg.Logger, cfg.Model, cfg.Runtime = logger, name, "openai"
	oc := runtimes.OpenAIConfig{BaseURL: base, APIKey: os.Getenv(*apiKeyEnv), Model: name, MaxTokens: *maxTokens, Logger: logger}
	return runOneProgram(ctx, cfg, "generate", stdout, stderr, func(ctx context.Context, ep *agent.Episode) (string, string, error) {
		code, err := runtimes.GenerateProgram(ctx, ep, oc)
		if err != nil {
			return "", "", err
		}
		st, err := agent.RunProgramOnce(ctx, ep, code)
		return st, filepath.Join(ep.Dir(), "policy.py"), err
	})
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

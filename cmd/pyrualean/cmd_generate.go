package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runtimes"
)

// cmdGenerate is the single-shot baseline: ask the model once (the program arm's prompt), keep the
// largest fenced python block of its reply as <run folder>/policy.py, then run it as `run` would.
func cmdGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, f, verbose := newProgramFlagSet("generate", stderr, "runtime", "from")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	f.spec.Policy.Runtime = "openai" // one request to an OpenAI-compatible endpoint
	cfg, err := programSpec(ctx, fs, f, time.Now())
	var oc runtimes.OpenAIConfig
	logger := cmdLogger(stderr, *verbose)
	if err == nil {
		oc, err = runtimes.OpenAIConfigFor(runtimes.SettingsFor(cfg, runtimes.Wiring{Logger: logger}))
	}
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean generate: %v\n", err)
		return exitUsage
	}
	cfg.Policy.Model = oc.Model
	return runOneProgram(ctx, cfg, agent.Host{Logger: logger}, "generate", stdout, stderr, func(ctx context.Context, ep *agent.Episode) (string, string, error) {
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

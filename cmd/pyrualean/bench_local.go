package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/llm"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// localPhase is one first turn measured by bench local.
type localPhase struct {
	Phase        string               `json:"phase"`
	Seed         int                  `json:"seed"`
	LatencyS     float64              `json:"first_turn_s"`
	InputTokens  int                  `json:"input_tokens"`
	CachedTokens int                  `json:"cached_input_tokens"`
	Timings      *agent.ServerTimings `json:"timings"`
	RatioToCold  float64              `json:"ratio_to_cold"`
	// PromptS is the server's time reading the prompt: the part the cache saves (generation
	// length differs from seed to seed, so the whole turn's ratio mixes in the reply's length).
	PromptS           float64 `json:"prompt_s"`
	PromptRatioToCold float64 `json:"prompt_ratio_to_cold"`
}

// benchLocal measures the embedded model on this machine: its prompt and generation speed and the
// first turn of an episode cold (a fresh server, no saved cache), then with the shared prompt prefix
// cached by the same server (the next episode) and by a new server process (its slot file): the
// anchor is the cold first turn, in the same run.
func benchLocal(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", llm.DefaultModel, "registry model (pyrualean models)")
	task := fs.String("task", "put_block_in_bowl", "tabletop task whose first turn is measured")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	dir, err := os.MkdirTemp("", "pyrualean-bench-local-")
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench local: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := func() (runtimes.Runtime, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0") // a server of its own: never a running one's cache
		if err != nil {
			return nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		rt, err := runtimes.New("local", runtimes.Settings{Model: *model, Logger: logger,
			Local: runtimes.LocalOptions{Port: port, SlotDir: filepath.Join(dir, "slots")}})
		if err != nil {
			return nil, err
		}
		return rt, rt.Start(ctx)
	}
	var phases []localPhase
	run := func(rt runtimes.Runtime, phase string, seed int) error {
		out := filepath.Join(dir, fmt.Sprintf("%s-%d", phase, seed))
		s := spec.New()
		s.Task, s.Seed, s.Out, s.Images, s.MaxCalls, s.BudgetS, s.Sealed = *task, seed, out, spec.ImagesNone, 1, 1200, spec.SealOff
		s.Policy = spec.Policy{Runtime: "local", Model: rt.Model()}
		if err := s.Validate(ctx, &robotapi.Registry{}); err != nil {
			return err
		}
		ep, err := agent.StartEpisode(ctx, s, agent.Host{Logger: logger})
		if err != nil {
			return err
		}
		pctx, cancel := ep.Context(ctx)
		runErr := rt.Run(pctx, ep)
		cancel()
		if _, err := ep.Finish(context.WithoutCancel(ctx), "", runErr); err != nil {
			return err
		}
		t, err := firstTurn(filepath.Join(out, "turns.jsonl"))
		if err != nil {
			return fmt.Errorf("%s: %w (run: %v)", phase, err, runErr)
		}
		p := localPhase{Phase: phase, Seed: seed, LatencyS: t.LatencyS, InputTokens: t.Usage.InputTokens,
			CachedTokens: t.Usage.CachedTokens, Timings: t.Timings}
		if t.Timings != nil {
			p.PromptS = agent.Round(t.Timings.PromptMS/1000, 2)
		}
		cold := p // the anchor is the first phase, itself included
		if len(phases) > 0 {
			cold = phases[0]
		}
		if cold.LatencyS > 0 {
			p.RatioToCold = agent.Round(p.LatencyS/cold.LatencyS, 2)
		}
		if cold.PromptS > 0 {
			p.PromptRatioToCold = agent.Round(p.PromptS/cold.PromptS, 2)
		}
		phases = append(phases, p)
		fmt.Fprintf(stderr, "bench local: %s first turn %.1f s (%d of %d prompt tokens cached)\n", phase, p.LatencyS, p.CachedTokens, p.InputTokens)
		return nil
	}
	err = func() error {
		rt, err := start()
		if err != nil {
			return err
		}
		defer rt.Close()
		if err := run(rt, "cold", 0); err != nil {
			return err
		}
		if err := run(rt, "same-server", 1); err != nil {
			return err
		}
		rt.Close()
		rt2, err := start()
		if err != nil {
			return err
		}
		defer rt2.Close()
		return run(rt2, "new-process", 2)
	}()
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench local: %v\n", err)
		return 1
	}
	if *asJSON {
		return printJSON(stdout, map[string]any{"model": *model, "task": *task, "phases": phases})
	}
	fmt.Fprintf(stdout, "bench local: %s, first turn of %s (compact prompt, tabletop), this machine\n", *model, *task)
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "phase\tfirst turn s\tvs cold\tprompt s\tvs cold\tprompt tok\tcached\tprompt tok/s\tgenerated\tgen tok/s\t")
	for _, p := range phases {
		pps, gps, gen := 0.0, 0.0, 0
		if p.Timings != nil {
			pps, gps, gen = p.Timings.PromptPerSecond, p.Timings.PredictedPerSecond, p.Timings.PredictedN
		}
		fmt.Fprintf(w, "%s\t%.1f\t%.2f\t%.1f\t%.2f\t%d\t%d\t%.1f\t%d\t%.1f\t\n", p.Phase, p.LatencyS, p.RatioToCold,
			p.PromptS, p.PromptRatioToCold, p.InputTokens, p.CachedTokens, pps, gen, gps)
	}
	w.Flush()
	return 0
}

func firstTurn(path string) (agent.Turn, error) {
	turns, err := agent.ReadTurns(path)
	if err != nil {
		return agent.Turn{}, err
	}
	if len(turns) == 0 {
		return agent.Turn{}, errors.New("no turn recorded")
	}
	t := turns[0]
	if t.Error != "" {
		return t, errors.New(t.Error)
	}
	return t, nil
}

package replay_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/replay"
)

type step struct {
	markdown string
	code     string
	author   string
}

// genericSteps exercise every output kind with seeded randomness, so a replay must reproduce them.
var genericSteps = []step{
	{code: "import numpy as np\nfrom PIL import Image\nfrom IPython.display import display, JSON\nrng = np.random.default_rng(7)\nprint('ready')", author: notebooks.AuthorSetup},
	{markdown: "## Task\nReproduce me.", author: notebooks.AuthorSetup},
	{markdown: "Let me sample something.", author: notebooks.AuthorAgent},
	{code: "v = rng.normal(size=3)\nprint('sample', v)\nobject()", author: notebooks.AuthorAgent},
	{code: "img = Image.fromarray((rng.random((32, 48, 3)) * 255).astype('uint8'))\ndisplay(img)", author: notebooks.AuthorAgent},
	{code: "JSON({'pos': [float(x) for x in v], 'ok': True})", author: notebooks.AuthorHuman},
	{code: "import sys\nprint('warn', file=sys.stderr)\n{'total': float(v.sum())}", author: notebooks.AuthorAgent},
	{code: "raise ValueError(f'bad value {v[0]:.3f}')", author: notebooks.AuthorAgent},
}

// record runs steps in a real kernel and records them through notebooks.Trace, as an episode does.
func record(t *testing.T, path string, steps []step, episode map[string]any) {
	t.Helper()
	nbtest.Heavy(t, "a real IPython kernel")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	spec, err := kernel.FindSpec("pyrualean")
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Launch(ctx, spec, kernel.LaunchOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(context.Background())
	tr, err := notebooks.NewTrace(path, notebooks.TraceMeta{Episode: episode})
	if err != nil {
		t.Fatal(err)
	}
	for turn, s := range steps {
		meta := map[string]any{"author": s.author, "turn": turn}
		if s.markdown != "" {
			if err := tr.AddMarkdown(s.markdown, meta); err != nil {
				t.Fatal(err)
			}
			continue
		}
		res, err := k.Client().Execute(ctx, s.code, kernel.ExecuteOptions{Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.AddCode(s.code, notebooks.CodeRun{Outputs: res.Outputs, ExecutionCount: res.ExecutionCount, Timing: res.Timing}, meta); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReplayReproducesAndFindsEdits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.ipynb")
	record(t, path, genericSteps, map[string]any{"robot": "none", "seed": 7})

	// Two edits: a recorded printed number (cell 3) and the source of cell 6.
	edited := filepath.Join(dir, "edited.ipynb")
	nb, err := notebooks.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := nb.Cells[3].Outputs[0].Text
	loc := regexp.MustCompile(`-?\d+\.\d+`).FindStringIndex(text)
	nb.Cells[3].Outputs[0].Text = text[:loc[0]] + "9.5" + text[loc[1]:]
	nb.Cells[6].Source = strings.Replace(nb.Cells[6].Source, "v.sum()", "v.sum() + 1", 1)
	if err := notebooks.WriteFileAtomic(edited, nb); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := filepath.Join(dir, "replayed.ipynb")
	rep, err := replay.Run(ctx, path, replay.Options{Until: -1, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	rep.WriteText(&report)
	t.Logf("replay of the recorded trace:\n%s", report.String())
	if !rep.Reproduced() || len(rep.Cells) != 6 {
		t.Fatalf("recorded trace did not reproduce:\n%s", report.String())
	}
	if rep.OutcomeCompared || rep.OutcomeNote == "" {
		t.Errorf("no success recorded, yet outcome compared: %+v", rep)
	}
	nbtest.Validate(t, path, out)
	replayed, err := notebooks.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := replayed.Metadata["pyrualean"].(map[string]any)["replay"].(map[string]any)["reproduced"]; got != true {
		t.Errorf("replayed notebook metadata reproduced = %v", got)
	}

	rep, err = replay.Run(ctx, edited, replay.Options{Until: -1})
	if err != nil {
		t.Fatal(err)
	}
	report.Reset()
	rep.WriteText(&report)
	t.Logf("replay of the edited trace:\n%s", report.String())
	if rep.Reproduced() || rep.FirstDivergent == nil || rep.FirstDivergent.Index != 3 {
		t.Fatalf("edited trace: want first divergence at cell 3:\n%s", report.String())
	}
	status := map[int]bool{}
	for _, c := range rep.Cells {
		status[c.Index] = c.Match
	}
	want := map[int]bool{0: true, 3: false, 4: true, 5: true, 6: false, 7: true}
	for i, m := range want {
		if status[i] != m {
			t.Errorf("cell %d match = %v, want %v\n%s", i, status[i], m, report.String())
		}
	}
	if !strings.Contains(report.String(), "DIVERGED") || !strings.Contains(rep.FirstDivergent.Reason, "number") {
		t.Errorf("report should name the number that differs:\n%s", report.String())
	}
}

func TestReplayBadTrace(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"garbage.ipynb": "{not json",
		"nocode.ipynb":  `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"id": "a", "cell_type": "markdown", "metadata": {}, "source": "hi"}]}`,
		"missing.ipynb": "",
	} {
		p := filepath.Join(dir, name)
		if body != "" {
			os.WriteFile(p, []byte(body), 0o644)
		}
		_, err := replay.Run(context.Background(), p, replay.Options{Until: -1})
		if err == nil || !strings.Contains(err.Error(), "bad trace") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

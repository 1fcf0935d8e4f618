package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/replay"
)

// solutionSteps splits a reference solution (# %% cells, # %% [markdown] for prose) into steps.
func solutionSteps(t *testing.T, path string) []step {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	var cur *step
	flush := func() {
		if cur != nil {
			cur.code = strings.TrimSpace(cur.code)
			cur.markdown = strings.TrimSpace(cur.markdown)
			if cur.code != "" || cur.markdown != "" {
				steps = append(steps, *cur)
			}
		}
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "# %%") {
			flush()
			cur = &step{author: notebooks.AuthorAgent}
			if strings.Contains(line, "[markdown]") {
				cur.markdown = " " // marks a markdown step
			}
			continue
		}
		if cur == nil {
			continue
		}
		if cur.markdown != "" {
			cur.markdown += strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ") + "\n"
		} else {
			cur.code += line + "\n"
		}
	}
	flush()
	return steps
}

// recordEpisode runs a tabletop episode the way the agent's cells arm does (setup cell, task card,
// sandboxed agent cells with the cell report as a user expression) and records it in a Trace.
func recordEpisode(t *testing.T, path, task string, seed int, steps []step) {
	t.Helper()
	nbtest.Heavy(t, "an episode: a kernel and the simulator")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	spec, err := kernel.FindSpec("pyrualean")
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	k, err := kernel.Launch(ctx, spec, kernel.LaunchOptions{Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(context.Background())
	c := k.Client()
	tr, err := notebooks.NewTrace(path, notebooks.TraceMeta{KernelDisplayName: spec.DisplayName, Episode: map[string]any{
		"robot": "tabletop", "task": task, "seed": seed, "arm": "cells", "model": "reference-solution",
		"runtime": "test", "status": "running"}})
	if err != nil {
		t.Fatal(err)
	}
	setup := fmt.Sprintf("from pyrualean_robot import make\nrobo = make(\"tabletop\", task=%q, seed=%d, workspace=%q, images=\"on-motion\")", task, seed, ws)
	run := func(code string, meta map[string]any, sandbox bool) map[string]any {
		em := map[string]any{}
		for k, v := range meta {
			em[k] = v
		}
		em["sandbox"] = sandbox
		res, err := c.Execute(ctx, code, kernel.ExecuteOptions{
			Metadata:        map[string]any{notebooks.MetaKey: em},
			UserExpressions: map[string]string{"pyrualean": replay.OutcomeExpression},
			Timeout:         2 * time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		if meta["author"] == notebooks.AuthorSetup && res.Status != "ok" {
			t.Fatalf("setup cell failed: %+v", res.Error)
		}
		if err := tr.AddCode(code, notebooks.CodeRun{Outputs: res.Outputs, ExecutionCount: res.ExecutionCount, Timing: res.Timing}, meta); err != nil {
			t.Fatal(err)
		}
		var ue struct {
			Status string
			Data   map[string]json.RawMessage
		}
		json.Unmarshal(res.UserExpressions["pyrualean"], &ue)
		var report map[string]any
		json.Unmarshal(ue.Data["application/json"], &report)
		return report
	}
	run(setup, map[string]any{"author": notebooks.AuthorSetup}, false)
	if err := tr.AddMarkdown("# Task\n"+task, map[string]any{"author": notebooks.AuthorSetup, "kind": "task_card"}); err != nil {
		t.Fatal(err)
	}
	var last map[string]any
	for turn, s := range steps {
		meta := map[string]any{"author": s.author, "turn": turn}
		if s.markdown != "" {
			tr.AddMarkdown(s.markdown, meta)
			continue
		}
		last = run(s.code, meta, true)
	}
	success, _ := last["success"].(bool)
	status := "failure"
	if success {
		status = "success"
	}
	if err := tr.SetEpisodeMeta(map[string]any{"status": status, "success": success}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReplayTabletopSolutions: traces of tabletop reference solutions replay to the same outputs and
// the same success, and a trace with an edited cell is reported divergent at that cell.
func TestReplayTabletopSolutions(t *testing.T) {
	nbtest.Heavy(t, "episodes replayed in real kernels") // before the subtests: the checks after them need their traces
	root := nbtest.Root(t)
	tasks := []string{"put_block_on_plate", "stack_blocks", "bowl_then_plate"}
	dir := t.TempDir()
	var traces []string
	for _, task := range tasks {
		t.Run(task, func(t *testing.T) {
			steps := solutionSteps(t, filepath.Join(root, "robotapi", "solutions", "tabletop", task+".py"))
			path := filepath.Join(dir, task+".ipynb")
			recordEpisode(t, path, task, 0, steps)
			traces = append(traces, path)
			nb, err := notebooks.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if nb.Metadata["pyrualean"].(map[string]any)["success"] != true {
				t.Fatalf("the reference solution did not succeed when recorded")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			rep, err := replay.Run(ctx, path, replay.Options{Until: -1})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			rep.WriteText(&b)
			t.Logf("replay:\n%s", b.String())
			if !rep.Reproduced() || !rep.OutcomeCompared || rep.ReplayedSuccess == nil || !*rep.ReplayedSuccess {
				t.Fatalf("reference solution trace did not reproduce its success:\n%s", b.String())
			}
		})
	}
	nbtest.Validate(t, traces...)
	if len(traces) == 0 {
		t.Fatal("no trace recorded")
	}
	// A person can open the trace (nbconvert renders it) and re-run it with Jupyter's own executor.
	if html := nbtest.RenderHTML(t, traces[0]); !strings.Contains(html, "data:image/png;base64,") {
		t.Error("rendered trace shows no camera image")
	}
	executed := nbtest.Execute(t, traces[0], "pyrualean", false, 3*time.Minute)
	nbtest.Validate(t, executed)
	if nb, err := notebooks.ReadFile(executed); err != nil {
		t.Fatal(err)
	} else if last := nb.Cells[len(nb.Cells)-1]; len(last.Outputs) == 0 || !strings.Contains(fmt.Sprint(last.Outputs[0].Data["text/plain"]), "terminated=True") {
		t.Errorf("nbclient re-execution did not finish the task: %+v", last.Outputs)
	}

	// A deliberately edited trace: the first agent cell now picks the other block.
	nb, err := notebooks.ReadFile(traces[0])
	if err != nil {
		t.Fatal(err)
	}
	edited := -1
	for i, c := range nb.Cells {
		if strings.Contains(c.Source, `robo.pick("green_block")`) {
			nb.Cells[i].Source = strings.Replace(c.Source, "green_block", "blue_block", 1)
			edited = i
			break
		}
	}
	if edited < 0 {
		t.Fatal("put_block_on_plate's solution no longer picks green_block; update the edit")
	}
	path := filepath.Join(dir, "edited.ipynb")
	if err := notebooks.WriteFileAtomic(path, nb); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := replay.Run(ctx, path, replay.Options{Until: -1})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.WriteText(&b)
	t.Logf("replay of the edited trace:\n%s", b.String())
	if rep.Reproduced() || rep.FirstDivergent == nil || rep.FirstDivergent.Index != edited {
		t.Fatalf("edited cell %d: want the first divergence there:\n%s", edited, b.String())
	}
}

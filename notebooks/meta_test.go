package notebooks_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks"
)

func ptr[T any](v T) *T { return &v }

// closeAndRead closes the trace and reads its file back.
func closeAndRead(t *testing.T, tr *notebooks.Trace) *notebooks.Notebook {
	t.Helper()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	nb, err := notebooks.ReadFile(tr.Path())
	if err != nil {
		t.Fatal(err)
	}
	return nb
}

// Every field survives a write to disk and a read back; unknown keys are kept.
func TestCellMetaRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		meta notebooks.CellMeta
		md   bool
	}{
		{"setup", notebooks.CellMeta{Author: notebooks.AuthorSetup}, false},
		{"task card", notebooks.CellMeta{Author: notebooks.AuthorSetup, Kind: "task_card"}, true},
		{"agent cell", notebooks.CellMeta{Author: notebooks.AuthorAgent, Turn: 3, Tool: "python", Sandbox: ptr(true),
			Status: "error", ElapsedS: ptr(1.25), ImagesSent: []string{"agentview.png"}, SandboxFlags: []string{"open /etc"}}, false},
		{"tool cell", notebooks.CellMeta{Author: notebooks.AuthorTool, Turn: 1, Tool: "pick", Sandbox: ptr(true),
			Args: map[string]any{"object": "red_block"}, Extra: map[string]any{"future_key": "kept"}}, false},
		{"finish", notebooks.CellMeta{Author: notebooks.AuthorAgent, Tool: "finish", Finish: &notebooks.FinishMeta{Status: "success", Summary: "stacked"}}, true},
		{"interrupted agent cell", notebooks.CellMeta{Author: notebooks.AuthorAgent, Turn: 2, Tool: "python", MsgID: "m-2",
			Status: "error", InterruptedBy: "person"}, false},
		{"human cell", notebooks.CellMeta{Author: notebooks.AuthorHuman, HumanCell: 1, MsgID: "m-h1",
			Ledger: &notebooks.CellLedger{Calls: 2, StatefulCalls: 1, EnvSteps: 8}}, false},
		{"human cell without calls", notebooks.CellMeta{Author: notebooks.AuthorHuman, HumanCell: 2, Ledger: &notebooks.CellLedger{}}, false},
	}
	path := filepath.Join(t.TempDir(), "t.ipynb")
	tr, err := notebooks.NewTrace(path, notebooks.TraceMeta{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if c.md {
			err = tr.AddMarkdown(c.name, c.meta.Map())
		} else {
			err = tr.AddCode(c.name, notebooks.CodeRun{}, c.meta.Map())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	nb := closeAndRead(t, tr)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := notebooks.CellMetaOf(nb.Cells[i]); !reflect.DeepEqual(got, c.meta) {
				t.Errorf("read back %+v\nwant       %+v", got, c.meta)
			}
		})
	}
}

// A finish cell from before finish was structured metadata reads the same.
func TestCellMetaOldFinish(t *testing.T) {
	c := notebooks.Cell{CellType: notebooks.CellMarkdown, Source: "**finish** — status `failure`\n\ngave up",
		Metadata: map[string]any{"pyrualean": map[string]any{"author": "agent", "tool": "finish", "status": "failure"}}}
	got := notebooks.CellMetaOf(c)
	if got.Finish == nil || *got.Finish != (notebooks.FinishMeta{Status: "failure", Summary: "gave up"}) || got.Status != "" {
		t.Errorf("old finish cell read as %+v", got)
	}
}

func TestEpisodeMetaRoundTrip(t *testing.T) {
	want := notebooks.EpisodeMeta{Robot: "tabletop", Task: "stack_blocks", Arm: "cells", Seed: 2, Model: "m", Runtime: "replay",
		Images: "on-motion", Feedback: "rich", Primitives: "full", MaxTurns: 5, BudgetS: 60, Status: "completed", Success: ptr(true),
		Budgets:  &notebooks.EpisodeBudgets{MaxTurns: ptr(5), MaxEnvSteps: 10000, CellTimeoutS: 300},
		Versions: map[string]any{"python": "3.11"}, TaskLanguage: "stack", PromptSHA256: "abc",
		Totals: &notebooks.EpisodeTotals{ToolTurns: 2, LLMCalls: 3, InputTokens: 100, TotalTokens: 120, PolicyWallS: 1.5},
		Events: []notebooks.EpisodeEvent{{At: "2026-01-02T03:04:05Z", Kind: "pause", By: "person", Turn: 1},
			{At: "2026-01-02T03:04:09Z", Kind: "replan", Turn: 1, Detail: "print(1)"}},
		Extra: map[string]any{"replay": map[string]any{"status": "done"}}}
	path := filepath.Join(t.TempDir(), "t.ipynb")
	tr, err := notebooks.NewTrace(path, notebooks.TraceMeta{Episode: want.Map()})
	if err != nil {
		t.Fatal(err)
	}
	nb := closeAndRead(t, tr)
	got := notebooks.ParseEpisodeMeta(nb.Metadata)
	for _, k := range []string{"pyrualean", "go", "nbformat"} { // the writer adds the build's versions
		want.Versions[k] = got.Versions[k]
	}
	// Numbers read from a file are json.Number inside free-form trees (Extra, Versions).
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v\nwant       %+v", got, want)
	}
	if notebooks.ParseEpisodeMeta(map[string]any{"pyrualean": map[string]any{"environment_success": false}}).Success == nil {
		t.Error("environment_success alone is not read as the verdict")
	}
}

// A person's cell is written when it ends and its robot ledger is patched in later; tags are written
// as nbformat's metadata.tags.
func TestPatchCellMetaAndTags(t *testing.T) {
	tr, err := notebooks.NewTrace(filepath.Join(t.TempDir(), "t.ipynb"), notebooks.TraceMeta{})
	if err != nil {
		t.Fatal(err)
	}
	id := notebooks.NewCellID()
	meta := notebooks.CellMeta{Author: notebooks.AuthorHuman, HumanCell: 1}
	if err := tr.AddCode("robo.move_to([0.5, 0, 0.3])", notebooks.CodeRun{ID: id, Tags: []string{notebooks.TagHuman}}, meta.Map()); err != nil {
		t.Fatal(err)
	}
	before := tr.Snapshot()
	if err := tr.PatchCellMeta(id, map[string]any{"calls": 1, "stateful_calls": 1, "env_steps": 8}); err != nil {
		t.Fatal(err)
	}
	if err := tr.PatchCellMeta("no-such-cell", map[string]any{"x": 1}); !errors.Is(err, notebooks.ErrNoSuchCell) {
		t.Errorf("patching an unknown cell: %v", err)
	}
	if _, ok := before.Cells[0].Metadata["pyrualean"].(map[string]any)["calls"]; ok {
		t.Error("a snapshot taken before the patch changed")
	}
	nb := closeAndRead(t, tr)
	got := notebooks.CellMetaOf(nb.Cells[0])
	if nb.Cells[0].ID != id || got.HumanCell != 1 || got.Ledger == nil || *got.Ledger != (notebooks.CellLedger{Calls: 1, StatefulCalls: 1, EnvSteps: 8}) {
		t.Errorf("patched cell %s: %+v", nb.Cells[0].ID, got)
	}
	if tags, _ := nb.Cells[0].Metadata["tags"].([]any); len(tags) != 1 || tags[0] != notebooks.TagHuman {
		t.Errorf("tags: %v", nb.Cells[0].Metadata["tags"])
	}
}

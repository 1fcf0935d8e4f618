package runtimes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/spec"
)

func TestLoadActions(t *testing.T) {
	dir := t.TempDir()
	py := filepath.Join(dir, "s.py")
	os.WriteFile(py, []byte("# %% [markdown]\n# title\n\n# %%\na = 1\n\n# %%\nprint(a)\n"), 0o644)
	acts, err := LoadActions(py, spec.ArmCells)
	if err != nil || len(acts) != 2 || acts[0].Tool != "python" || !strings.Contains(string(acts[1].Args), "print(a)") {
		t.Fatalf("%v %v", acts, err)
	}
	if _, err := LoadActions(py, spec.ArmTools); err == nil {
		t.Error("a script replayed in the tools arm")
	}
	nb := &notebooks.Notebook{Nbformat: 4, NbformatMinor: 5, Metadata: map[string]any{}, Cells: []notebooks.Cell{
		{ID: "a", CellType: "code", Source: "from pyrualean_robot import make; robo = make()", Metadata: map[string]any{"pyrualean": map[string]any{"author": "setup"}}},
		{ID: "b", CellType: "code", Source: "robo.pick(object=\"x\")", Metadata: map[string]any{"pyrualean": map[string]any{"author": "tool", "tool": "pick", "args": map[string]any{"object": "x"}}}},
		{ID: "c", CellType: "code", Source: "h = 1", Metadata: map[string]any{"pyrualean": map[string]any{"author": "human"}}},
		{ID: "d", CellType: "markdown", Source: "**finish** — status `success`\n\ndone it", Metadata: map[string]any{"pyrualean": map[string]any{"author": "agent", "tool": "finish", "status": "success"}}},
	}}
	ipynb := filepath.Join(dir, "t.ipynb")
	if err := notebooks.WriteFileAtomic(ipynb, nb); err != nil {
		t.Fatal(err)
	}
	acts, err = LoadActions(ipynb, spec.ArmTools)
	if err != nil || len(acts) != 2 || acts[0].Tool != "pick" || string(acts[0].Args) != `{"object":"x"}` || acts[1].Tool != "finish" || !strings.Contains(string(acts[1].Args), "done it") {
		t.Fatalf("%+v %v", acts, err)
	}
	acts, err = LoadActions(ipynb, spec.ArmCells)
	if err != nil || len(acts) != 2 || acts[0].Tool != "python" {
		t.Fatalf("cells: %+v %v", acts, err)
	}
}

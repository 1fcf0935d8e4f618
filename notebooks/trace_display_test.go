package notebooks_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// TestTraceDisplayUpdates runs cells in a real kernel that show a display, update it from a later cell
// and show it again under the same id; the trace must end as nbclient leaves the same notebook.
func TestTraceDisplayUpdates(t *testing.T) {
	nbtest.Heavy(t, "a real IPython kernel")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	path := filepath.Join(t.TempDir(), "trace.ipynb")
	tr, err := notebooks.NewTrace(path, notebooks.TraceMeta{KernelDisplayName: spec.DisplayName})
	if err != nil {
		t.Fatal(err)
	}
	cells := []string{
		"from IPython.display import display\nh = display('v1', display_id='d1')\ng = display('other', display_id='d2')",
		"print('second')\nh.update('v2', metadata={'k': 1})",
		"h.update('v3')",
		"display('v4', display_id='d1');",
	}
	// textOf reads the text/plain of each output of a trace cell in the file on disk.
	textOf := func(cell int) []string {
		nb, err := notebooks.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range nb.Cells[cell].Outputs {
			if s, ok := o.Data["text/plain"].(string); ok {
				out = append(out, s)
			} else {
				out = append(out, o.Text)
			}
		}
		return out
	}
	var before *notebooks.Notebook
	for i, code := range cells {
		res, err := k.Client().Execute(ctx, code, kernel.ExecuteOptions{Timeout: time.Minute})
		if err != nil || res.Status != "ok" {
			t.Fatalf("cell %d: %v %+v", i, err, res)
		}
		if err := tr.AddCode(code, notebooks.CodeRun{Outputs: res.Outputs, ExecutionCount: res.ExecutionCount, Timing: res.Timing}, nil); err != nil {
			t.Fatal(err)
		}
		for _, u := range res.DisplayUpdates {
			if err := tr.UpdateDisplay(u.DisplayID, u.Data, u.Metadata); err != nil {
				t.Fatalf("cell %d: update %s: %v", i, u.DisplayID, err)
			}
		}
		switch i {
		case 0:
			before = tr.Snapshot()
		case 1:
			if got := textOf(0); !reflect.DeepEqual(got, []string{"'v2'", "'other'"}) {
				t.Errorf("after the update from cell 1, cell 0 shows %q", got)
			}
			if got := textOf(1); !reflect.DeepEqual(got, []string{"second\n"}) {
				t.Errorf("cell 1 shows %q; the update belongs to cell 0", got)
			}
		}
	}
	if got := before.Cells[0].Outputs[0].Data["text/plain"]; got != "'v1'" {
		t.Errorf("a snapshot taken before the updates changed: %v", got)
	}
	// A display shown again under the same id updates earlier cells too (nbclient's behaviour).
	if got := textOf(0); !reflect.DeepEqual(got, []string{"'v4'", "'other'"}) {
		t.Errorf("cell 0 ends as %q", got)
	}
	if got := textOf(3); !reflect.DeepEqual(got, []string{"'v4'"}) {
		t.Errorf("cell 3 ends as %q", got)
	}
	if err := tr.UpdateDisplay("never-shown", notebooks.MimeBundle{"text/plain": "x"}, nil); !errors.Is(err, notebooks.ErrUnknownDisplay) {
		t.Errorf("unknown display id: %v, want ErrUnknownDisplay", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	nbtest.Validate(t, path)

	// The oracle: nbclient executing the same cells leaves the same outputs.
	ref, err := notebooks.ReadFile(nbtest.Execute(t, path, "pyrualean", false, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := notebooks.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ours.Cells {
		got, want := ours.Cells[i].Outputs, ref.Cells[i].Outputs
		if len(got) != len(want) {
			t.Fatalf("cell %d: %d outputs, nbclient %d", i, len(got), len(want))
		}
		for j := range got {
			if !reflect.DeepEqual(got[j].Data, want[j].Data) || !reflect.DeepEqual(got[j].Metadata, want[j].Metadata) || got[j].Text != want[j].Text {
				t.Errorf("cell %d output %d: ours %+v, nbclient %+v", i, j, got[j], want[j])
			}
		}
	}
}

package tokenbench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/robotapi"
)

func TestOneTask(t *testing.T) {
	nbtest.Heavy(t, "two replayed episodes in real kernels")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Tasks: []string{"stack_blocks"}, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tasks) != 1 {
		t.Fatalf("%d tasks", len(rep.Tasks))
	}
	tr := rep.Tasks[0]
	cells, err := robotapi.SolutionCells("tabletop", "stack_blocks")
	if err != nil {
		t.Fatal(err)
	}
	if !tr.CellsSolved || !tr.ToolsSolved {
		t.Errorf("solved cells=%v tools=%v (%s/%s)", tr.CellsSolved, tr.ToolsSolved, tr.CellsStatus, tr.ToolsStatus)
	}
	// One LLM call per solution cell and per primitive call, plus finish.
	if tr.CellsCalls != len(cells)+1 || tr.ToolsCalls != tr.PrimitiveCalls+1 || tr.PrimitiveCalls <= len(cells) {
		t.Errorf("calls cells=%d (cells %d) tools=%d (primitives %d)", tr.CellsCalls, len(cells), tr.ToolsCalls, tr.PrimitiveCalls)
	}
	if tr.CellsInputTokens <= 0 || tr.ToolsInputTokens <= tr.CellsInputTokens || rep.OverallRatio != tr.Ratio {
		t.Errorf("tokens cells=%d tools=%d ratio %v overall %v", tr.CellsInputTokens, tr.ToolsInputTokens, tr.Ratio, rep.OverallRatio)
	}
	var buf bytes.Buffer
	WriteTable(&buf, rep)
	if !strings.Contains(buf.String(), "stack_blocks") || !strings.Contains(buf.String(), "overall") {
		t.Errorf("table:\n%s", buf.String())
	}
}

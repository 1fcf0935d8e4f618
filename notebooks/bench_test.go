package notebooks_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// episodeNotebook is a trace-sized notebook: cells with text, a state dict and two camera images.
func episodeNotebook(cells int) *notebooks.Notebook {
	rng := rand.New(rand.NewPCG(1, 2))
	img := make([]byte, 24_000) // a 256x256 camera PNG is about this size
	for i := range img {
		img[i] = byte(rng.IntN(256))
	}
	png := base64.StdEncoding.EncodeToString(img)
	nb := notebooks.New()
	nb.Metadata["kernelspec"] = map[string]any{"name": "pyrualean", "display_name": "Python (pyrualean robot)"}
	for i := range cells {
		n := i + 1
		nb.AppendCell(notebooks.Cell{CellType: notebooks.CellMarkdown, Source: fmt.Sprintf("Turn %d: I will move the gripper above the <red> block & grasp it.\n", i)})
		nb.AppendCell(notebooks.Cell{CellType: notebooks.CellCode, ExecutionCount: &n,
			Source:   fmt.Sprintf("r = robo.move_to([0.4, %.3f, 0.2])\nprint(r)\nrobo.state()", float64(i)/100),
			Metadata: map[string]any{"pyrualean": map[string]any{"author": "agent", "turn": i}},
			Outputs: []notebooks.Output{
				{OutputType: notebooks.OutputStream, Name: "stdout", Text: strings.Repeat("MoveResult(reached=True, err=0.0012)\n", 3)},
				{OutputType: notebooks.OutputDisplayData, Data: notebooks.MimeBundle{"image/png": png, "text/plain": "<IPython.core.display.Image object>"},
					Metadata: map[string]any{"pyrualean": map[string]any{"camera": "agentview", "source": "on-motion"}}},
				{OutputType: notebooks.OutputDisplayData, Data: notebooks.MimeBundle{"image/png": png, "text/plain": "<IPython.core.display.Image object>"},
					Metadata: map[string]any{"pyrualean": map[string]any{"camera": "wrist", "source": "on-motion"}}},
				{OutputType: notebooks.OutputExecuteResult, ExecutionCount: &n, Data: notebooks.MimeBundle{"text/plain": "State(step=83, eef_pos=(0.53775, 0.15764, 0.03509))"}},
			}})
	}
	return nb
}

// BenchmarkWriteVsNbformat writes a 100-turn trace (about 5 MB) with our writer and, in the same run,
// with nbformat.writes (the anchor), and reports the ratio.
func BenchmarkWriteVsNbformat(b *testing.B) {
	nb := episodeNotebook(100)
	want, err := nb.Bytes()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "nb.ipynb")
	os.WriteFile(path, want, 0o644)
	// Anchor: nbformat.writes of the same notebook, timed inside Python (no process start counted).
	script := `
import sys, time, nbformat
nb = nbformat.read(sys.argv[1], as_version=4)
s = nbformat.writes(nb) + "\n"
assert s == open(sys.argv[1], encoding="utf-8").read(), "anchor bytes differ"
times = []
for _ in range(5):
    t = time.perf_counter(); nbformat.writes(nb); times.append(time.perf_counter() - t)
times.sort(); print(times[len(times)//2])
`
	out, err := exec.Command(nbtest.Python(b), "-c", script, path).CombinedOutput()
	if err != nil {
		b.Fatalf("anchor: %v\n%s", err, out)
	}
	anchor, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		b.Fatalf("anchor output %q", out)
	}
	b.SetBytes(int64(len(want)))
	b.ResetTimer()
	start := time.Now()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := nb.Write(&buf); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(anchor*1e3, "nbformat-ms/op")
	b.ReportMetric(anchor/per, "x-faster-than-nbformat")
}

// BenchmarkTraceAddCode is the per-cell cost of an episode trace at 100 turns: append + atomic save.
func BenchmarkTraceAddCode(b *testing.B) {
	src := episodeNotebook(101)
	path := filepath.Join(b.TempDir(), "trace.ipynb")
	tr, err := notebooks.NewTrace(path, notebooks.TraceMeta{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if err := tr.AddCell(src.Cells[i]); err != nil {
			b.Fatal(err)
		}
	}
	cell := src.Cells[201]
	b.ResetTimer()
	for b.Loop() {
		if err := tr.AddCode(cell.Source, notebooks.CodeRun{Outputs: cell.Outputs, ExecutionCount: cell.ExecutionCount}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

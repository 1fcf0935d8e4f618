package kernel

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/kernel/bench"
)

// benchCell times one cell repeatedly (go test -bench; `pyrualean bench kernel` compares with peers).
func benchCell(b *testing.B, code string) {
	k := launchTest(b)
	c := k.Client()
	execOK(b, c, "import io, numpy as np\nfrom PIL import Image\nfrom IPython.display import Image as _BenchImage, display\n_b = io.BytesIO()\nImage.fromarray(np.random.default_rng(0).integers(0, 256, (580, 580, 3), dtype=np.uint8)).save(_b, format='PNG')\n_bench_png = _b.getvalue()")
	execOK(b, c, code)
	b.ResetTimer()
	for range b.N {
		if _, err := c.Execute(context.Background(), code, ExecuteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExecuteTrivial(b *testing.B)  { benchCell(b, "1+1") }
func BenchmarkExecutePrint1MB(b *testing.B) { benchCell(b, "print('x' * 1_000_000)") }
func BenchmarkExecutePNG1MB(b *testing.B)   { benchCell(b, "display(_BenchImage(data=_bench_png))") }

// BenchmarkExecuteFlood50MB times Execute of a cell printing 50 MB against two anchors, interleaved on
// one kernel: the same cell printing to /dev/null inside the kernel (what producing the text costs
// Python alone), and the kernel's own busy time for the flood (status busy to idle, by its clock:
// producing the text and sending it through ipykernel's iopub, which no client can skip). It reports
// the medians and the ratios (the goal: Execute at most 2x the kernel). Run it with -benchtime 10x.
func BenchmarkExecuteFlood50MB(b *testing.B) {
	k := launchTest(b)
	c := k.Client()
	flood, anchor := bench.FloodCell(50, false), bench.FloodCell(50, true)
	run := func(code string) (wall, busy float64) {
		t0 := time.Now()
		r, err := c.Execute(context.Background(), code, ExecuteOptions{Timeout: 5 * time.Minute})
		d := time.Since(t0)
		if err != nil || r.Status != "ok" || len(r.Outputs) == 0 || !strings.HasSuffix(r.Outputs[len(r.Outputs)-1].Text, "FINAL\n") {
			b.Fatalf("%v %+v", err, r)
		}
		return float64(d.Microseconds()) / 1000, float64(r.Timing.Idle.Sub(r.Timing.Busy).Microseconds()) / 1000
	}
	run(flood)
	run(anchor)
	var tf, tk, ta []float64
	b.ResetTimer()
	for i := range b.N {
		var a float64
		if i%2 == 0 { // alternate who goes first
			a, _ = run(anchor)
		}
		f, k := run(flood)
		if i%2 == 1 {
			a, _ = run(anchor)
		}
		tf, tk, ta = append(tf, f), append(tk, k), append(ta, a)
	}
	b.StopTimer()
	mf, mk, ma := median(tf), median(tk), median(ta)
	b.ReportMetric(mf, "flood-ms")
	b.ReportMetric(mk, "kernel-busy-ms")
	b.ReportMetric(ma, "devnull-ms")
	b.ReportMetric(mf/mk, "x-kernel")
	b.ReportMetric(mf/ma, "x-devnull")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

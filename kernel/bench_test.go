package kernel

import (
	"context"
	"testing"
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

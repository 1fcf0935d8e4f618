package runs

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Bootstrap settings of every interval this package prints: the pairs are resampled this many
// times from a generator with a fixed seed, so the same runs always give the same intervals.
const (
	BootstrapResamples = 2000
	bootstrapSeed1     = 1
	bootstrapSeed2     = 2
	confidenceZ        = 1.959963984540054 // 95%
	lowerQ, upperQ     = 0.025, 0.975
)

// Interval is an estimate with its 95% confidence interval.
type Interval struct {
	Value float64 `json:"value"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
}

func (iv *Interval) String() string {
	if iv == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f [%.2f, %.2f]", iv.Value, iv.Lo, iv.Hi)
}

// Wilson is the 95% Wilson score interval of k successes in n trials; nil when n is 0.
func Wilson(k, n int) *Interval {
	if n == 0 {
		return nil
	}
	const z = confidenceZ
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	centre := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return &Interval{Value: p, Lo: max(0, centre-half), Hi: min(1, centre+half)}
}

// BootstrapRatio is mean(left)/mean(right) over paired samples with a 95% percentile interval from
// resampling the pairs (fixed seed: the same runs give the same interval). nil without pairs or when
// the right side sums to zero.
func BootstrapRatio(left, right []float64, resamples int) *Interval {
	return bootstrap(left, right, resamples, func(l, r float64, _ int) (float64, bool) {
		if r == 0 {
			return 0, false
		}
		return l / r, true
	})
}

// BootstrapDiff is mean(right) - mean(left) over paired samples with a 95% percentile interval from
// resampling the pairs (fixed seed); nil without pairs.
func BootstrapDiff(left, right []float64, resamples int) *Interval {
	return bootstrap(left, right, resamples, func(l, r float64, n int) (float64, bool) {
		return (r - l) / float64(n), true
	})
}

// bootstrap resamples pairs (i, i) with replacement and applies stat to the sums of each side.
func bootstrap(left, right []float64, resamples int, stat func(lsum, rsum float64, n int) (float64, bool)) *Interval {
	n := len(left)
	if n == 0 || n != len(right) {
		return nil
	}
	sums := func(idx func(i int) int) (float64, float64) {
		var l, r float64
		for i := range n {
			j := idx(i)
			l += left[j]
			r += right[j]
		}
		return l, r
	}
	l0, r0 := sums(func(i int) int { return i })
	point, ok := stat(l0, r0, n)
	if !ok {
		return nil
	}
	rng := rand.New(rand.NewPCG(bootstrapSeed1, bootstrapSeed2))
	var rs []float64
	for range resamples {
		l, r := sums(func(int) int { return rng.IntN(n) })
		if v, ok := stat(l, r, n); ok {
			rs = append(rs, v)
		}
	}
	if len(rs) == 0 {
		return &Interval{Value: point, Lo: point, Hi: point}
	}
	sort.Float64s(rs)
	q := func(p float64) float64 { return rs[min(len(rs)-1, int(p*float64(len(rs))))] }
	return &Interval{Value: point, Lo: q(lowerQ), Hi: q(upperQ)}
}

package agent

import "math"

// Round rounds x to places decimal places, for the figures records and benchmarks write (seconds to
// milliseconds: Round(s, 3)); halves round away from zero.
func Round(x float64, places int) float64 {
	p := math.Pow10(places)
	return math.Round(x*p) / p
}

package agent

import "testing"

func TestRound(t *testing.T) {
	for _, tc := range []struct {
		x      float64
		places int
		want   float64
	}{
		{1.23449, 3, 1.234},
		{1.2345, 3, 1.235},
		{-0.0015, 3, -0.002}, // away from zero (int64(x*1000+0.5) gave -0.001)
		{2.5, 0, 3},
		{0.123456, 4, 0.1235},
		{12.345, 2, 12.35},
	} {
		if got := Round(tc.x, tc.places); got != tc.want {
			t.Errorf("Round(%v, %d) = %v, want %v", tc.x, tc.places, got, tc.want)
		}
	}
}

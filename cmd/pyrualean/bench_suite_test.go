package main

import (
	"slices"
	"testing"
)

// TestMedianWays: each way's figures are medians over the repetitions, its ratio to the shell loop the
// median of the ratios taken within each repetition, and the per-repetition walls are kept.
func TestMedianWays(t *testing.T) {
	rep := func(loop, par float64) []*way {
		return []*way{
			{Name: "shell loop of play", Episodes: 10, WallS: loop, VsShellLoop: 1},
			{Name: "jobs2", Episodes: 10, WallS: par, VsShellLoop: loop / par, OverheadMS: par},
		}
	}
	for _, tc := range []struct {
		name      string
		runs      [][]*way
		wantWall  float64
		wantRatio float64
	}{
		{"one repetition", [][]*way{rep(100, 50)}, 50, 2},
		{"three, one slow", [][]*way{rep(100, 50), rep(300, 60), rep(110, 55)}, 55, 2},
		{"ratio within each repetition", [][]*way{rep(100, 100), rep(200, 50), rep(90, 30)}, 50, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := medianWays(tc.runs)
			if len(got) != 2 || got[1].WallS != tc.wantWall || got[1].VsShellLoop != tc.wantRatio || got[0].VsShellLoop != 1 {
				t.Fatalf("medians: %+v %+v, want wall %v ratio %v", *got[0], *got[1], tc.wantWall, tc.wantRatio)
			}
			if len(got[1].Walls) != len(tc.runs) || got[1].PerMinute != 10/(tc.wantWall/60) {
				t.Errorf("walls %v, per minute %v", got[1].Walls, got[1].PerMinute)
			}
			if !slices.Equal(got[0].Walls, wallsOf(tc.runs, 0)) {
				t.Errorf("loop walls %v", got[0].Walls)
			}
		})
	}
}

func wallsOf(runs [][]*way, i int) []float64 {
	var out []float64
	for _, r := range runs {
		out = append(out, r[i].WallS)
	}
	return out
}

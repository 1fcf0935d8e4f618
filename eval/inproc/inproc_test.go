package inproc

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// TestRunFromGo runs a suite from Go code, no CLI: the replayed reference solution in both arms, sealed
// (the robot servers forked), then the same call again, which resumes with nothing to run.
func TestRunFromGo(t *testing.T) {
	nbtest.Heavy(t, "kernels and robot servers")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "suite")
	m := eval.Matrix{Rows: []eval.Row{{Tasks: "stack_blocks", Seeds: "0", Arms: []string{"cells", "tools"}, Runtime: "replay",
		Settings: map[string]string{"images": "none"}}}}
	var (
		mu     sync.Mutex
		events []string
	)
	o := Options{Jobs: 2, Events: func(e eval.Event) { mu.Lock(); events = append(events, e.Kind); mu.Unlock() }}
	man, res, err := Run(ctx, dir, m, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Episodes != 2 || res.Finished != 2 || len(man.Order) != 2 {
		t.Fatalf("results %+v, %d in the manifest", res, len(man.Order))
	}
	for _, id := range man.Order {
		st := man.Episodes[id]
		if st.Status != agent.StatusCompleted || st.Success == nil || !*st.Success || st.Attempts != 1 {
			t.Errorf("%s: %+v", id, st)
		}
		r, err := agent.ReadResult(filepath.Join(dir, filepath.FromSlash(st.Dir)))
		if err != nil || (r.Sealed && (r.Seal == nil || !r.Seal.RobotServerForked)) {
			t.Errorf("%s: result %v (%v)", id, r.Seal, err)
		}
	}
	if n := strings.Count(strings.Join(events, " "), "finish"); n != 2 {
		t.Errorf("events %v: %d finishes", events, n)
	}
	man2, res2, err := Run(ctx, dir, m, o)
	if err != nil || res2.Finished != 2 {
		t.Fatalf("resume: %+v %v", res2, err)
	}
	for _, id := range man2.Order {
		if man2.Episodes[id].Attempts != 1 {
			t.Errorf("%s ran again on resume: %+v", id, man2.Episodes[id])
		}
	}
}

// Plan refuses a bad matrix before anything runs, naming the row.
func TestPlanRefusesBadRows(t *testing.T) {
	nbtest.Heavy(t, "the robot registry (Python)")
	ctx := context.Background()
	for _, tc := range []struct {
		row  eval.Row
		want string
	}{
		{eval.Row{Tasks: "no_such_task", Runtime: "replay", Arms: []string{"cells"}}, "no_such_task"},
		{eval.Row{Tasks: "stack_blocks", Runtime: "replay", Arms: []string{"program"}}, "no reference program"},
		{eval.Row{Tasks: "stack_blocks", Runtime: "replay", Arms: []string{"cells"}, Settings: map[string]string{"images": "sometimes"}}, "images"},
	} {
		if _, _, err := Plan(ctx, eval.Matrix{Rows: []eval.Row{tc.row}}); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "row") {
			t.Errorf("%+v: %v, want an error naming the row and %q", tc.row, err, tc.want)
		}
	}
}

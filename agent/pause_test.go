package agent_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/notebooks"
)

// TestPauseIsNotTheAgentsTime: a person pauses a real episode (real kernel, the production OpenAI
// client against the scripted server) while the model decides, again and again: each Pause cancels
// the model call under way and the agent is held within a second (measured: median and p95 logged);
// the call is asked again on Resume, recorded as cancelled, not as an error. Then a pause longer than
// the whole wall-clock budget: the episode still ends as the model says (completed), not as timeout;
// result.json's paused_s counts the pauses and policy_wall_s leaves them out; the live status shows
// the turn being decided and the budget left, stopped while paused.
func TestPauseIsNotTheAgentsTime(t *testing.T) {
	const cycles = 8
	const budget = 6.0
	const longPause = 8 * time.Second // longer than the budget
	slow := openaitest.Step{Delay: time.Minute, Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{py("print('never')")}}}
	script := []openaitest.Step{call(py("print('first')"))}
	for range cycles + 1 {
		script = append(script, slow)
	}
	script = append(script, call(py("print('second')")), call(finish("success", "done")))
	srv := openaitest.New(script...)
	defer srv.Close()
	cfg := episodeConfig(t, func(c *testEpisode) { c.BudgetS = budget })
	var holds []time.Duration
	var waitingTurn int
	var leftAtPause, leftAfter float64 = -1, -1
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), func(ep *agent.Episode) {
		ctl := ep.Controller()
		go func() {
			for i := range cycles + 1 {
				n := 2 + i // the model is deciding turn 2, for the (2+i)th time
				waitUntil(t, "the model call", func() bool { return len(srv.Requests()) >= n })
				time.Sleep(50 * time.Millisecond) // the call is in flight
				start := time.Now()
				if err := ctl.Pause(); err != nil {
					t.Error(err)
					return
				}
				waitUntil(t, "the agent held", func() bool { return ep.Status().Phase == "waiting" })
				if i < cycles {
					holds = append(holds, time.Since(start))
					if err := ctl.Resume(); err != nil {
						t.Error(err)
					}
					continue
				}
				st := ep.Status()
				waitingTurn = st.Turn
				if st.BudgetLeftS != nil {
					leftAtPause = *st.BudgetLeftS
				}
				time.Sleep(longPause)
				if st := ep.Status(); st.BudgetLeftS != nil {
					leftAfter = *st.BudgetLeftS
				}
				if err := ctl.Resume(); err != nil {
					t.Error(err)
				}
			}
		}()
	})
	if res.Status != agent.StatusCompleted {
		t.Fatalf("status %q (%v), want completed: a pause longer than the budget ended the episode", res.Status, res.Error)
	}
	if res.PausedS < longPause.Seconds() || res.PolicyWallS >= budget || res.TotalWallS < res.PolicyWallS+res.PausedS {
		t.Errorf("paused_s %.3f, policy_wall_s %.3f, total_wall_s %.3f (budget %.0f s, a pause of %s)",
			res.PausedS, res.PolicyWallS, res.TotalWallS, budget, longPause)
	}
	if waitingTurn != 2 {
		t.Errorf("the status shows turn %d while the agent decides turn 2", waitingTurn)
	}
	if leftAtPause <= 0 || leftAtPause > budget || leftAfter < leftAtPause-0.05 {
		t.Errorf("budget left %.3f s at the pause and %.3f s after %s paused: the clock did not stop", leftAtPause, leftAfter, longPause)
	}
	if len(holds) != cycles {
		t.Fatalf("%d holds measured, want %d", len(holds), cycles)
	}
	slices.Sort(holds)
	median, p95 := holds[len(holds)/2], holds[(len(holds)*95+99)/100-1]
	t.Logf("Pause → agent held while the model decides: median %s, p95 %s, max %s (%d pauses)", median, p95, holds[len(holds)-1], len(holds))
	if holds[len(holds)-1] > time.Second {
		t.Errorf("Pause → held took %s (max), want ≤ 1 s", holds[len(holds)-1])
	}
	turns := readJSONL(t, filepath.Join(cfg.Out, "turns.jsonl"))
	cancelled := 0
	for _, tr := range turns {
		if c, _ := tr["cancelled"].(bool); c {
			cancelled++
			if e, _ := tr["error"].(string); !strings.Contains(e, "paused") {
				t.Errorf("a cancelled turn's error: %q", e)
			}
		}
	}
	if cancelled != cycles+1 || len(turns) != cycles+4 || res.Generation.Errors != 0 {
		t.Errorf("turns.jsonl: %d lines, %d cancelled (want %d, %d); generation errors %d", len(turns), cancelled, cycles+4, cycles+1, res.Generation.Errors)
	}
	notes := 0
	for _, c := range readTrace(t, cfg.Out).Cells {
		if m := notebooks.CellMetaOf(c); m.Kind == "event" && c.CellType == "markdown" {
			notes++
			if !strings.HasPrefix(c.Source, "> ⏸ **Paused** by a person") && !strings.HasPrefix(c.Source, "> ▶ **Resumed** by a person") {
				t.Errorf("event note %q", c.Source)
			}
		}
	}
	if notes != 2*(cycles+1) {
		t.Errorf("%d event notes in the trace, want a pause and a resume each of %d times", notes, cycles+1)
	}
	if got := len(srv.Requests()); got != len(script) {
		t.Errorf("%d model calls, want %d", got, len(script))
	}
}

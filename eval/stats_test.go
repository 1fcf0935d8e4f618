package eval

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent"
)

// TestAnalyzeCountsAsTheOriginal: an episode eval would run again (planner_error, boot_error) is a
// failed episode in every figure until it does, the results say how many are left (not final), an
// episode that never ran is in no figure, and the paper's table (tools -> cells) is built per
// runtime-model and settings.
func TestAnalyzeCountsAsTheOriginal(t *testing.T) {
	dir := t.TempDir()
	yes, no := true, false
	man := &Manifest{Schema: ManifestSchema, Episodes: map[string]*EpisodeState{}}
	for _, c := range []struct {
		task, arm string
		seed      int
		status    string
		ok        *bool
		ran       bool
	}{
		{"stack_blocks", "tools", 0, agent.StatusCompleted, &yes, true},
		{"stack_blocks", "cells", 0, agent.StatusCompleted, &yes, true},
		{"stack_blocks", "tools", 1, agent.StatusPlannerError, nil, true},
		{"stack_blocks", "cells", 1, agent.StatusCompleted, &yes, true},
		{"open_drawer", "tools", 0, agent.StatusCallBudget, &no, true},
		{"open_drawer", "cells", 0, agent.StatusBootError, nil, true},
		{"open_drawer", "tools", 1, "", nil, false},
		{"open_drawer", "cells", 1, "", nil, false},
	} {
		e := Episode{Robot: "tabletop", Task: c.task, Family: "f", Seed: c.seed, Arm: c.arm, Runtime: "replay"}
		e.ID = e.makeID()
		man.Order = append(man.Order, e.ID)
		man.Episodes[e.ID] = &EpisodeState{Episode: e, Dir: "episodes/" + e.ID, Status: StatePending}
		if !c.ran {
			continue
		}
		b, _ := json.Marshal(agent.Result{Schema: agent.ResultSchema, Arm: c.arm, Robot: "tabletop", Task: c.task, Seed: c.seed,
			Status: c.status, EnvironmentSuccess: c.ok})
		os.MkdirAll(e.Dir(dir), 0o755)
		if err := os.WriteFile(filepath.Join(e.Dir(dir), "result.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	recs := LoadRecords(dir, man)
	res := Analyze(recs)
	if res.Episodes != 8 || res.Finished != 4 || res.Retryable != 2 || res.Pending != 2 {
		t.Errorf("episodes %d finished %d retryable %d pending %d", res.Episodes, res.Finished, res.Retryable, res.Pending)
	}
	// 6 ran: solved tools 1/3, cells 2/3 (the planner_error and the boot_error are failures).
	if res.Summary.NativeSRDenominator != 6 || res.Summary.Solved != 3 {
		t.Errorf("summary %+v", res.Summary)
	}
	if len(res.Groups) != 1 {
		t.Fatalf("groups %+v", res.Groups)
	}
	for _, a := range res.Groups[0].Arms {
		if a.Known != 3 || a.Infra != 1 || (a.Arm == "tools" && a.Solved != 1) || (a.Arm == "cells" && a.Solved != 2) {
			t.Errorf("arm %+v", a)
		}
	}
	if len(res.Tables) != 1 || res.Tables[0].Setup != "replay/default" {
		t.Fatalf("tables %+v", res.Tables)
	}
	pt := res.Tables[0]
	all := pt.Rows[len(pt.Rows)-1]
	if pt.Left != "tools" || pt.Right != "cells" || all.Instances != 3 || all.JointlySolved != 1 || all.Left.Solved != 1 || all.Right.Solved != 2 ||
		pt.NotFinal.Retryable != 2 || pt.NotFinal.Pending != 2 {
		t.Errorf("paper table %+v", pt)
	}
	var out strings.Builder
	WriteResults(&out, recs, res)
	for _, want := range []string{"not final: 2 of 8 episodes never ran, 2 end in a status eval runs again", "infrastructure failures 1 (counted as failed)",
		"== paper table, replay/default", "NOT FINAL: 2 episode(s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("results lack %q:\n%s", want, out.String())
		}
	}
}

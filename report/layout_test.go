package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/robotapi"
)

// layoutSuite writes a eval folder named "suite" (the name that made the title read "pyrualean
// suite suite") with two families, both arms, an arm at 100% in one family (its bar and interval
// reach the top), infrastructure failures, and settings.
func layoutSuite(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "suite")
	settings := map[string]string{"images": "none", "max-turns": "5"}
	man := eval.Manifest{Schema: eval.ManifestSchema, CreatedAt: "2026-12-04T10:00:00Z", Episodes: map[string]*eval.EpisodeState{},
		Matrix: eval.Matrix{Rows: []eval.Row{{Robot: "tabletop", Tasks: "stack_blocks,put_block_in_bowl", Seeds: "0-3",
			Arms: []string{"cells", "tools"}, Runtime: "openai", Models: []string{"gpt-6-astra"}, Settings: settings}}},
		Runner: eval.RunnerInfo{Engine: "local", Jobs: 2, Host: "test", StartedAt: "2026-12-04T10:00:00Z", EndedAt: "2026-12-04T10:30:00Z"}}
	yes, no := true, false
	for _, task := range []struct{ name, family string }{{"stack_blocks", "stack"}, {"put_block_in_bowl", "pick_place"}} {
		for seed := range 4 {
			for _, arm := range []string{"cells", "tools"} {
				e := eval.Episode{Robot: "tabletop", Task: task.name, Family: task.family, Seed: seed, Arm: arm, Runtime: "openai", Model: "gpt-6-astra", Settings: settings}
				e.ID = strings.Join([]string{"tabletop", "default", task.name, fmt.Sprint(seed), arm, "openai-gpt-6-astra", eval.SettingsTag(settings)}, "/")
				res := agent.Result{Schema: agent.ResultSchema, System: "pyrualean", Arm: arm, Robot: "tabletop", Task: task.name, Seed: seed,
					Model: "gpt-6-astra", Status: agent.StatusCompleted, EnvironmentSuccess: &yes, ToolTurns: 3, Calls: 3, Sealed: true,
					Generation: agent.Generation{Turns: 4, InputTokens: 30_000, OutputTokens: 800}}
				if arm == "tools" {
					res.Generation = agent.Generation{Turns: 9, InputTokens: 110_000, OutputTokens: 1_500}
					switch {
					case task.family == "stack" && seed == 1:
						res.Status, res.EnvironmentSuccess = agent.StatusPlannerError, nil
					case task.family == "stack" && seed >= 2:
						res.Status, res.EnvironmentSuccess = agent.StatusCallBudget, &no
					case task.family == "pick_place" && seed == 3:
						res.Status, res.EnvironmentSuccess = agent.StatusBootError, nil
					}
				}
				if arm == "cells" && task.family == "stack" && seed == 3 {
					res.Status, res.EnvironmentSuccess = agent.StatusTimeout, nil
				}
				st := &eval.EpisodeState{Episode: e, Dir: "episodes/" + e.ID, Status: res.Status, Attempts: 1}
				man.Order = append(man.Order, e.ID)
				man.Episodes[e.ID] = st
				run := filepath.Join(dir, "episodes", filepath.FromSlash(e.ID))
				os.MkdirAll(run, 0o755)
				b, _ := json.MarshalIndent(res, "", "  ")
				if err := os.WriteFile(filepath.Join(run, "result.json"), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	b, _ := json.MarshalIndent(man, "", "  ")
	if err := os.WriteFile(eval.ManifestPath(dir), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

type box struct{ Left, Top, Right, Bottom, Width, Height float64 }

func (a box) overlaps(b box) bool {
	return a.Left < b.Right && b.Left < a.Right && a.Top < b.Bottom && b.Top < a.Bottom
}

// TestReportLayoutInChromium opens the report in Debian's Chromium and checks the defects seen
// there are gone: the title said "pyrualean suite suite"; the percentage axis ran to 120%; the
// legend covered bars; the last bar touched the frame; the settings line printed settings=map[].
// PYRUALEAN_REPORT_SCREENSHOT=FILE keeps a screenshot to look at.
func TestReportLayoutInChromium(t *testing.T) {
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "e2e", "node_modules", "playwright-core")); err != nil {
		t.Fatalf("e2e/node_modules missing: run `npm ci` in e2e/ (scripts/setup.sh does): %v", err)
	}
	dir := layoutSuite(t)
	html := filepath.Join(t.TempDir(), "report.html")
	if err := Write(context.Background(), Options{SuiteDir: dir, Out: html}); err != nil {
		t.Fatal(err)
	}
	shot := os.Getenv("PYRUALEAN_REPORT_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "report.png")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "report_layout.mjs")
	cmd.Dir = filepath.Join(root, "e2e")
	cmd.Env = append(os.Environ(), "REPORT="+html, "SCREENSHOT="+shot)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("report_layout.mjs: %v\n%s", err, out)
	}
	var seen struct {
		Errors, Blocked []string
		Title, H1       string
		Charts          []struct {
			Title       string
			Percent     bool
			Frame       box
			Legend      box
			LegendNames []string
			Yticks      []struct {
				Text  string
				Value float64
			}
			Bars []struct {
				box
				Arm, Category string
				Value         float64
			}
			Errbars []box
		}
		Settings string
		Paper    []struct {
			Header []string
			Rows   [][]string
		}
		NotFinal   int
		Screenshot string
	}
	line := bytes.TrimSpace(out)
	if err := json.Unmarshal(line[bytes.LastIndexByte(line, '\n')+1:], &seen); err != nil {
		t.Fatalf("report_layout.mjs output %q: %v", out, err)
	}
	if len(seen.Errors) > 0 || len(seen.Blocked) > 0 {
		t.Errorf("page errors %v, requests off the page %v", seen.Errors, seen.Blocked)
	}
	// 1. The title names the suite once.
	if seen.Title != "suite · pyrualean report" || seen.H1 != seen.Title || strings.Contains(seen.Title, "suite suite") {
		t.Errorf("title %q, h1 %q", seen.Title, seen.H1)
	}
	if len(seen.Charts) < 3 {
		t.Fatalf("%d charts, want success, tokens, calls, ...", len(seen.Charts))
	}
	for _, c := range seen.Charts {
		// 2. A percentage axis ends at 100%.
		if c.Percent {
			top := c.Yticks[len(c.Yticks)-1]
			if top.Value != 100 || top.Text != "100%" {
				t.Errorf("%s: y axis tops out at %q", c.Title, top.Text)
			}
		}
		for _, tk := range c.Yticks {
			if c.Percent && tk.Value > 100 {
				t.Errorf("%s: tick %q above 100%%", c.Title, tk.Text)
			}
		}
		if len(c.LegendNames) != 2 || c.Legend.Width == 0 {
			t.Errorf("%s: legend %v %+v", c.Title, c.LegendNames, c.Legend)
		}
		for _, b := range c.Bars {
			// 3. The legend covers no bar (nor any error bar).
			if b.Height > 0 && c.Legend.overlaps(b.box) {
				t.Errorf("%s: legend %+v covers the %s bar of %s %+v", c.Title, c.Legend, b.Arm, b.Category, b.box)
			}
			// 4. Every bar is inside the frame, clear of its sides.
			if b.Left < c.Frame.Left+4 || b.Right > c.Frame.Right-4 || b.Top < c.Frame.Top-0.5 || b.Bottom > c.Frame.Bottom+0.5 {
				t.Errorf("%s: the %s bar of %s %+v touches or leaves the frame %+v", c.Title, b.Arm, b.Category, b.box, c.Frame)
			}
		}
		for _, e := range c.Errbars {
			if c.Legend.overlaps(e) || e.Top < c.Frame.Top-0.5 {
				t.Errorf("%s: an error bar %+v meets the legend or leaves the frame", c.Title, e)
			}
		}
	}
	success := seen.Charts[0]
	var full int
	for _, b := range success.Bars {
		if b.Value == 100 {
			full++
		}
	}
	if !success.Percent || full == 0 {
		t.Errorf("the success chart has no bar at 100%% to check against the frame: %+v", success.Bars)
	}
	// 5. Settings print as name=value.
	if strings.Contains(seen.Settings, "map[") || !strings.Contains(seen.Settings, "settings: images=none max-turns=5") {
		t.Errorf("settings: %q", seen.Settings)
	}
	// The paper's table: tabletop and All, tools 4/8 (planner_error and boot_error count as failures)
	// -> cells 7/8.
	if len(seen.Paper) != 1 || len(seen.Paper[0].Rows) != 2 || seen.Paper[0].Rows[1][0] != "All" ||
		!strings.HasPrefix(seen.Paper[0].Rows[0][3], "50.0 [") || !strings.HasPrefix(seen.Paper[0].Rows[0][4], "87.5 [") || seen.NotFinal != 1 {
		t.Errorf("paper table %+v, not-final notices %d", seen.Paper, seen.NotFinal)
	}
	t.Logf("screenshot: %s", seen.Screenshot)
}

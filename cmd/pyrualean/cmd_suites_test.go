package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSuitesFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown flag", []string{"--bogus"}, 2, "flag provided but not defined"},
		{"unknown robot", []string{"--robot", "pr2"}, 2, `unknown robot "pr2"`},
		{"stray argument", []string{"libero"}, 2, "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := cmdSuites(context.Background(), tc.args, &out, &errb); code != tc.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tc.code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.msg) || strings.Count(errb.String(), "\n") != 1 {
				t.Fatalf("stderr %q, want one line with %q", errb.String(), tc.msg)
			}
		})
	}
}

func TestSuitesJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := cmdSuites(ctx, []string{"--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	byRobot := map[string][]map[string]any{}
	for _, r := range rows {
		for _, k := range []string{"robot", "suite", "tasks", "runnable", "missing"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("row %v lacks %q", r, k)
			}
		}
		byRobot[r["robot"].(string)] = append(byRobot[r["robot"].(string)], r)
	}
	for _, robot := range []string{"tabletop", "libero", "robotwin", "robocasa", "robodojo_xpl_rgb"} {
		if len(byRobot[robot]) == 0 {
			t.Errorf("no rows for %s", robot)
		}
	}
	libero := map[string]map[string]any{}
	for _, r := range byRobot["libero"] {
		libero[r["suite"].(string)] = r
	}
	// LIBERO-PRO is installed by requirements/libero.txt and renders on CPU: it must say it runs here.
	for _, s := range []string{"libero_spatial_swap", "libero_goal_swap", "libero_object_swap", "libero_10_task"} {
		r := libero[s]
		if r == nil || r["tasks"].(float64) != 10 || r["runnable"] != true {
			t.Errorf("libero %s: %v", s, r)
		}
	}
	for _, r := range byRobot["robotwin"] {
		if r["runnable"] == true || len(r["missing"].([]any)) == 0 {
			t.Errorf("robotwin cannot run here without an env server: %v", r)
		}
	}
	for _, r := range byRobot["tabletop"] {
		if r["runnable"] != true || r["tasks"].(float64) < 1 {
			t.Errorf("tabletop row %v", r)
		}
	}
}

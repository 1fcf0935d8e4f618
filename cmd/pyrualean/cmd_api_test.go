package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

func TestAPIAndTasksCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cases := []struct {
		name   string
		cmd    func(context.Context, []string, io.Writer, io.Writer) int
		args   []string
		code   int
		stdout string // substring expected on stdout
	}{
		{"api text", cmdAPI, nil, 0, "robo.move_to("},
		{"api no-vla", cmdAPI, []string{"--primitives", "no-vla"}, 0, "robo.pick("},
		{"api tools", cmdAPI, []string{"--format", "tools"}, 0, `"name": "move_to"`},
		{"api bad flag", cmdAPI, []string{"--bogus"}, 2, ""},
		{"api bad format", cmdAPI, []string{"--format", "xml"}, 2, ""},
		{"api bad primitives", cmdAPI, []string{"--primitives", "all"}, 2, ""},
		{"api unknown robot", cmdAPI, []string{"--robot", "nope"}, 2, ""},
		{"api stray arg", cmdAPI, []string{"extra"}, 2, ""},
		{"tasks text", cmdTasks, nil, 0, "stack_blocks"},
		{"tasks json", cmdTasks, []string{"--json"}, 0, `"solution": "robotapi/solutions/tabletop/stack_blocks.py"`},
		{"tasks unknown robot", cmdTasks, []string{"--robot", "nope"}, 2, ""},
		{"tasks bad flag", cmdTasks, []string{"--yaml"}, 2, ""},
		{"bench bad flag", benchRobot, []string{"--reps", "0"}, 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := c.cmd(ctx, c.args, &out, &errb)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, c.code, errb.String())
			}
			if c.code == 2 && strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 {
				t.Errorf("want a one-line error, got %q", errb.String())
			}
			if !strings.Contains(out.String(), c.stdout) {
				t.Errorf("stdout lacks %q:\n%.500s", c.stdout, out.String())
			}
		})
	}
	var out, errb bytes.Buffer
	if code := cmdTasks(ctx, []string{"--json"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	var rows []map[string]string
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) < 10 {
		t.Fatalf("tasks --json: %d rows, %v", len(rows), err)
	}
	for _, k := range []string{"name", "family", "instruction", "solution"} {
		if rows[0][k] == "" {
			t.Errorf("tasks --json row lacks %q: %v", k, rows[0])
		}
	}
}

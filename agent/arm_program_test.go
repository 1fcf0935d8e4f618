package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/spec"
)

// solveProgram stacks the red block on the blue one inside run(robo), then keeps moving until the
// robot refuses (EpisodeFinished): the program ends "finished".
const solveProgram = `def place_on(robo, name):
    base = robo.segment(name)
    x, y, top = base.top_xyz
    robo.move_to([x, y, top + 0.10])
    robo.move_to([x, y, top + 0.025], step_clip=0.01)
    robo.release()
    return x, y, top

def run(robo):
    grasp = robo.pick("red_block")
    assert grasp.success, grasp
    x, y, top = place_on(robo, "blue block")
    for _ in range(5):
        robo.move_to([x, y, top + 0.12])
`

func runProgram(t *testing.T, ctx context.Context, tk agent.Toolkit, args map[string]string) (agent.ToolResult, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(args)
	res, err := tk.Call(ctx, agent.ToolRunProgram, b)
	if err != nil {
		t.Fatalf("run_program: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(res.Text), &m); err != nil {
		t.Fatalf("run_program result is not JSON: %v\n%s", err, res.Text)
	}
	return res, m
}

// TestProgramArm runs programs in a real kernel with the tabletop robot: a fresh namespace each time,
// every status, the program budget, workspace files, trace and accounting.
func TestProgramArm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := episodeConfig(t, func(c *testEpisode) {
		c.Arm, c.MaxPrograms, c.CellTimeoutS = spec.ArmProgram, 4, 20
	})
	ep, err := cfg.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Finish(context.Background(), "", nil) })
	tk := ep.Toolkit()
	var names []string
	for _, s := range tk.Tools() {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "run_program,finish" {
		t.Fatalf("tools %v, want run_program and finish", names)
	}
	if d := tk.Tools()[0].Description; !strings.HasSuffix(d, "You may call it at most 4 times.") {
		t.Errorf("description does not state the budget: %q", d)
	}
	prompt, _ := os.ReadFile(filepath.Join(cfg.Out, "prompt.txt"))
	if !strings.Contains(string(prompt), "`run_program(code)`") || strings.Contains(string(prompt), "ONE tool, `python(code)`") {
		t.Errorf("prompt.txt is not the program arm's:\n%.600s", prompt)
	}

	// Refused calls run nothing and do not count against the budget (they are tool_turns.json rows).
	for _, bad := range []string{`{}`, `{"code": "x", "path": "p.py"}`, `{"path": "../../etc/passwd"}`, `{"path": "missing.py"}`} {
		res, err := tk.Call(ctx, agent.ToolRunProgram, json.RawMessage(bad))
		if err != nil || !res.IsError || !strings.Contains(res.Text, "error") {
			t.Errorf("%s: got %+v, %v; want a refusal", bad, res, err)
		}
	}

	// 1: completed; what it defines stays in its own namespace.
	_, r1 := runProgram(t, ctx, tk, map[string]string{"code": "secret = 41\nimport json\n\ndef run(robo):\n    print('step', robo.state().step, secret + 1)\n"})
	if r1["status"] != agent.ProgramCompleted || !strings.Contains(r1["stdout"].(string), "42") || r1["programs_left"] != 3.0 {
		t.Fatalf("program 1: %v", r1)
	}
	// 2 (from a workspace file): the name program 1 defined is gone; a sandboxed import is refused.
	if err := os.WriteFile(filepath.Join(cfg.Out, "workspace", "p2.py"), []byte("def run(robo):\n    print(secret)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, r2 := runProgram(t, ctx, tk, map[string]string{"path": "p2.py"})
	if r2["status"] != agent.ProgramError || !strings.Contains(r2["exception"].(string), "NameError") || r2["programs_left"] != 2.0 {
		t.Fatalf("program 2 saw program 1's namespace: %v", r2)
	}
	// 3: the task, solved inside run(robo); the episode ends under it.
	res3, r3 := runProgram(t, ctx, tk, map[string]string{"code": solveProgram})
	if r3["status"] != agent.ProgramFinished || !res3.EpisodeDone || r3["reason"] == nil || r3["program"] != 3.0 || r3["file"] != "program_03.py" {
		t.Fatalf("program 3: %v", r3)
	}
	if s := ep.Success(); s == nil || !*s {
		t.Fatalf("the solving program did not succeed: %v", r3)
	}
	// 4: the budget still allows one; 5 is refused.
	_, r4 := runProgram(t, ctx, tk, map[string]string{"code": "def run(robo):\n    return robo.done\n"})
	if r4["status"] != agent.ProgramCompleted || r4["reason"] != nil || r4["programs_left"] != 0.0 {
		t.Fatalf("program 4: %v", r4)
	}
	res5, r5 := runProgram(t, ctx, tk, map[string]string{"code": "def run(robo):\n    pass\n"})
	if !res5.IsError || r5["error"] != "program budget exhausted (4); call finish" {
		t.Fatalf("program 5 was not refused: %v", r5)
	}
	fin, _ := json.Marshal(map[string]string{"status": "success", "summary": "stacked"})
	if _, err := tk.Call(ctx, "finish", fin); err != nil {
		t.Fatal(err)
	}
	result, err := ep.Finish(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if result.Arm != spec.ArmProgram || result.ToolTurns != 10 || result.Status != agent.StatusCompleted ||
		result.EnvironmentSuccess == nil || !*result.EnvironmentSuccess || result.StatefulCalls == 0 || result.EnvSteps == 0 {
		t.Errorf("result: arm %s turns %d status %s success %v stateful %d steps %d", result.Arm, result.ToolTurns, result.Status,
			result.EnvironmentSuccess, result.StatefulCalls, result.EnvSteps)
	}
	ws := filepath.Join(cfg.Out, "workspace")
	for i, want := range []string{"secret = 41", "print(secret)", "def place_on", "return robo.done"} {
		b, err := os.ReadFile(filepath.Join(ws, "program_0"+string(rune('1'+i))+".py"))
		if err != nil || !strings.Contains(string(b), want) || strings.Contains(string(b), "\nrun(robo)") {
			t.Errorf("program_0%d.py: %v %q", i+1, err, b)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(ws, "cell_*.py")); len(m) != 0 {
		t.Errorf("the program arm wrote cell files: %v", m)
	}
	// The trace holds each program as the cell that ran it, with its source in the metadata.
	nb := readTrace(t, cfg.Out)
	programs := 0
	for _, c := range nb.Cells {
		meta, _ := c.Metadata[notebooks.MetaKey].(map[string]any)
		if meta["tool"] == agent.ToolRunProgram {
			programs++
			args, _ := meta["args"].(map[string]any)
			src, _ := args["code"].(string)
			if !strings.HasSuffix(c.Source, "\n\nrun(robo)") || src == "" || !strings.HasPrefix(c.Source, strings.TrimSpace(src)) {
				t.Errorf("program cell %q (args %v)", c.Source, meta["args"])
			}
		}
	}
	if programs != 4 {
		t.Errorf("trace holds %d program cells, want 4", programs)
	}
}

// TestProgramArmWatchdog: a program that never returns is stopped by the watchdog (status timeout),
// and the episode goes on; one that breaks the sandbox ends in error without running.
func TestProgramArmWatchdog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := episodeConfig(t, func(c *testEpisode) {
		c.Arm, c.ProgramTimeoutS = spec.ArmProgram, 3
	})
	ep, err := cfg.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Finish(context.Background(), "", nil) })
	tk := ep.Toolkit()
	_, r1 := runProgram(t, ctx, tk, map[string]string{"code": "import time\n\ndef run(robo):\n    print('looping')\n    while True:\n        time.sleep(0.05)\n"})
	if r1["status"] != agent.ProgramTimeout || r1["programs_left"] != nil {
		t.Fatalf("program 1: %v", r1)
	}
	_, r2 := runProgram(t, ctx, tk, map[string]string{"code": "import os\n\ndef run(robo):\n    os.system('true')\n"})
	if r2["status"] != agent.ProgramError || !strings.Contains(r2["exception"].(string), "SandboxError") {
		t.Fatalf("program 2: %v", r2)
	}
	_, r3 := runProgram(t, ctx, tk, map[string]string{"code": "def helper():\n    return 7\n"})
	if r3["status"] != agent.ProgramError || !strings.Contains(r3["exception"].(string), "NameError") {
		t.Fatalf("a program without run(robo): %v", r3)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/atomicfile"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/report"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// resultFiles lists the run folders under a suite's episodes/ (each must appear once).
func resultFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(dir, "episodes"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "result.json" {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestEvalReplaySuite: a 2 tasks x 2 seeds x 2 arms replay suite runs end to end on 2 jobs (the
// tools arm replays the primitive calls of its cells twin), a rerun runs nothing and counts nothing
// twice, and its HTML report loads offline in Chromium with its plots drawn and its trace links
// resolving.
func TestEvalReplaySuite(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	dir := filepath.Join(t.TempDir(), "suite")
	args := []string{"--runtime", "replay", "--tasks", "stack_blocks,open_drawer", "--seeds", "0-1", "--jobs", "2", "--out", dir, "--images", "none"}
	var stdout, stderr bytes.Buffer
	if code := cmdEval(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	man, err := eval.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Order) != 8 {
		t.Fatalf("%d episodes in the manifest", len(man.Order))
	}
	// results.json is replaced whole (atomicfile): the statistics, mode 0644, no temp file left beside it
	resultsPath := filepath.Join(dir, "results.json")
	var results eval.Results
	if b, err := os.ReadFile(resultsPath); err != nil || json.Unmarshal(b, &results) != nil || results.Episodes != 8 || results.Finished != 8 {
		t.Errorf("results.json: %+v (%v)", results, err)
	}
	if fi, err := os.Stat(resultsPath); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("results.json mode: %v (%v)", fi, err)
	}
	if stale, _ := filepath.Glob(atomicfile.TempPattern(resultsPath)); len(stale) > 0 {
		t.Errorf("temp files left: %v", stale)
	}
	for _, id := range man.Order {
		st := man.Episodes[id]
		if st.Status != agent.StatusCompleted || st.Success == nil || !*st.Success || st.Attempts != 1 {
			t.Errorf("%s: %+v", id, st)
		}
		if st.Settings["images"] != "none" {
			t.Errorf("%s: settings %v", id, st.Settings)
		}
	}
	tools, err := readResult(filepath.Join(dir, "episodes", "tabletop/default/open_drawer/1/tools/replay", eval.SettingsTag(map[string]string{"images": "none"})))
	if err != nil || tools.Arm != spec.ArmTools || tools.ToolTurns < 2 || tools.Images != "none" {
		t.Fatalf("tools episode: %+v (%v)", tools, err)
	}
	// the suite forks its sealed episodes' robot servers (--fork-robots, the default)
	if tools.Seal == nil || tools.Seal.Robot != "server" || !tools.Seal.RobotServerForked {
		t.Errorf("the tools episode's robot server was not forked: %+v", tools.Seal)
	}
	out := stdout.String()
	for _, want := range []string{"success 100.0% (8/8)", "cells  success 100% [51, 100] (4/4", "pairs 4  jointly solved 4", "drawer", "stack"} {
		if !strings.Contains(out, want) {
			t.Errorf("results lack %q:\n%s", want, out)
		}
	}
	// The same command again: nothing to run, the same 8 run folders.
	stdout.Reset()
	stderr.Reset()
	if code := cmdEval(context.Background(), args, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "8 episodes, 0 to run") {
		t.Fatalf("rerun exit %d: %s", code, stderr.String())
	}
	if n := len(resultFiles(t, dir)); n != 8 {
		t.Errorf("%d result.json after the rerun", n)
	}
	man2, _ := eval.ReadManifest(dir)
	for _, id := range man2.Order {
		if man2.Episodes[id].Attempts != 1 {
			t.Errorf("%s ran again: %+v", id, man2.Episodes[id])
		}
	}
	// --status from "another shell".
	stdout.Reset()
	if code := cmdEval(context.Background(), []string{"--status", dir}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "suite not running: 8/8 finished") {
		t.Errorf("status exit %d:\n%s", code, stdout.String())
	}
	checkReportInChromium(t, dir)
	// eval -> report -> compare: the paper's table straight from the eval folder (replayed episodes call
	// no model: 0 calls, 0 tokens, $0)
	stdout.Reset()
	stderr.Reset()
	if code := cmdCompare(context.Background(), []string{"--format", "md", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("compare exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{
		"| benchmark | n | jointly solved | success tools (%) | success cells (%) | difference (points) | LLM calls | input tokens | cost (US$) |",
		"| tabletop | 4 | 4 | 100.0 [51.0, 100.0] | 100.0 [51.0, 100.0] | +0.0 [+0.0, +0.0] | 0.0 → 0.0 | 0 → 0 | $0 → $0 |",
		"| **All** | 4 | 4 | 100.0 [51.0, 100.0] |",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("compare --format md lacks %q:\n%s", want, stdout.String())
		}
	}
}

// checkAgentHTMLInChromium writes the suite's report and opens it and the trace of the episode under
// episode (its cell displayed htmlAttack) in Chromium: no payload runs, nothing is fetched off the page,
// the CSP is on both, and the cell's inert output is still there.
func checkAgentHTMLInChromium(t *testing.T, dir, episode string) {
	t.Helper()
	html := filepath.Join(t.TempDir(), "report.html")
	if err := report.Write(context.Background(), report.Options{SuiteDir: dir, Out: html, Traces: true}); err != nil {
		t.Fatal(err)
	}
	traces, _ := filepath.Glob(filepath.Join(dir, "episodes", filepath.FromSlash(episode), "*", "*", "trace.html"))
	if len(traces) != 1 {
		t.Fatalf("trace.html of %s: %v", episode, traces)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(traces[0]), "trace.ipynb")); err != nil || !strings.Contains(string(b), `"text/html": [`) {
		t.Fatalf("the episode's trace lacks the agent's HTML output (%v)", err)
	}
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "report_traces.mjs")
	cmd.Dir = filepath.Join(root, "e2e")
	cmd.Env = append(os.Environ(), "PAGES="+html+"\n"+traces[0])
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("report_traces.mjs: %v\n%s", err, out)
	}
	var seen []struct {
		Path                   string
		Blocked, Errors, Pwned []string
		CSP, Text              string
	}
	line := bytes.TrimSpace(out)
	if err := json.Unmarshal(line[bytes.LastIndexByte(line, '\n')+1:], &seen); err != nil || len(seen) != 2 {
		t.Fatalf("report_traces.mjs output %q: %v", out, err)
	}
	for _, s := range seen {
		if len(s.Pwned) > 0 || len(s.Blocked) > 0 || s.CSP != report.CSP {
			t.Errorf("%s: agent script ran %v, requests off the page %v, CSP %q", s.Path, s.Pwned, s.Blocked, s.CSP)
		}
	}
	if !strings.Contains(seen[1].Text, "HTML-ATTACK-SHOWN") {
		t.Errorf("the trace page lost the cell's inert output: %.400q", seen[1].Text)
	}
}

// checkReportInChromium writes the suite's report and opens it with e2e/report.mjs.
func checkReportInChromium(t *testing.T, dir string) {
	t.Helper()
	html := filepath.Join(t.TempDir(), "report.html")
	if err := report.Write(context.Background(), report.Options{SuiteDir: dir, Out: html, Traces: true}); err != nil {
		t.Fatal(err)
	}
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "e2e", "node_modules", "playwright-core")); err != nil {
		t.Fatalf("e2e/node_modules missing: run `npm ci` in e2e/ (scripts/setup.sh does): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "report.mjs")
	cmd.Dir = filepath.Join(root, "e2e")
	cmd.Env = append(os.Environ(), "REPORT="+html)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("report.mjs: %v\n%s", err, out)
	}
	var seen struct {
		Plots, DrawnPlots, Links, TracesOpened, ReportBlocked int
	}
	if err := json.Unmarshal(bytes.TrimSpace(out[bytes.LastIndexByte(bytes.TrimSpace(out), '\n')+1:]), &seen); err != nil {
		t.Fatalf("report.mjs output %q: %v", out, err)
	}
	if seen.Plots < 1 || seen.DrawnPlots != seen.Plots || seen.Links != 8 || seen.TracesOpened != 8 || seen.ReportBlocked != 0 {
		t.Errorf("report in Chromium: %+v", seen)
	}
}

// htmlAttack writes a workspace module (which the in-kernel check never reads) that displays active HTML
// when the next cell imports it: a script, an onerror handler, fetches off the page; each payload
// appends to window.__pwned.
const htmlAttack = "open('show.py', 'w').write(" + `"""from IPython.display import HTML, display
display(HTML('<script>window.__pwned = (window.__pwned || []).concat(["script"]); fetch("http://127.0.0.1:9/x")</script>'
             '<img src="x" onerror="window.__pwned = (window.__pwned || []).concat([\\'onerror\\'])">'
             '<iframe src="http://127.0.0.1:9/frame"></iframe><b>AGENT-HTML</b>'))
print("HTML-ATTACK-SHOWN")
""")
`

// scriptedAgent answers like a model: the cells arm runs the task's reference solution in one cell,
// then finishes; the tools arm gives up at once. One episode (open_drawer, seed 1, cells) runs a
// long cell instead, during which the test kills its kernel.
func scriptedAgent(t *testing.T, longCell chan<- struct{}) func(openaitest.Request) openaitest.Reply {
	solution := map[string]string{}
	for _, task := range []string{"stack_blocks", "open_drawer"} {
		cells, err := robotapi.SolutionCells("tabletop", task)
		if err != nil {
			t.Fatal(err)
		}
		solution[task] = strings.Join(cells, "\n")
	}
	return func(req openaitest.Request) openaitest.Reply {
		msgs, _ := json.Marshal(req.Messages())
		text := string(msgs)
		// The task card names the task; the worked examples name others (open_drawer among them).
		task := "stack_blocks"
		if strings.Contains(text, `- task: open_drawer\n`) {
			task = "open_drawer"
		}
		cellsArm := strings.Contains(string(req.Raw), `"name":"python"`)
		called := strings.Contains(text, `"role":"tool"`)
		finish := func(status string) openaitest.Reply {
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "finish", Arguments: fmt.Sprintf(`{"status": %q, "summary": "scripted"}`, status)}}}
		}
		attacker := task == "stack_blocks" && strings.Contains(text, `- seed: 0\n`) // issue 26's agent HTML
		python := func(src string) openaitest.Reply {
			code, _ := json.Marshal(map[string]string{"code": src})
			return openaitest.Reply{Content: "running the plan", ToolCalls: []openaitest.ToolCall{{Name: "python", Arguments: string(code)}}}
		}
		switch {
		case !cellsArm:
			return finish("failure")
		case attacker && !called:
			return python(htmlAttack)
		case attacker && strings.Count(text, `"role":"tool"`) == 1:
			return python("import show\n" + solution[task])
		case called:
			return finish("success")
		case task == "open_drawer" && strings.Contains(text, "- seed: 1"):
			select {
			case longCell <- struct{}{}:
			default:
			}
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "python", Arguments: `{"code": "import time; time.sleep(120)"}`}}}
		}
		return python(solution[task])
	}
}

// TestEvalOpenAISuite: the same matrix over the scripted OpenAI-compatible endpoint: tokens are
// counted per episode, the paired comparison is made, and the episode whose kernel is killed ends in
// error without stopping the suite.
func TestEvalOpenAISuite(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	srv := openaitest.New()
	defer srv.Close()
	longCell := make(chan struct{}, 1)
	reply := scriptedAgent(t, longCell)
	for range 64 {
		srv.Append(openaitest.Step{Func: reply})
	}
	dir := filepath.Join(t.TempDir(), "suite")
	args := []string{"--runtime", "openai", "--base-url", srv.BaseURL(), "--model", "scripted", "--tasks", "stack_blocks,open_drawer",
		"--seeds", "0-1", "--jobs", "2", "--out", dir, "--images", "none", "--max-connections", "1", "--json"}
	// Kill the long cell's kernel once the model has asked for it (checking the pid is this suite's kernel).
	stopKiller := make(chan struct{})
	killed := make(chan int, 1)
	go func() {
		select {
		case <-longCell:
		case <-stopKiller:
			return
		}
		run := filepath.Join(dir, "episodes", "tabletop/default/open_drawer/1/cells")
		for {
			matches, _ := filepath.Glob(filepath.Join(run, "*", "*", "result.json"))
			if len(matches) == 1 {
				if r, err := readResult(filepath.Dir(matches[0])); err == nil && r.KernelPID > 0 {
					if eval.OwnedKernel(r.KernelPID, dir, filepath.Dir(matches[0])) {
						syscall.Kill(-r.KernelPID, syscall.SIGKILL)
						killed <- r.KernelPID
						return
					}
				}
			}
			select {
			case <-stopKiller:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var stdout, stderr bytes.Buffer
	code := cmdEval(context.Background(), args, &stdout, &stderr)
	close(stopKiller)
	select {
	case <-killed:
	default:
		t.Fatalf("the long cell's kernel was never seen running:\n%s", stderr.String())
	}
	var final map[string]any
	events := map[string]int{}
	for line := range strings.Lines(stdout.String()) {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		events[fmt.Sprint(ev["event"])]++
		if ev["event"] == "results" {
			final = ev
		}
	}
	if code != 0 || final == nil || events["finish"] != 8 || events["start"] != 8 {
		t.Fatalf("exit %d events %v\n%s", code, events, stderr.String())
	}
	man, _ := eval.ReadManifest(dir)
	statuses := map[string]int{}
	for _, id := range man.Order {
		st := man.Episodes[id]
		statuses[st.Status]++
		crashed := strings.Contains(id, "open_drawer/1/cells")
		switch {
		case crashed && st.Status != agent.StatusError:
			t.Errorf("%s (kernel killed): %+v", id, st)
		case !crashed && st.Status != agent.StatusCompleted:
			t.Errorf("%s: %+v", id, st)
		case !crashed && st.InTok == 0:
			t.Errorf("%s: no input tokens counted", id)
		}
	}
	checkAgentHTMLInChromium(t, dir, "tabletop/default/stack_blocks/0/cells")
	res := eval.Analyze(eval.LoadRecords(dir, man))
	if len(res.Groups) != 1 || res.Groups[0].Paired == nil || res.Groups[0].Paired.Pairs != 4 {
		t.Fatalf("results %+v", res)
	}
	for _, a := range res.Groups[0].Arms {
		want := map[string]int{"cells": 3, "tools": 0}[a.Arm]
		if a.Solved != want {
			t.Errorf("%s solved %d, want %d", a.Arm, a.Solved, want)
		}
	}
}

// TestEvalResumeAfterKill: eval killed with SIGKILL mid-suite loses only the episode in flight:
// running the same command again keeps the finished episodes (not re-run), moves the interrupted
// attempt out of episodes/, ends its orphaned kernel and runs what is left; each episode is counted once.
func TestEvalResumeAfterKill(t *testing.T) {
	if raw := os.Getenv("PYRUALEAN_EVAL_CHILD"); raw != "" {
		var args []string
		json.Unmarshal([]byte(raw), &args)
		os.Exit(run(context.Background(), args, os.Stdout, os.Stderr))
	}
	nbtest.Heavy(t, heavyEpisode)
	dir := filepath.Join(t.TempDir(), "suite")
	args := []string{"--runtime", "replay", "--tasks", "stack_blocks,open_drawer", "--seeds", "0-1", "--arms", "cells", "--jobs", "1", "--out", dir, "--images", "none"}
	raw, _ := json.Marshal(append([]string{"eval"}, args...))
	cmd := exec.Command(os.Args[0], "-test.run=^TestEvalResumeAfterKill$")
	cmd.Env = append(os.Environ(), "PYRUALEAN_EVAL_CHILD="+string(raw))
	var childErr bytes.Buffer
	cmd.Stderr = &childErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once two episodes are done and the third is running with its kernel.
	deadline := time.Now().Add(2 * time.Minute)
	var inflight string
	var kernelPID int
	finished := map[string]string{}
	for time.Now().Before(deadline) && inflight == "" {
		time.Sleep(20 * time.Millisecond)
		man, err := eval.ReadManifest(dir)
		if err != nil {
			continue
		}
		done := map[string]string{}
		running := ""
		for _, id := range man.Order {
			st := man.Episodes[id]
			if st.Status == agent.StatusCompleted {
				done[id] = st.FinishedAt
			}
			if st.Status == eval.StateRunning {
				running = id
			}
		}
		if len(done) >= 2 && running != "" {
			if r, err := readResult(filepath.Join(dir, "episodes", running)); err == nil && r.KernelPID > 0 && r.Status == agent.StatusRunning {
				inflight, kernelPID, finished = running, r.KernelPID, done
			}
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if inflight == "" {
		t.Fatalf("never saw two finished episodes and one running; child stderr:\n%s", childErr.String())
	}
	var stdout, stderr bytes.Buffer
	if code := cmdEval(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("resume exit %d\n%s", code, stderr.String())
	}
	man, _ := eval.ReadManifest(dir)
	for id, at := range finished {
		if st := man.Episodes[id]; st.Attempts != 1 || st.FinishedAt != at {
			t.Errorf("%s finished before the kill but ran again: %+v", id, st)
		}
	}
	st := man.Episodes[inflight]
	if st.Status != agent.StatusCompleted || st.Attempts != 2 {
		t.Errorf("in-flight %s after resume: %+v", inflight, st)
	}
	if _, err := os.Stat(filepath.Join(dir, "attempts", inflight, "1", "result.json")); err != nil {
		t.Errorf("the interrupted attempt was not kept aside: %v", err)
	}
	if n := len(resultFiles(t, dir)); n != 4 {
		t.Errorf("%d run folders under episodes/, want 4", n)
	}
	if err := syscall.Kill(kernelPID, 0); err == nil {
		if env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", kernelPID)); bytes.Contains(env, []byte(eval.EvalEnv+"=")) {
			syscall.Kill(-kernelPID, syscall.SIGKILL)
			t.Errorf("the killed suite's kernel %d still runs", kernelPID)
		}
	}
	for _, id := range man.Order {
		if s := man.Episodes[id]; s.Status != agent.StatusCompleted {
			t.Errorf("%s: %+v", id, s)
		}
	}
}

// TestEvalRefusesBadMatrix: nothing runs when a row names an unknown robot, task, family, runtime
// or setting; the error names the row.
func TestEvalRefusesBadMatrix(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	good := `[[row]]
name = "ok"
tasks = "stack_blocks"
seeds = "0"
runtime = "replay"
`
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"robot", []string{"--robot", "nosuch", "--runtime", "replay"}, `row 1: unknown robot "nosuch"`},
		{"task", []string{"--tasks", "stack_blocks,nosuch", "--runtime", "replay"}, `row 1: tasks: unknown task "nosuch"`},
		{"family", []string{"--tasks", "family:nosuch", "--runtime", "replay"}, `row 1: tasks: no family "nosuch"`},
		{"runtime", []string{"--runtime", "gpt"}, `row 1: --runtime: unknown runtime "gpt"`},
		{"seeds", []string{"--seeds", "3-1", "--runtime", "replay"}, `row 1: seeds "3-1"`},
		{"arm", []string{"--arms", "cells,hands", "--runtime", "replay"}, `row 1: arm "hands"`},
		{"replay program", []string{"--arms", "cells,program", "--runtime", "replay"}, `row 1: arm program: the replay runtime has no reference program`},
		{"setting value", []string{"--images", "sometimes", "--runtime", "replay"}, `row 1: --images "sometimes"`},
		{"flag", []string{"--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{"matrix row", []string{"--matrix", write("m.toml", good+"[[row]]\nname = \"bad\"\ntasks = \"nosuch\"\nruntime = \"replay\"\n")}, `row 2 (bad): tasks: unknown task "nosuch"`},
		{"matrix setting", []string{"--matrix", write("s.toml", good+"[row.settings]\nwings = \"2\"\n")}, `row 1 (ok): setting "wings": no such setting`},
		{"matrix owned", []string{"--matrix", write("o.yaml", "rows:\n  - tasks: stack_blocks\n    runtime: replay\n    settings: {task: open_drawer}\n")}, `row 1: setting "task": the suite sets it`},
		{"matrix key", []string{"--matrix", write("k.toml", good+"colour = \"red\"\n")}, `unknown key "row.colour"`},
		{"matrix and flags", []string{"--matrix", write("g.toml", good), "--tasks", "all"}, "--tasks: the matrix file sets it"},
		{"engine", []string{"--runtime", "replay", "--engine", "spark"}, `--engine "spark": want local or ray`},
		{"ray address", []string{"--runtime", "replay", "--engine", "ray", "--ray-address", ""}, "--engine ray needs --ray-address"},
		{"ray address form", []string{"--runtime", "replay", "--engine", "ray", "--ray-address", "head:8265"}, `ray address "head:8265": want http://HEAD:8265`},
		{"ray jobs", []string{"--runtime", "replay", "--engine", "ray", "--ray-address", "http://127.0.0.1:9", "--jobs", "4"}, "--jobs, --boot-ahead: with --engine ray the cluster decides"},
		{"ray boot-ahead", []string{"--runtime", "replay", "--engine", "ray", "--ray-address", "http://127.0.0.1:9", "--boot-ahead", "2"}, "--jobs, --boot-ahead: with --engine ray"},
		{"boot-ahead", []string{"--runtime", "replay", "--boot-ahead", "-1"}, "--boot-ahead must be >= 0"},
		{"ray flag locally", []string{"--runtime", "replay", "--ray-gpus", "1"}, "--ray-gpus is for --engine ray"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
			var stdout, stderr bytes.Buffer
			code := cmdEval(context.Background(), append(c.args, "--out", out), &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, stderr %q, want %q", code, stderr.String(), c.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("the eval folder was created")
			}
		})
	}
}

// suiteProcesses lists the live processes started for the suite in dir (their environment names it).
func suiteProcesses(dir string) []int {
	abs, _ := filepath.Abs(dir)
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+eval.EvalEnv+"="+abs+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestEvalInterrupt: cancelling eval (Ctrl-C) mid-suite ends the running episode, starts nothing more, leaves no kernel behind, and says how to resume.
func TestEvalInterrupt(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	dir := filepath.Join(t.TempDir(), "suite")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			man, err := eval.ReadManifest(dir)
			if err != nil {
				continue
			}
			done, running := 0, 0
			for _, st := range man.Episodes {
				switch st.Status {
				case agent.StatusCompleted:
					done++
				case eval.StateRunning:
					running++
				}
			}
			if done >= 1 && running == 1 {
				cancel()
			}
		}
	}()
	var stdout, stderr bytes.Buffer
	args := []string{"--runtime", "replay", "--tasks", "stack_blocks,open_drawer", "--seeds", "0", "--jobs", "1", "--out", dir, "--images", "none"}
	code := cmdEval(ctx, args, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "run the same command again to resume") {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	man, _ := eval.ReadManifest(dir)
	// The episode in flight ends interrupted, or boot_error when Ctrl-C came during its boot (the
	// agent's word for it); either runs again on resume. With --boot-ahead (default 1) the next
	// episode may be booting or booted and waiting for the slot: it is cut too.
	statuses := map[string]int{}
	cut := 0
	for _, st := range man.Episodes {
		statuses[st.Status]++
		if st.Status == agent.StatusInterrupted || st.Status == agent.StatusBootError {
			cut++
		}
	}
	if statuses[agent.StatusCompleted] < 1 || cut < 1 || cut > 2 ||
		statuses[agent.StatusCompleted]+cut+statuses[eval.StatePending] != 4 {
		t.Errorf("statuses after Ctrl-C: %v", statuses)
	}
	if man.Runner.EndedAt == "" {
		t.Error("the manifest does not say the runner ended")
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(suiteProcesses(dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if p := suiteProcesses(dir); len(p) > 0 {
		t.Errorf("kernels left running: %v", p)
	}
}

// TestEvalMatrixFile: a TOML and a YAML matrix expand to the same episodes, one row's own settings
// win over the command line's, and the ids name every coordinate.
func TestEvalMatrixFile(t *testing.T) {
	dir := t.TempDir()
	tomlPath := filepath.Join(dir, "m.toml")
	yamlPath := filepath.Join(dir, "m.yaml")
	os.WriteFile(tomlPath, []byte(`name = "two rows"
[[row]]
name = "reference"
tasks = "family:stack"
seeds = "0-1"
arms = ["cells"]
runtime = "replay"
[row.settings]
images = "on-demand"

[[row]]
name = "endpoint"
tasks = "open_drawer"
seeds = "3"
runtime = "openai"
models = ["m1", "m2"]
[row.settings]
base-url = "http://127.0.0.1:9/v1"
max-turns = "5"
`), 0o644)
	os.WriteFile(yamlPath, []byte(`name: two rows
rows:
  - name: reference
    tasks: family:stack
    seeds: 0-1
    arms: [cells]
    runtime: replay
    settings: {images: on-demand}
  - name: endpoint
    tasks: open_drawer
    seeds: "3"
    runtime: openai
    models: [m1, m2]
    settings: {base-url: "http://127.0.0.1:9/v1", max-turns: "5"}
`), 0o644)
	var ids [2][]string
	for i, path := range []string{tomlPath, yamlPath} {
		fs, f := newEvalFlagSet(io.Discard)
		if err := fs.Parse([]string{"--matrix", path, "--images", "none"}); err != nil {
			t.Fatal(err)
		}
		plan, err := planEval(context.Background(), f, map[string]bool{"matrix": true, "images": true})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range plan.episodes {
			ids[i] = append(ids[i], e.ID)
		}
		// 4 stack tasks (with the _swap variants) x 2 seeds x cells, then open_drawer x seed 3 x 2 models x 2 arms.
		eps := plan.episodes
		if len(eps) != 12 || eps[0].Settings["images"] != "on-demand" || eps[8].Settings["images"] != "none" ||
			eps[8].Settings["max-turns"] != "5" || eps[8].Model != "m1" || eps[11].Model != "m2" || eps[11].Arm != spec.ArmTools {
			t.Fatalf("%s: episodes %+v", path, plan.episodes)
		}
		if !strings.HasPrefix(plan.episodes[0].ID, "tabletop/default/stack_blocks/0/cells/replay/s-") ||
			!strings.HasPrefix(plan.episodes[8].ID, "tabletop/default/open_drawer/3/cells/openai-m1/s-") {
			t.Errorf("ids %s, %s", plan.episodes[0].ID, plan.episodes[8].ID)
		}
	}
	if !slices.Equal(ids[0], ids[1]) {
		t.Errorf("TOML and YAML differ:\n%v\n%v", ids[0], ids[1])
	}
}

// TestEvalPaperMatrix: the committed experiment (experiments/embedded-cells-vs-tools.toml) is the
// README's flag command, 14 tasks x seeds 0-4 x both arms, in seed order: a run stopped part way holds
// whole seeds, and its folder resumes under either form (the same ids).
func TestEvalPaperMatrix(t *testing.T) {
	plans := map[string]*evalPlan{}
	for name, args := range map[string][]string{
		"matrix": {"--matrix", filepath.Join("..", "..", "experiments", "embedded-cells-vs-tools.toml")},
		"flags": {"--runtime", "local", "--model", "qwen2.5-coder-1.5b", "--tasks", "all", "--seeds", "0-4",
			"--arms", "cells,tools", "--max-turns", "5", "--budget-s", "600", "--images", "none"},
	} {
		fs, f := newEvalFlagSet(io.Discard)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		plan, err := planEval(context.Background(), f, set)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		plans[name] = plan
	}
	idsOf := func(p *evalPlan) []string {
		var ids []string
		for _, e := range p.episodes {
			ids = append(ids, e.ID)
		}
		return ids
	}
	m, fl := idsOf(plans["matrix"]), idsOf(plans["flags"])
	if len(m) != 14*5*2 {
		t.Fatalf("%d episodes, want 140", len(m))
	}
	if !slices.Equal(slices.Sorted(slices.Values(m)), slices.Sorted(slices.Values(fl))) {
		t.Errorf("the matrix and the flags name different episodes:\n%v\n%v", m, fl)
	}
	for i, e := range plans["matrix"].episodes {
		if want := i / 28; e.Seed != want || e.Arm != []string{spec.ArmCells, spec.ArmTools}[i%2] {
			t.Fatalf("episode %d is %s, want seed %d in seed order, cells before its tools twin", i, e.ID, want)
		}
	}
}

// TestEvalBootAhead: --jobs 1 lets one episode act at a time; --boot-ahead 1 (the default) has the
// next episode booting meanwhile (two attempts in flight), --boot-ahead 0 never does. Either way the
// episodes' actions (the kernel's own timestamps in each trace) never overlap.
func TestEvalBootAhead(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	for _, c := range []struct {
		ahead       string
		wantRunning int
	}{{"1", 2}, {"0", 1}} {
		t.Run("ahead"+c.ahead, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "suite")
			args := []string{"--runtime", "replay", "--tasks", "stack_blocks,open_drawer", "--seeds", "0", "--jobs", "1",
				"--boot-ahead", c.ahead, "--out", dir, "--images", "none", "--json"}
			var stdout, stderr bytes.Buffer
			if code := cmdEval(context.Background(), args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr.String())
			}
			maxRunning := 0
			for line := range strings.Lines(stdout.String()) {
				var ev eval.Event
				if json.Unmarshal([]byte(line), &ev) == nil && ev.Kind == eval.EventStart {
					maxRunning = max(maxRunning, ev.Running)
				}
			}
			if maxRunning != c.wantRunning {
				t.Errorf("at most %d attempts in flight, want %d", maxRunning, c.wantRunning)
			}
			type window struct {
				id         string
				start, end time.Time
			}
			var acts []window
			for _, res := range resultFiles(t, dir) {
				w := window{id: filepath.Dir(res)}
				w.start, w.end = actingWindow(t, filepath.Join(w.id, "trace.ipynb"))
				acts = append(acts, w)
			}
			if len(acts) != 4 {
				t.Fatalf("%d episodes", len(acts))
			}
			slices.SortFunc(acts, func(a, b window) int { return a.start.Compare(b.start) })
			for i := 1; i < len(acts); i++ {
				if acts[i].start.Before(acts[i-1].end) {
					t.Errorf("%s acted from %s, before %s ended at %s", acts[i].id, acts[i].start.Format(time.StampMicro),
						acts[i-1].id, acts[i-1].end.Format(time.StampMicro))
				}
			}
		})
	}
}

// actingWindow is when a trace's non-setup cells ran, from the kernel's execution timestamps.
func actingWindow(t *testing.T, trace string) (start, end time.Time) {
	t.Helper()
	nb, err := notebooks.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range nb.Cells {
		if c.CellType != notebooks.CellCode || notebooks.CellMetaOf(c).Author == notebooks.AuthorSetup {
			continue
		}
		ex, _ := c.Metadata["execution"].(map[string]any)
		in, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(ex["iopub.execute_input"]))
		idle, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(ex["iopub.status.idle"]))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: a cell without execution times: %v", trace, ex)
		}
		if start.IsZero() || in.Before(start) {
			start = in
		}
		if idle.After(end) {
			end = idle
		}
	}
	if start.IsZero() {
		t.Fatalf("%s: no agent cells", trace)
	}
	return start, end
}

// TestJobsFor: one episode per core, at most one per GiB available, at least one, whatever meminfo says.
func TestJobsFor(t *testing.T) {
	for _, c := range []struct {
		cpus    int
		meminfo string
		want    int
	}{
		{2, "MemTotal:       24000000 kB\nMemAvailable:   23000000 kB\n", 2},
		{16, "MemAvailable:    3145728 kB\n", 3},
		{4, "MemAvailable:     512000 kB\n", 1},
		{4, "", 4},
		{4, "MemAvailable:\n", 4},
		{4, "MemAvailable: lots kB\n", 4},
		{0, "", 1},
	} {
		if got := jobsFor(c.cpus, c.meminfo); got != c.want {
			t.Errorf("jobsFor(%d, %q) = %d, want %d", c.cpus, c.meminfo, got, c.want)
		}
	}
	if defaultJobs() < 1 {
		t.Error("defaultJobs < 1")
	}
}

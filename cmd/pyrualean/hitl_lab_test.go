package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/gateway/jupytertest"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// labBudgetS is the browser episode's wall-clock budget: the person's pause while a cell is held is
// longer than all of it.
const labBudgetS = 90

// labHolds is how many times the person pauses while the model decides (e2e/hitl.mjs HOLDS).
const labHolds = 5

// hostileFirstCell is the agent's first cell: text past ASCII (which the live document's cursor positions
// count apart: UTF-8 in pycrdt, UTF-16 in Yjs) and markup hoping the person's page runs it.
const hostileFirstCell = "print('agent cell 1')  # é → 🤖 </div><img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>\n" +
	"x = '\U0001F916' * 2000  # a long line of astral characters"

// pyCall is a scripted model reply calling the python tool.
func pyCall(code string) openaitest.Reply { return pyCalls(code) }

// pyCalls is a scripted model reply calling the python tool once per cell, in order.
func pyCalls(cells ...string) openaitest.Reply {
	var r openaitest.Reply
	for _, code := range cells {
		b, _ := json.Marshal(map[string]string{"code": code})
		r.ToolCalls = append(r.ToolCalls, openaitest.ToolCall{Name: "python", Arguments: string(b)})
	}
	return r
}

// TestLabLiveEpisode is issue #18's end-to-end check, in JupyterLab 4 in Debian's Chromium (e2e/hitl.mjs):
// an episode driven by the production OpenAI client against the scripted server runs sealed (robot
// server, kernel in bubblewrap) with --serve and --serve-linger; Lab lists its kernel without attach; attach makes
// the live notebook; in the browser the agent's cells appear without a reload, the person pauses while
// the model decides (five times: each cancels the model call; the bar shows the agent held, turn 2, the
// budget stopped, Pause pressed) and resumes, pauses from the toolbar, runs a cell queued behind the agent's (noticed), runs one that moves the robot, is told
// that the gateway refused a restart, steps,
// resumes, reloads in the middle of a streaming cell and loses nothing, sees the reply's next cell held
// (its code in the bar, above the notebook) through a reload and a pause longer than the whole budget,
// steps it, discards another, takes a third over as their own cell (Edit as mine), sees the end, works in the
// lingering kernel and sees the gateway go without a hanging cell. Then the run folder: the trace's
// tags and events, the person's calls in calls.jsonl and result.json, never the agent's. Screenshots
// of each step go to $PYRUALEAN_E2E_ARTIFACTS (else the test's temp dir); the live-output delay is logged.
func TestLabLiveEpisode(t *testing.T) {
	nbtest.Heavy(t, "an episode served to JupyterLab in Chromium")
	root, err := agent.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, need := range []string{"e2e/node_modules/playwright-core", ".venv/share/jupyter/labextensions/pyrualean-lab/package.json"} {
		if _, err := os.Stat(filepath.Join(root, need)); err != nil {
			t.Fatalf("%s missing: run scripts/setup.sh (%v)", need, err)
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatalf("Debian chromium missing (scripts/setup.sh installs it): %v", err)
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	slowDecision := openaitest.Step{Delay: 5 * time.Minute, Reply: pyCall("print('never decided')")}
	srv := openaitest.New(
		// The agent waits until the browser shows the live notebook, so its cells appear there live.
		openaitest.Step{Func: func(openaitest.Request) openaitest.Reply { <-release; return pyCall(hostileFirstCell) }},
		// The model "thinks" for minutes: the person pauses while it decides, which cancels the call, and
		// resumes, which asks again (labHolds times).
		slowDecision, slowDecision, slowDecision, slowDecision, slowDecision,
		// Agent cell 2 is long (25 s) so that the person's cell, written and run in Lab after the pause, is
		// still queued behind it on a loaded machine (7 s was too short with a local model on both cores).
		openaitest.Step{Reply: pyCall("import time\nfor i in range(100):\n    print(f'tick {i} {time.time():.3f}', flush=True)\n    time.sleep(0.25)")},
		openaitest.Step{Reply: pyCall("print('agent cell 3 sees', h)\nimport time\nfor i in range(16):\n    print(f'beat {i} {time.time():.3f}', flush=True)\n    time.sleep(0.2)")},
		// Two cells in one reply: the person pauses during the first, so the second is held (shown in the bar).
		openaitest.Step{Reply: pyCalls("import time\nfor i in range(12):\n    print(f'slow {i} {time.time():.3f}', flush=True)\n    time.sleep(0.4)",
			"print('held cell ran', 6 * 7)")},
		openaitest.Step{Reply: pyCalls("import time\nprint('pre-discard', flush=True)\ntime.sleep(3)", "print('discarded', 'cell')")},
		// The person takes the held cell over (Edit as mine), changes it and runs it as their own. Its
		// comment is markup an attacking agent hopes the person's page renders.
		openaitest.Step{Reply: pyCalls("import time\nprint('pre-edit', flush=True)\ntime.sleep(3)",
			"print('taken', 'over')  # </pre><img src=x onerror=\"window.__pwned=1\">")},
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "finish", Arguments: `{"status": "failure", "summary": "e2e"}`}}}},
	)
	defer srv.Close()
	defer releaseOnce.Do(func() { close(release) })
	// The second episode, started on the same gateway address once the first's is gone.
	srv2 := openaitest.New(openaitest.Step{Reply: pyCall("print('episode two', 6 * 7)")},
		openaitest.Step{Delay: 75 * time.Second, Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "finish", Arguments: `{"status": "failure", "summary": "two"}`}}}})
	defer srv2.Close()

	dir := t.TempDir()
	out := filepath.Join(dir, "run")
	const gwToken = "hitl-gateway-token"
	gw, done, playErr := servePlay(t, "--runtime", "openai", "--base-url", srv.BaseURL(), "--model", "scripted",
		"--task", "stack_blocks", "--out", out, "--sealed", "on", "--serve", "127.0.0.1:0", "--serve-token", gwToken, "--serve-linger", "15s",
		"--budget-s", strconv.Itoa(labBudgetS))
	lab := jupytertest.Start(t, "lab", gw, gwToken)

	// Without attach, Lab lists the episode's kernel (Running panel, "Connect to Existing Kernel") under
	// its own spec, apart from the launcher's pyrualean kernels.
	var kernels []struct{ ID, Name string }
	for deadline := time.Now().Add(30 * time.Second); len(kernels) == 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		lab.Get(t, "/api/kernels", &kernels)
	}
	if len(kernels) != 1 || kernels[0].Name != "pyrualean-episode-run" {
		t.Fatalf("Lab lists kernels %+v, want the episode's as pyrualean-episode-run", kernels)
	}
	var specs struct {
		Kernelspecs map[string]struct {
			Spec struct {
				DisplayName string `json:"display_name"`
			} `json:"spec"`
		} `json:"kernelspecs"`
	}
	lab.Get(t, "/api/kernelspecs", &specs)
	if d := specs.Kernelspecs["pyrualean-episode-run"].Spec.DisplayName; !strings.Contains(d, "live agent kernel") {
		t.Errorf("the episode's kernelspec in Lab: %q", d)
	}

	var attachOut, attachErr strings.Builder
	if code := cmdAttach(context.Background(), []string{"--gateway", gw, "--gateway-token", gwToken, "--server", lab.URL,
		"--server-token", lab.Token}, &attachOut, &attachErr); code != 0 || !strings.Contains(attachOut.String(), ", live") {
		t.Fatalf("attach: exit %d %s %s", code, attachOut.String(), attachErr.String())
	}

	artifacts := os.Getenv("PYRUALEAN_E2E_ARTIFACTS")
	if artifacts == "" {
		artifacts = filepath.Join(t.TempDir(), "screenshots")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	node := exec.CommandContext(ctx, "node", "hitl.mjs")
	node.Dir = filepath.Join(root, "e2e")
	node.Env = append(os.Environ(), "LAB_URL="+lab.URL, "LAB_TOKEN="+lab.Token, "NB_PATH=pyrualean-episodes/run.ipynb",
		"ARTIFACTS="+artifacts, "HOLDS="+strconv.Itoa(labHolds))
	stdout, _ := node.StdoutPipe()
	node.Stderr = node.Stdout
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	var latency, hold string
	var log strings.Builder
	firstCode := -1
	second := make(chan int, 1)
	var secondErr syncBuffer
	// The second play ends with the test, on its fatal paths too (it writes under dir, which the test
	// removes once it returns).
	secondCtx, stopSecond := context.WithCancel(context.Background())
	secondStarted := false
	defer func() {
		stopSecond()
		if secondStarted {
			select {
			case <-second:
			case <-time.After(time.Minute):
			}
		}
	}()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		switch {
		case line == "@@ready":
			releaseOnce.Do(func() { close(release) })
		case line == "@@gone":
			// The first episode's gateway is gone, Lab still open: a second episode is served on the same
			// address (the Lab's --gateway-url), as a person's next run would be.
			select {
			case firstCode = <-done:
			case <-time.After(time.Minute):
				t.Errorf("play did not end after its linger: %s", playErr.String())
			}
			secondStarted = true
			go func() {
				var o syncBuffer
				second <- cmdPlay(secondCtx, []string{"--runtime", "openai", "--base-url", srv2.BaseURL(), "--model", "scripted",
					"--task", "stack_blocks", "--out", filepath.Join(dir, "two"), "--sealed", "off", "--serve", strings.TrimPrefix(gw, "http://"),
					"--serve-token", gwToken, "--serve-linger", "20s"}, &o, &secondErr)
			}()
		case strings.HasPrefix(line, "@@latency "):
			latency = strings.TrimPrefix(line, "@@latency ")
		case strings.HasPrefix(line, "@@hold "):
			hold = strings.TrimPrefix(line, "@@hold ")
		}
	}
	nodeErr := node.Wait()
	t.Logf("hitl.mjs (screenshots in %s):\n%s", artifacts, log.String())
	if nodeErr != nil {
		t.Fatalf("the browser steps failed: %v\nplay stderr:\n%s\nthe second play's stderr:\n%s", nodeErr, playErr.String(), secondErr.String())
	}
	t.Logf("delay from an agent cell's output in the kernel to the browser, vs a person's own cell: %s", latency)
	t.Logf("Pause clicked while the model decides → the bar shows the agent held: %s", hold)
	if firstCode != 0 {
		t.Fatalf("play exit %d: %s", firstCode, playErr.String())
	}
	select {
	case code := <-second:
		secondStarted = false // read: the deferred wait has nothing to wait for
		if code != 0 {
			t.Errorf("the second episode's play: exit %d: %s", code, secondErr.String())
		}
	case <-time.After(3 * time.Minute):
		t.Errorf("the second episode's play did not end after its linger: %s", secondErr.String())
	}
	checkLiveRun(t, out, srv.Requests())
	// Both episodes' gateways are gone (the first's kernel was adopted into Lab's kernel manager): Lab stops on SIGTERM.
	if took, err := lab.Stop(20 * time.Second); err != nil {
		t.Errorf("%v (after %v)", err, took)
	} else {
		t.Logf("JupyterLab stopped on SIGTERM in %v", took.Round(time.Millisecond))
	}
}

// checkLiveRun checks the run folder and what the model was told after the browser steps.
func checkLiveRun(t *testing.T, out string, reqs []openaitest.Request) {
	t.Helper()
	nb, err := notebooks.ReadFile(filepath.Join(out, "trace.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	var humans []notebooks.CellMeta
	var after []string
	for _, c := range nb.Cells {
		m := notebooks.CellMetaOf(c)
		tags, _ := c.Metadata["tags"].([]any)
		if m.AfterEnd {
			// The person's post-mortem cell (after the end, in the lingering kernel): theirs, after the end.
			after = append(after, fmt.Sprintf("%v %v", tags, strings.Contains(c.Source, "post-mortem")))
			continue
		}
		if m.Author == notebooks.AuthorHuman {
			humans = append(humans, m)
			if len(tags) == 0 || tags[0] != notebooks.TagHuman {
				t.Errorf("a person's cell without the human tag: %v", c.Metadata)
			}
		}
	}
	if len(humans) != 3 || humans[1].Ledger == nil || humans[1].Ledger.StatefulCalls != 1 || humans[1].Ledger.EnvSteps == 0 {
		t.Errorf("people's cells in the trace: %+v", humans)
	}
	var kinds []string
	for _, ev := range notebooks.ParseEpisodeMeta(nb.Metadata).Events {
		kinds = append(kinds, ev.Kind)
	}
	wantEvents := strings.Repeat("pause resume ", labHolds) + "pause step resume pause step resume pause discard resume pause discard resume"
	if strings.Join(kinds, " ") != wantEvents {
		t.Errorf("trace events %v, want %s", kinds, wantEvents)
	}
	var res agent.Result
	b, _ := os.ReadFile(filepath.Join(out, "result.json"))
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Sealed {
		t.Errorf("the episode was not sealed: %+v", res.Seal)
	}
	if strings.Join(after, ";") != "[human after-end] true" || res.HumanCellsAfterEnd != 1 {
		t.Errorf("cells after the end in the trace %q, in result.json %d; want the post-mortem cell once", after, res.HumanCellsAfterEnd)
	}
	if res.StatefulCalls != 0 || res.EnvSteps != 0 || res.HumanCells != 3 || res.HumanStatefulCalls != 1 || res.HumanEnvSteps == 0 || res.ToolTurns != 10 { // 7 cells run, 2 discarded, finish
		t.Errorf("result.json: agent stateful %d steps %d, person cells %d stateful %d steps %d, turns %d",
			res.StatefulCalls, res.EnvSteps, res.HumanCells, res.HumanStatefulCalls, res.HumanEnvSteps, res.ToolTurns)
	}
	f, err := os.Open(filepath.Join(out, "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var byPerson []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c map[string]any
		json.Unmarshal(sc.Bytes(), &c)
		if c["author"] == "human" {
			byPerson = append(byPerson, fmt.Sprintf("%v@%v", c["tool"], c["human_cell"]))
		} else if c["author"] != "agent" {
			t.Errorf("calls.jsonl line without an author: %v", c)
		}
	}
	if strings.Join(byPerson, " ") != "move_to@2 state@2" {
		t.Errorf("the person's calls in calls.jsonl: %v", byPerson)
	}
	// A pause longer than the whole budget: paused time is not the agent's.
	if res.Status == agent.StatusTimeout || res.PausedS <= labBudgetS || res.PolicyWallS >= labBudgetS {
		t.Errorf("result.json: status %s, paused_s %.1f, policy_wall_s %.1f (budget %d s)", res.Status, res.PausedS, res.PolicyWallS, labBudgetS)
	}
	turns, err := agent.ReadTurns(filepath.Join(out, "turns.jsonl"))
	cancelled := 0
	for _, tr := range turns {
		if tr.Cancelled {
			cancelled++
		}
	}
	if err != nil || cancelled != labHolds {
		t.Errorf("turns.jsonl: the call the Pause cut is not marked cancelled: %+v (%v)", turns, err)
	}
	// The decision after the step was told, before the model call, that the person moved the robot.
	if len(reqs) != 7+labHolds {
		t.Fatalf("%d model calls, want %d", len(reqs), 7+labHolds)
	}
	told, _ := json.Marshal(reqs[2+labHolds].Messages())
	if !strings.Contains(string(told), "MOVED THE ROBOT") || !strings.Contains(string(told), "hello from a person") {
		t.Errorf("the third decision was not told about the person's cells: %s", agent.TrimMiddle(string(told), 3000))
	}
	// The last decision knows its held cell was discarded and what the person ran instead (Edit as mine).
	last, _ := json.Marshal(reqs[len(reqs)-1].Messages())
	if tail := string(last)[max(0, len(last)-6000):]; !strings.Contains(tail, "discarded this call") || !strings.Contains(tail, "edited") {
		t.Errorf("the last decision was not told of the takeover: %s", agent.TrimMiddle(tail, 3000))
	}
}

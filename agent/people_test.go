package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/spec"
)

// callsLines reads the run folder's calls.jsonl.
func callsLines(t *testing.T, dir string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("calls.jsonl line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// person runs cells in an episode's kernel the way a person's do: through the gateway, which hands
// every request to the episode's PersonKernel.Forward (gateway/kernel_adapter.go), and reads the
// replies the kernel client fans out to every subscriber.
type person struct{ ep *agent.Episode }

// attachPerson is a person working in the episode's kernel.
func attachPerson(t *testing.T, ep *agent.Episode) person {
	t.Helper()
	return person{ep: ep}
}

// Execute runs code as the person's cell and returns its reply status, streams and errors.
func (p person) Execute(ctx context.Context, code string, _ kernel.ExecuteOptions) (*kernel.ExecuteResult, error) {
	m, err := kernel.NewMessage("execute_request", map[string]any{"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
	if err != nil {
		return nil, err
	}
	sub, cancel := p.ep.Kernel().Client().Subscribe(4096)
	defer cancel()
	if err := p.ep.PersonKernel().Forward(kernel.Shell, m); err != nil {
		return nil, err
	}
	res := &kernel.ExecuteResult{MsgID: m.MsgID}
	gotReply, gotIdle := false, false
	for !gotReply || !gotIdle {
		select {
		case r, ok := <-sub:
			if !ok {
				return nil, fmt.Errorf("the kernel client closed")
			}
			if r.ParentMsgID != m.MsgID {
				continue
			}
			var c struct {
				Status, Name, Text, Ename, Evalue, ExecutionState string `json:"-"`
			}
			var raw map[string]any
			_ = json.Unmarshal(r.Content, &raw)
			c.Status, _ = raw["status"].(string)
			c.Name, _ = raw["name"].(string)
			c.Text, _ = raw["text"].(string)
			c.ExecutionState, _ = raw["execution_state"].(string)
			switch {
			case r.Channel == kernel.Shell && r.MsgType == "execute_reply":
				gotReply, res.Status = true, c.Status
			case r.MsgType == "status" && c.ExecutionState == "idle":
				gotIdle = true
			case r.MsgType == "stream":
				res.Outputs = append(res.Outputs, notebooks.Output{OutputType: notebooks.OutputStream, Name: c.Name, Text: c.Text})
			}
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	return res, nil
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Errorf("timed out waiting for %s", what)
			return
		}
	}
}

// TestPersonsRobotCallsAreTheirs: a person's robot calls (a move and a state read, typed in their own
// session) are recorded under the person's cell and never charged to the agent: calls.jsonl says
// author human, result.json counts them as human_*, the agent's feedback says it did not move, and
// its next decision is told plainly that the person moved the robot, with fresh images. Sealed or
// not: in the robot server the report window is the judge's own.
func TestPersonsRobotCallsAreTheirs(t *testing.T) {
	for _, sealed := range []string{spec.SealOff, spec.SealOn} {
		t.Run("sealed="+sealed, func(t *testing.T) {
			srv := openaitest.New(call(py("s = robo.state()\nprint('agent sees', s.step > 0)")), call(finish("failure", "x")))
			defer srv.Close()
			cfg := episodeConfig(t, func(c *testEpisode) { c.Sealed = sealed })
			res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), func(ep *agent.Episode) {
				c := attachPerson(t, ep)
				r, err := c.Execute(t.Context(), "m = robo.move_to([0.5, 0.05, 0.3])\nprint('person moved', robo.state().step > 0)", kernel.ExecuteOptions{})
				if err != nil || r.Status != "ok" {
					t.Fatalf("person's cell: %v %+v", err, r)
				}
			})
			if res.Calls != 1 || res.StatefulCalls != 0 || res.EnvSteps != 0 {
				t.Errorf("agent charged: calls %d stateful %d env_steps %d, want 1, 0, 0", res.Calls, res.StatefulCalls, res.EnvSteps)
			}
			if res.HumanCells != 1 || res.HumanCalls != 2 || res.HumanStatefulCalls != 1 || res.HumanEnvSteps == 0 {
				t.Errorf("person's share: cells %d calls %d stateful %d env_steps %d, want 1, 2, 1, >0",
					res.HumanCells, res.HumanCalls, res.HumanStatefulCalls, res.HumanEnvSteps)
			}
			// The first decision is told, with the person's fresh images (on-motion policy).
			msgs := srv.Requests()[0].Messages()
			last := msgs[len(msgs)-1]
			parts, _ := last["content"].([]any)
			text, _ := json.Marshal(last)
			if !strings.Contains(string(text), "MOVED THE ROBOT") || !strings.Contains(string(text), "move_to") || len(parts) < 2 {
				t.Errorf("the first decision's message about the person: %s", TrimForLog(string(text)))
			}
			var fb struct {
				Stdout   string `json:"stdout"`
				Moved    bool   `json:"moved"`
				EnvSteps int    `json:"env_steps"`
				Calls    []any  `json:"primitive_calls"`
			}
			if err := json.Unmarshal([]byte(lastToolText(t, srv.Requests()[1])), &fb); err != nil {
				t.Fatal(err)
			}
			if fb.Moved || fb.EnvSteps != 0 || len(fb.Calls) != 1 || fb.Stdout != "agent sees True\n" {
				t.Errorf("the agent's cell feedback: %+v", fb)
			}
			var human, agentCalls []string
			for _, l := range callsLines(t, cfg.Out) {
				switch l["author"] {
				case "human":
					if l["human_cell"] != float64(1) {
						t.Errorf("a person's call without its cell: %v", l)
					}
					human = append(human, l["tool"].(string))
				case "agent":
					if l["cell"] != float64(1) {
						t.Errorf("an agent call without its cell: %v", l)
					}
					agentCalls = append(agentCalls, l["tool"].(string))
				default:
					t.Errorf("calls.jsonl line without an author: %v", l)
				}
			}
			if strings.Join(human, ",") != "move_to,state" || strings.Join(agentCalls, ",") != "state" {
				t.Errorf("calls.jsonl: person %v, agent %v", human, agentCalls)
			}
			hc := cellsBy(readTrace(t, cfg.Out), "human")
			if len(hc) != 1 {
				t.Fatalf("human cells: %d", len(hc))
			}
			m := notebooks.CellMetaOf(hc[0])
			if m.HumanCell != 1 || m.Ledger == nil || m.Ledger.Calls != 2 || m.Ledger.StatefulCalls != 1 || m.Ledger.EnvSteps != res.HumanEnvSteps {
				t.Errorf("the person's trace cell: %+v ledger %+v", m, m.Ledger)
			}
			if tags, _ := hc[0].Metadata["tags"].([]any); len(tags) != 1 || tags[0] != notebooks.TagHuman {
				t.Errorf("the person's cell tags: %v", hc[0].Metadata["tags"])
			}
		})
	}
}

// TrimForLog keeps test failure messages readable (images are long).
func TrimForLog(s string) string { return agent.TrimMiddle(s, 1500) }

// TestPersonHoldsReplansAndInterrupts: a pause that comes while the agent's first cell of a reply
// runs holds the reply's next cell (shown as the held cell); a person's cell meanwhile makes that cell stale, so it is not run
// and the model decides again, told why. Then a person interrupts a running agent cell: the agent is
// told it was the person, the trace cell says so and carries raises-exception, and the events are in
// the trace.
func TestPersonHoldsReplansAndInterrupts(t *testing.T) {
	srv := openaitest.New(
		call(py("print('first')")),
		call(py("import time\nt0 = time.time()\nwhile time.time() - t0 < 1.5:\n    pass\nprint('slow')"), py("print('stale plan')")),
		call(py("print('replanned', h)")),
		call(py("import time\nprint('sleeping', flush=True)\ntime.sleep(60)")),
		call(finish("failure", "interrupted")),
	)
	defer srv.Close()
	cfg := episodeConfig(t, nil)
	var held *agent.CellInfo
	res, ep := playEpisode(t, cfg, openaiConfig(srv, nil), func(ep *agent.Episode) {
		c := attachPerson(t, ep)
		go func() {
			waitUntil(t, "the slow cell", func() bool {
				r := ep.Status().Running
				return r != nil && strings.Contains(r.Code, "slow")
			})
			ep.Controller().Pause() // while the reply's first cell runs
			waitUntil(t, "the held cell", func() bool { return ep.Status().Phase == "held" })
			held = ep.Status().Held
			if _, err := c.Execute(context.Background(), "h = 'from a person'", kernel.ExecuteOptions{}); err != nil {
				t.Error(err)
			}
			waitUntil(t, "the person's cell", func() bool { return ep.Status().HumanCells == 1 })
			ep.Controller().Resume()
			waitUntil(t, "the sleeping cell", func() bool {
				r := ep.Status().Running
				return r != nil && strings.Contains(r.Code, "sleep") && r.MsgID != ""
			})
			time.Sleep(500 * time.Millisecond) // into time.sleep
			if err := ep.PersonKernel().Interrupt(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	})
	if held == nil || held.Code != "print('stale plan')" {
		t.Errorf("held cell shown as %+v", held)
	}
	reqs := srv.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d model calls, want 5", len(reqs))
	}
	if fb := lastToolText(t, reqs[2]); !strings.Contains(fb, `"not_run": true`) || !strings.Contains(fb, "h = 'from a person'") {
		t.Errorf("the held cell's result: %s", fb)
	}
	if fb := lastToolText(t, reqs[3]); !strings.Contains(fb, "replanned from a person") {
		t.Errorf("the re-planned cell: %s", fb)
	}
	fb := lastToolText(t, reqs[4])
	if !strings.Contains(fb, "A person interrupted this cell") || !strings.Contains(fb, "KeyboardInterrupt") {
		t.Errorf("the interrupted cell's feedback: %s", fb)
	}
	nb := readTrace(t, cfg.Out)
	var sources []string
	for _, c := range cellsBy(nb, "agent") {
		sources = append(sources, c.Source)
		if strings.Contains(c.Source, "sleep") {
			m := notebooks.CellMetaOf(c)
			tags, _ := c.Metadata["tags"].([]any)
			if m.InterruptedBy != "person" || len(tags) != 1 || tags[0] != notebooks.TagRaisesException {
				t.Errorf("interrupted cell: meta %+v tags %v", m, tags)
			}
		}
	}
	if strings.Contains(strings.Join(sources, "\n"), "stale plan") || res.ToolTurns != 6 {
		t.Errorf("the stale cell ran, or tool turns %d != 6 (4 cells, the held call not run, finish): %q", res.ToolTurns, sources)
	}
	var kinds []string
	for _, ev := range notebooks.ParseEpisodeMeta(nb.Metadata).Events {
		kinds = append(kinds, ev.Kind)
	}
	if strings.Join(kinds, " ") != "pause resume replan interrupt" {
		t.Errorf("trace events %v", kinds)
	}
	// The events are in the trace for a person to read, where they happened: the stale cell's code too.
	var notes []string
	for _, c := range nb.Cells {
		if notebooks.CellMetaOf(c).Kind == "event" {
			notes = append(notes, c.Source)
		}
	}
	if len(notes) != 4 || !strings.Contains(notes[2], "**Not run**") || !strings.Contains(notes[2], "> print('stale plan')") ||
		!strings.Contains(notes[3], "**Interrupted** by a person (agent cell 4)") {
		t.Errorf("event notes in the trace: %q", notes)
	}
	if st := ep.Status(); st.State != "over" {
		t.Errorf("status after the end: %+v", st)
	}
	if err := ep.Controller().Pause(); err == nil {
		t.Error("pause after the end was accepted")
	}
}

// TestPersonsCellsAfterTheEnd: in a kernel kept after the end (play --serve-linger), a person's cells
// still go to the trace, tagged human and after-end, counted in result.json's human_cells_after_end and
// never in the episode's own counts; once the kernel goes (Close), the trace is final. Sealed or not.
func TestPersonsCellsAfterTheEnd(t *testing.T) {
	for _, sealed := range []string{spec.SealOff, spec.SealOn} {
		t.Run("sealed="+sealed, func(t *testing.T) {
			srv := openaitest.New(call(finish("failure", "x")))
			defer srv.Close()
			cfg := episodeConfig(t, func(c *testEpisode) { c.Sealed = sealed })
			var kept *agent.Episode
			res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), func(ep *agent.Episode) {
				ep.KeepKernel(time.Now().Add(time.Minute))
				kept = ep
			})
			if res.HumanCells != 0 || res.HumanCellsAfterEnd != 0 {
				t.Fatalf("at the end: human cells %d, after the end %d", res.HumanCells, res.HumanCellsAfterEnd)
			}
			p := attachPerson(t, kept)
			for _, code := range []string{"print('post-mortem', robo.state().step)", "1/0"} {
				if _, err := p.Execute(t.Context(), code, kernel.ExecuteOptions{}); err != nil {
					t.Fatalf("a person's cell after the end: %v", err)
				}
			}
			var after agent.Result
			waitUntil(t, "result.json to count the cells after the end", func() bool {
				b, _ := os.ReadFile(filepath.Join(cfg.Out, "result.json"))
				return json.Unmarshal(b, &after) == nil && after.HumanCellsAfterEnd == 2
			})
			kept.Close(context.Background())
			// Close waits for the cells after the end and saves result.json last: the final count stays.
			b, _ := os.ReadFile(filepath.Join(cfg.Out, "result.json"))
			var final agent.Result
			if err := json.Unmarshal(b, &final); err != nil || final.HumanCellsAfterEnd != 2 {
				t.Errorf("result.json after Close: %v, human_cells_after_end %d, want 2", err, final.HumanCellsAfterEnd)
			}
			if after.HumanCells != 0 || after.Status != res.Status || after.ToolTurns != res.ToolTurns {
				t.Errorf("the episode's counts changed after the end: %+v, was %+v", after, res)
			}
			hc := cellsBy(readTrace(t, cfg.Out), "human")
			if len(hc) != 2 {
				t.Fatalf("people's cells in the trace: %d, want 2", len(hc))
			}
			for i, want := range []string{"[human after-end]", "[human after-end raises-exception]"} {
				if got := fmt.Sprint(hc[i].Metadata["tags"]); got != want {
					t.Errorf("cell %d tags %s, want %s", i, got, want)
				}
				if m := notebooks.CellMetaOf(hc[i]); !m.AfterEnd || m.Ledger != nil {
					t.Errorf("cell %d meta %+v", i, m)
				}
			}
			if !strings.Contains(fmt.Sprint(hc[0].Outputs), "post-mortem") {
				t.Errorf("the post-mortem cell's outputs: %v", hc[0].Outputs)
			}
		})
	}
}

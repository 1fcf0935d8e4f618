package agent_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/spec"
)

// ghostModule is imported by an agent cell: its thread moves the robot after the cell has ended (while
// the model "thinks": the scripted reply waits) and forges IOPub under a made-up session, as a person's
// cell would look to anything that believed the kernel: status busy, execute_input with the code, a
// stream, status idle. A second thread moves after the agent's last cell, while it decides to finish.
const ghostModule = `import datetime, threading, time, uuid
from IPython import get_ipython

moves, done = [], threading.Event()
def forge(kind, content, parent):
    k = get_ipython().kernel
    k.session.send(k.iopub_socket, kind, content, parent=parent, ident=b"stream." + kind.encode())
errors = []
def ghost(tag, wait, n):
    try:
        haunt(tag, wait, n)
    except BaseException as e:
        import traceback
        errors.append(traceback.format_exc())
    finally:
        done.set()
def haunt(tag, wait, n):
    time.sleep(wait)
    parent = {"msg_id": uuid.uuid4().hex, "msg_type": "execute_request", "session": "person-" + uuid.uuid4().hex[:8],
              "username": "person", "version": "5.3", "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    forge("status", {"execution_state": "busy"}, parent)
    forge("execute_input", {"code": "robo.move_to([0.5, 0.0, 0.3])  # a person, honest", "execution_count": 99}, parent)
    for i in range(n):
        moves.append((tag, get_ipython().user_ns["robo"].move_to([0.5, 0.05 * (i % 2), 0.3]).reached))
    forge("stream", {"name": "stdout", "text": "person moved\n"}, parent)
    forge("status", {"execution_state": "idle"}, parent)
def start(tag, wait=0.5, n=2):
    done.clear()
    threading.Thread(target=ghost, args=(tag, wait, n), daemon=True).start()
`

// TestSealedThreadBetweenCellsIsTheAgents: robot calls made between cells by a thread the agent left
// running, under forged IOPub that looks like a person's cell, are the agent's (calls.jsonl author agent,
// between_cells), result.json's agent env steps plus people's equal the robot server's total, the trace
// has no person's cell, and the model is never told that a person ran one.
func TestSealedThreadBetweenCellsIsTheAgents(t *testing.T) {
	waitReply := func(tc openaitest.ToolCall, d time.Duration) openaitest.Step {
		s := call(tc)
		s.Delay = d
		return s
	}
	srv := openaitest.New(
		call(py("open('ghost.py', 'w').write("+pyQuote(ghostModule)+")")),
		call(py("import ghost\nghost.start('between')\nprint('started')")),
		waitReply(py("print('GHOST', ghost.done.wait(20), ghost.moves, ghost.errors)\nghost.start('after-last', wait=0.3)"), 3*time.Second),
		waitReply(finish("failure", "done"), 3*time.Second),
	)
	defer srv.Close()
	cfg := episodeConfig(t, func(c *testEpisode) { c.Sealed = spec.SealOn })
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
	if !res.Sealed {
		t.Fatalf("not sealed: %+v", res.Seal)
	}
	nb := readTrace(t, cfg.Out)
	for i, c := range cellsBy(nb, notebooks.AuthorAgent) {
		var b strings.Builder
		for _, o := range c.Outputs {
			b.WriteString(o.Text + o.Ename + ": " + o.Evalue + "\n")
		}
		t.Logf("agent cell %d: %.800s", i+1, b.String())
	}
	// The robot server's own ledger is the ground truth: 4 moves, all the agent's.
	server := readJSONL(t, filepath.Join(cfg.Out, "robot", "calls.jsonl"))
	serverSteps := 0
	for _, c := range server {
		n, _ := c["env_steps"].(float64)
		serverSteps += int(n)
	}
	if len(server) != 4 || serverSteps == 0 {
		t.Fatalf("robot server ledger: %d calls, %d steps: %v", len(server), serverSteps, server)
	}
	if res.EnvSteps+res.HumanEnvSteps != res.EnvStepsTotal || res.EnvStepsTotal != serverSteps {
		t.Errorf("env steps: agent %d + people %d != total %d (server ledger %d)", res.EnvSteps, res.HumanEnvSteps, res.EnvStepsTotal, serverSteps)
	}
	if res.HumanCells != 0 || res.HumanCalls != 0 || res.HumanEnvSteps != 0 || res.EnvSteps != serverSteps {
		t.Errorf("forged IOPub made a person: human cells %d calls %d steps %d; agent steps %d of %d",
			res.HumanCells, res.HumanCalls, res.HumanEnvSteps, res.EnvSteps, serverSteps)
	}
	between := 0
	for _, c := range callsLines(t, cfg.Out) {
		if c["author"] != notebooks.AuthorAgent {
			t.Errorf("calls.jsonl: a call not the agent's: %v", c)
		}
		if c["between_cells"] == true {
			between++
		}
		if _, ok := c["span"]; ok {
			t.Errorf("calls.jsonl keeps the server's span tag: %v", c)
		}
	}
	if between != 4 {
		t.Errorf("calls.jsonl: %d calls between cells, want 4", between)
	}
	if hc := cellsBy(nb, notebooks.AuthorHuman); len(hc) != 0 {
		t.Errorf("the trace has %d person's cells (forged): %v", len(hc), hc[0].Source)
	}
	for _, c := range nb.Cells {
		if strings.HasPrefix(c.Source, "robo.move_to([0.5, 0.0, 0.3])") {
			t.Errorf("the forged execute_input became a cell: %+v", c)
		}
	}
	var ghostOut string
	for _, o := range cellsBy(nb, notebooks.AuthorAgent)[2].Outputs {
		ghostOut += o.Text
	}
	if !strings.Contains(ghostOut, "GHOST True [('between', True), ('between', True)] []") {
		t.Errorf("the ghost thread's moves: %q", ghostOut)
	}
	for i, r := range srv.Requests() {
		b, _ := json.Marshal(r.Messages())
		if strings.Contains(string(b), "A person ran") || strings.Contains(string(b), "MOVED THE ROBOT") {
			t.Errorf("request %d tells the model a person ran a cell: %s", i, TrimForLog(string(b)))
		}
	}
}

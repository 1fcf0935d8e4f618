package agent_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/spec"
)

// floodModule is imported from the workspace (the in-kernel source check never sees it): a 63 MB body
// through the proxy's own client, and 1,500 idle connections from a thread.
const floodModule = `import os, socket, threading
from IPython import get_ipython
from pyrualean_robot.robots.rpent import EnvServerClient
SOCK = os.environ["PYRUALEAN_ROBOT_SERVER"]
held = []
def body():
    try:
        get_ipython().user_ns["robo"]._client.call("robot.call", "move_to", ["x" * (63 << 20)], {})
        return "BODY SENT"
    except Exception as e:
        return "BODY %s %s" % (type(e).__name__, e)
def conns():
    def f():
        for _ in range(1500):
            s = socket.socket(socket.AF_UNIX)
            s.connect(SOCK)
            held.append(s)
    t = threading.Thread(target=f)
    t.start()
    t.join()
    try:
        EnvServerClient("unix://" + SOCK, tool_name="robot_server").call("robot.env_steps")
        return "CONN SERVED HELD %d" % len(held)
    except Exception as e:
        return "CONN %s %s HELD %d" % (type(e).__name__, e, len(held))
def close():
    for s in held:
        s.close()
`

// TestSealedRobotServerFlood floods the robot server's agent socket from agent cells in a real sealed
// episode (the 63 MB body and 1,500 idle connections): each flood gets a clear error in its
// cell, the episode goes on, and the next move is served and counted.
func TestSealedRobotServerFlood(t *testing.T) {
	srv := openaitest.New(
		call(py("open('flood.py', 'w').write("+pyQuote(floodModule)+")")),
		call(py("import flood\nprint(flood.body())")),
		call(py("print(flood.conns())")),
		call(py("print('MOVED', robo.move_to([0.5, 0.1, 0.3]).reached)\nflood.close()")),
		call(finish("failure", "flooded")),
	)
	defer srv.Close()
	cfg := episodeConfig(t, func(c *testEpisode) { c.Sealed = spec.SealOn })
	res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
	if !res.Sealed {
		t.Fatalf("not sealed: %+v", res.Seal)
	}
	nb := readTrace(t, cfg.Out)
	cells := cellsBy(nb, notebooks.AuthorAgent)
	if len(cells) != 4 {
		t.Fatalf("trace: %d agent cells, want 4", len(cells))
	}
	var out []string
	for _, c := range cells {
		var b strings.Builder
		for _, o := range c.Outputs {
			b.WriteString(o.Text + o.Ename + ": " + o.Evalue + "\n")
		}
		out = append(out, b.String())
		t.Logf("cell: %.400s", b.String())
	}
	for i, want := range [][]string{
		{},
		{"BODY ToolError", "refused: the server takes at most 8388608 bytes"},
		{"CONN ToolError", "already serves 32 connections", "HELD 1500"},
		{"MOVED True"},
	} {
		for _, w := range want {
			if !strings.Contains(out[i], w) {
				t.Errorf("cell %d lacks %q: %s", i+1, w, out[i])
			}
		}
	}
	server := readJSONL(t, filepath.Join(cfg.Out, "robot", "calls.jsonl"))
	if len(server) != 1 || res.EnvSteps == 0 || res.EnvSteps != res.EnvStepsTotal || res.Status != "completed" {
		t.Errorf("after the floods: server calls %d, env_steps %d of %d, status %s", len(server), res.EnvSteps, res.EnvStepsTotal, res.Status)
	}
}

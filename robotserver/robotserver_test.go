package robotserver

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/seal"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestServedTabletopInSealedKernel drives the tabletop through the proxy in a sealed kernel and reads
// the judge's report from the host socket: steps and ledger come from the server, and a raw RPC for a
// private method (the forged success of the issue) is refused by the server, not by the kernel.
func TestServedTabletopInSealedKernel(t *testing.T) {
	nbtest.Heavy(t, "a robot server and a sealed kernel")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root := repoRoot(t)
	pypath := filepath.Join(root, "robotapi", "python")
	srv, err := Start(ctx, Options{Root: root, Robot: "tabletop", Task: "stack_blocks", Seed: 0, Images: "on-motion",
		Primitives: "full", Dir: t.TempDir(), Env: map[string]string{"PYTHONPATH": pypath}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	card, err := srv.Card(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Robot string `json:"robot"`
		Task  string `json:"task"`
	}
	if err := json.Unmarshal(card, &c); err != nil || c.Robot != "tabletop" || c.Task != "stack_blocks" {
		t.Fatalf("card: %v %+v", err, c)
	}
	spec, err := kernel.FindSpec("pyrualean")
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	sb, err := seal.New(ctx, spec, seal.Options{Workspace: ws, ReadOnly: []string{srv.AgentDir()}, PythonPath: pypath})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	k, err := kernel.Launch(ctx, sb.Spec, kernel.LaunchOptions{Dir: ws, IPC: sb.IPC})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(context.Background())
	code := `from pyrualean_robot.served import connect
robo = connect(` + q(srv.AgentSocket()) + `)
m = robo.move_to([0.5, 0.1, 0.3])
print(type(m).__name__, m.reached, robo.env_steps > 0)
print(robo._client.call("robot.call", "_mark_terminated", [], {})["raised"]["type"])
`
	res, err := k.Client().Execute(ctx, code, kernel.ExecuteOptions{Timeout: time.Minute,
		UserExpressions: map[string]string{"r": "__import__('pyrualean_robot').cell_report()"}})
	if err != nil || res.Status != "ok" {
		t.Fatalf("execute: %v %+v", err, res)
	}
	var text string
	images := 0
	for _, o := range res.Outputs {
		text += o.Text
		if _, ok := o.Data["image/png"]; ok {
			images++
		}
	}
	if !strings.Contains(text, "Move True True") || !strings.Contains(text, "AttributeError") {
		t.Fatalf("cell output: %q", text)
	}
	if images != 2 {
		t.Errorf("on-motion images: got %d, want 2 (agentview, wrist)", images)
	}
	rep, err := srv.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.EnvSteps == 0 || rep.Success || len(rep.Calls) != 1 || rep.Calls[0]["tool"] != "move_to" {
		t.Fatalf("host report: %+v", rep)
	}
	again, err := srv.Report(ctx)
	if err != nil || again.EnvSteps != 0 || len(again.Calls) != 0 || again.EnvStepsTotal != rep.EnvStepsTotal {
		t.Fatalf("second report must be an empty window: %v %+v", err, again)
	}
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

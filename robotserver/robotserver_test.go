package robotserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
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

// TestAgentSocketBounded floods a real robot server's agent socket from a sealed kernel, as agent code
// would: a request body past the cap and more connections than the cap. Each gets a clear error in the
// cell, the server's threads stay bounded, and the robot goes on serving the proxy and the host.
func TestAgentSocketBounded(t *testing.T) {
	nbtest.Heavy(t, "a robot server and a sealed kernel")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root := repoRoot(t)
	pypath := filepath.Join(root, "robotapi", "python")
	srv, err := Start(ctx, Options{Root: root, Robot: "tabletop", Task: "stack_blocks", Seed: 0, Images: "none",
		Primitives: "full", Dir: t.TempDir(), Env: map[string]string{"PYTHONPATH": pypath}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
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
	run := func(code string) string {
		t.Helper()
		res, err := k.Client().Execute(ctx, code, kernel.ExecuteOptions{Timeout: time.Minute})
		if err != nil {
			t.Fatalf("execute: %v", err)
		}
		var b strings.Builder
		for _, o := range res.Outputs {
			b.WriteString(o.Text + o.Ename + ": " + o.Evalue + "\n")
		}
		return b.String()
	}
	threads := func() int {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		_, after, _ := strings.Cut(string(b), "Threads:")
		n, _ := strconv.Atoi(strings.Fields(after)[0])
		return n
	}
	if out := run("from pyrualean_robot.served import connect\nrobo = connect(" + q(srv.AgentSocket()) + ")\n" +
		"print('MOVED', robo.move_to([0.5, 0.1, 0.3]).reached)"); !strings.Contains(out, "MOVED True") {
		t.Fatalf("first move: %s", out)
	}
	// The kernel's limits bind the server too (it runs outside the sandbox, reading the agent's requests).
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", srv.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("Max address space         %d", seal.DefaultMemoryBytes),
		fmt.Sprintf("Max cpu time              %d", seal.DefaultCPUSeconds),
		fmt.Sprintf("Max file size             %d", seal.DefaultFileBytes),
		fmt.Sprintf("Max open files            %d", seal.DefaultMaxFiles),
	} {
		if !strings.Contains(string(limits), want) {
			t.Errorf("the robot server runs without the limit %q:\n%s", want, limits)
		}
	}
	base := threads()
	// The server refuses an oversized body unread, whoever sends it (the proxy checks first, above all
	// for a clear message; a raw client is refused by the server itself).
	conn, err := net.Dial("unix", srv.AgentSocket())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /call HTTP/1.1\r\nHost: robot\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 3<<30)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	raw, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.Contains(string(raw), "request body of 3221225472 bytes refused") || !strings.Contains(string(raw), "Connection: close") {
		t.Errorf("raw oversized request: %q", raw)
	}
	// A 64 MB body (the 63 MB took the server to 3.1 GB): refused unread, the cell sees why.
	out := run("try:\n    robo._client.call('robot.call', 'move_to', ['x' * (64 << 20)], {})\n" +
		"except Exception as e:\n    print('BODY', type(e).__name__, e)\nprint('AFTER', robo.move_to([0.45, 0.1, 0.3]).reached)")
	if !strings.Contains(out, "BODY ToolError") || !strings.Contains(out, "refused: the server takes at most 8388608 bytes") ||
		!strings.Contains(out, "AFTER True") {
		t.Errorf("oversized body: %s", out)
	}
	// 300 idle connections from a thread (the 1,500 made 1,512 threads): past the cap each is
	// answered and closed; a fresh client gets the reason; the proxy's own connection keeps working.
	out = run(`import socket, threading
from pyrualean_robot.robots.rpent import EnvServerClient
held, refused = [], [0]
def flood():
    for _ in range(300):
        s = socket.socket(socket.AF_UNIX)
        s.connect(` + q(srv.AgentSocket()) + `)
        held.append(s)
t = threading.Thread(target=flood); t.start(); t.join()
import time; time.sleep(1)
for s in held:
    s.setblocking(False)
    try:
        if b'503' in s.recv(4096):
            refused[0] += 1
    except BlockingIOError:
        pass
print('REFUSED', refused[0])
try:
    EnvServerClient('unix://' + ` + q(srv.AgentSocket()) + `, tool_name='robot_server').call('robot.env_steps')
except Exception as e:
    print('FRESH', type(e).__name__, e)
print('PROXY', robo.move_to([0.5, 0.1, 0.3]).reached)
`)
	during := threads()
	var nRefused int
	if _, after, ok := strings.Cut(out, "REFUSED "); ok {
		nRefused, _ = strconv.Atoi(strings.Fields(after)[0])
	}
	if nRefused < 300-32 || !strings.Contains(out, "FRESH ToolError") ||
		!strings.Contains(out, "already serves 32 connections") || !strings.Contains(out, "PROXY True") {
		t.Errorf("connection flood: %s", out)
	}
	if during > base+32 {
		t.Errorf("robot server threads: %d with the flood open (%d before): the cap is 32 connections", during, base)
	}
	out = run("for s in held:\n    s.close()\nimport time; time.sleep(0.5)\n" +
		"print('AGAIN', EnvServerClient('unix://' + " + q(srv.AgentSocket()) + ", tool_name='robot_server').call('robot.env_steps') > 0)")
	if !strings.Contains(out, "AGAIN True") {
		t.Errorf("after the flood closed: %s", out)
	}
	rep, err := srv.Report(ctx)
	if err != nil || len(rep.Calls) != 3 {
		t.Fatalf("host report after the floods: %v %+v", err, rep)
	}
	t.Logf("server threads: %d before the flood, %d during", base, during)
}

// TestServerEnvDropsSecrets: the robot server's environment follows the sandbox's one secret-name rule
// (seal.SecretName), so credentials, auth and cookie variables never reach the process that serves the
// agent's socket; what it needs passes.
func TestServerEnvDropsSecrets(t *testing.T) {
	secret := []string{"OPENAI_API_KEY", "PYRUALEAN_TOKEN", "AWS_SECRET_ACCESS_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
		"HTTP_AUTHORIZATION", "SESSION_COOKIE", "DB_PASSWORD", "GPG_PASSPHRASE", "SSH_PRIVATE_KEY_PATH"}
	kept := []string{"HOME", "LANG", "MUJOCO_GL", "PYRUALEAN_ROOT"}
	for _, k := range append(secret, kept...) {
		t.Setenv(k, "v-"+k)
	}
	env := map[string]string{}
	for _, kv := range serverEnv(Options{Root: "/r", Env: map[string]string{"PYTHONPATH": "/p"}}) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, k := range secret {
		if _, ok := env[k]; ok {
			t.Errorf("%s reached the robot server", k)
		}
		if !seal.SecretName(k) {
			t.Errorf("seal.SecretName(%s) is false", k)
		}
	}
	for _, k := range kept {
		if _, ok := env[k]; !ok {
			t.Errorf("%s did not reach the robot server", k)
		}
	}
}

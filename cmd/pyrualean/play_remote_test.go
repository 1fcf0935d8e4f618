package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/robotapi"
)

// TestPlayRemoteRobotOverEnvEndpoint plays a RoboTwin episode whose simulator is a separate process
// speaking RPent's env RPC (our fake RoboTwin env server, robotapi/python/tests/fixtures/fake_robotwin.py, the
// fixture the adapter's own tests use):
// --env-endpoint must reach make(), the adapter must pass RPent's identity check, and the agent's
// motions must reach the server and come back as cells in the trace.
func TestPlayRemoteRobotOverEnvEndpoint(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	assets := t.TempDir()
	srv := exec.CommandContext(ctx, filepath.Join(root, ".venv", "bin", "python"), "-m", "fixtures.fake_robotwin",
		"env", "--task-name", "beat_block_hammer", "--task-config", "demo_randomized", "--seed", "100000", "--assets-path", assets)
	srv.Dir = filepath.Join(root, "robotapi", "python", "tests") // the test fixtures' package lives there
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	url := ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), "listening on "); ok {
			url = strings.TrimSpace(after)
			break
		}
	}
	if url == "" {
		t.Fatal("the fake env server never announced its URL")
	}
	go func() {
		for sc.Scan() { // keep draining so the server never blocks on a full pipe
		}
	}()

	dir := t.TempDir()
	sol := filepath.Join(dir, "policy.py")
	os.WriteFile(sol, []byte("# %%\nst = robo.state()\nprint(st.left.gripper, st.right.gripper)\n\n# %%\ng = robo.set_gripper(\"left\", robo.CLOSE, steps=4)\ng\n"), 0o644)
	out := filepath.Join(dir, "run")
	var so, se bytes.Buffer
	// No --seed: the server was started on RoboTwin's default scene (100000), which play must pick.
	code := cmdPlay(ctx, []string{"--runtime", "replay", "--from", sol, "--robot", "robotwin", "--task", "beat_block_hammer",
		"--suite", "demo_randomized", "--env-endpoint", url, "--images", "none", "--out", out}, &so, &se)
	if code != 0 {
		t.Fatalf("play exit %d: %s", code, se.String())
	}
	pl := playJSON(t, so.String())
	if pl.Status != agent.StatusCompleted || pl.ToolTurns < 2 {
		t.Fatalf("play line %+v", pl)
	}
	trace, err := os.ReadFile(filepath.Join(out, "trace.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`env_url=\"` + url, "Gripper(", "set_gripper"} {
		if !bytes.Contains(trace, []byte(want)) {
			t.Errorf("trace lacks %q", want)
		}
	}
	calls, _ := os.ReadFile(filepath.Join(out, "calls.jsonl"))
	if !bytes.Contains(calls, []byte(`"set_gripper"`)) {
		t.Errorf("calls.jsonl lacks the motion: %s", calls)
	}
}

package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/gateway/jupytertest"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// TestLabSecondEpisode is the person's Lab during a second episode (issue #28, e2e/hitl_second.mjs):
// an earlier episode's notebook (its real trace, saved as Lab saves a notebook it had on that
// episode's live kernel) is in the Lab's folder while another episode is live. The Launcher shows no
// card for the live kernel; a new notebook's kernel dialog does not preselect it; the old notebook
// never ends up silently on the new episode's kernel (the bar says so and a fresh kernel is one click);
// the new episode's own live notebook is its.
func TestLabSecondEpisode(t *testing.T) {
	nbtest.Heavy(t, "two episodes and JupyterLab in Chromium")
	root, err := agent.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The first episode runs to its end (no gateway): its trace is the old notebook.
	srvA := openaitest.New(openaitest.Step{Reply: pyCall("print('episode A')")},
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "finish", Arguments: `{"status": "failure", "summary": "A"}`}}}})
	defer srvA.Close()
	outA := filepath.Join(dir, "a")
	var aOut, aErr strings.Builder
	if code := cmdPlay(context.Background(), []string{"--runtime", "openai", "--base-url", srvA.BaseURL(), "--model", "scripted",
		"--task", "stack_blocks", "--out", outA, "--sealed", "off"}, &aOut, &aErr); code > 1 {
		t.Fatalf("episode A: exit %d %s", code, aErr.String())
	}
	old, err := notebooks.ReadFile(filepath.Join(outA, "trace.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	// As Lab saved it while it was on episode A's live kernel (Lab writes the session's kernelspec).
	old.Metadata["kernelspec"] = map[string]any{"name": "pyrualean-episode-a", "display_name": "pyrualean episode a (live agent kernel)", "language": "python"}

	release := make(chan struct{})
	var releaseOnce sync.Once
	srvB := openaitest.New(
		openaitest.Step{Func: func(openaitest.Request) openaitest.Reply { <-release; return pyCall("print('episode B')") }},
		openaitest.Step{Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "finish", Arguments: `{"status": "failure", "summary": "B"}`}}}},
	)
	defer srvB.Close()
	defer releaseOnce.Do(func() { close(release) }) // before srvB.Close: its call waits on release
	const gwToken = "second-gateway-token"
	gw, done, playErr := servePlay(t, "--runtime", "openai", "--base-url", srvB.BaseURL(), "--model", "scripted",
		"--task", "stack_blocks", "--out", filepath.Join(dir, "b"), "--sealed", "off", "--serve", "127.0.0.1:0", "--serve-token", gwToken)
	lab := jupytertest.Start(t, "lab", gw, gwToken)
	oldPath := "pyrualean-episodes/a.ipynb"
	if err := os.MkdirAll(filepath.Join(lab.Root, "pyrualean-episodes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := notebooks.WriteFileAtomic(filepath.Join(lab.Root, oldPath), old); err != nil {
		t.Fatal(err)
	}
	var attachOut, attachErr strings.Builder
	if code := cmdAttach(context.Background(), []string{"--gateway", gw, "--gateway-token", gwToken, "--server", lab.URL,
		"--server-token", lab.Token}, &attachOut, &attachErr); code != 0 {
		t.Fatalf("attach: exit %d %s %s", code, attachOut.String(), attachErr.String())
	}

	artifacts := os.Getenv("PYRUALEAN_E2E_ARTIFACTS")
	if artifacts == "" {
		artifacts = filepath.Join(t.TempDir(), "screenshots")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	node := exec.CommandContext(ctx, "node", "hitl_second.mjs")
	node.Dir = filepath.Join(root, "e2e")
	node.Env = append(os.Environ(), "LAB_URL="+lab.URL, "LAB_TOKEN="+lab.Token, "OLD_PATH="+oldPath,
		"LIVE_PATH=pyrualean-episodes/b.ipynb", "ARTIFACTS="+filepath.Join(artifacts, "second"))
	stdout, _ := node.StdoutPipe()
	node.Stderr = node.Stdout
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
	}
	nodeErr := node.Wait()
	t.Logf("hitl_second.mjs (screenshots in %s):\n%s", artifacts, log.String())
	if nodeErr != nil {
		t.Fatalf("the browser steps failed: %v\nplay stderr:\n%s", nodeErr, playErr.String())
	}
	releaseOnce.Do(func() { close(release) })
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("episode B did not end: %s", playErr.String())
	}
}

// TestLabStopsWithGatewayGone: a Lab whose gateway went away while it held the episode's kernel (adopted
// by pyrualean_lab) and a fresh pyrualean kernel started on that gateway stops on SIGTERM, as a person's
// Ctrl-C: Jupyter Server's own shutdown of all kernels stops at the first unreachable one and never exits
// (issue #28: "stopping Lab needed SIGKILL").
func TestLabStopsWithGatewayGone(t *testing.T) {
	nbtest.Heavy(t, "an episode's gateway and JupyterLab")
	srv := openaitest.New(openaitest.Step{Delay: 8 * time.Second, Reply: openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "finish", Arguments: `{"status": "failure", "summary": "x"}`}}}})
	defer srv.Close()
	const gwToken = "stop-gateway-token"
	gw, done, playErr := servePlay(t, "--runtime", "openai", "--base-url", srv.BaseURL(), "--model", "scripted",
		"--task", "stack_blocks", "--out", filepath.Join(t.TempDir(), "run"), "--sealed", "off", "--serve", "127.0.0.1:0",
		"--serve-token", gwToken)
	lab := jupytertest.Start(t, "lab", gw, gwToken)
	var kernels []struct{ ID, Name string }
	for deadline := time.Now().Add(30 * time.Second); len(kernels) == 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		lab.Get(t, "/api/kernels", &kernels) // the episode's, adopted
	}
	req, _ := http.NewRequest("POST", lab.URL+"/api/kernels", strings.NewReader(`{"name": "pyrualean"}`))
	req.Header.Set("Authorization", "token "+lab.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("a fresh pyrualean kernel through Lab: %v %v", err, resp)
	}
	resp.Body.Close()
	lab.Get(t, "/api/kernels", &kernels)
	if len(kernels) != 2 {
		t.Fatalf("Lab's kernels: %+v, want the episode's and a fresh one", kernels)
	}
	select {
	case <-done: // the episode ended, and its gateway with it
	case <-time.After(2 * time.Minute):
		t.Fatalf("play did not end: %s", playErr.String())
	}
	if took, err := lab.Stop(20 * time.Second); err != nil {
		t.Fatalf("with its gateway gone: %v (after %v)\n%s", err, took, lab.Logs())
	} else {
		t.Logf("JupyterLab stopped on SIGTERM in %v with its gateway gone", took.Round(time.Millisecond))
	}
}

// servePlay runs `pyrualean play ARGS` (with --serve) in the background and returns its gateway's URL
// once it serves, the channel its exit code comes on, and its stderr.
func servePlay(t *testing.T, args ...string) (gw string, done <-chan int, stderr *syncBuffer) {
	t.Helper()
	stderr = &syncBuffer{}
	exit := make(chan int, 1)
	go func() {
		var o syncBuffer
		exit <- cmdPlay(context.Background(), args, &o, stderr)
	}()
	addrRe := regexp.MustCompile(`gateway http://(\S+) token`)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if m := addrRe.FindStringSubmatch(stderr.String()); m != nil {
			return "http://" + m[1], exit, stderr
		}
		select {
		case code := <-exit:
			t.Fatalf("play ended (exit %d) before serving: %s", code, stderr.String())
		default:
		}
	}
	t.Fatalf("no gateway address: %s", stderr.String())
	return "", nil, nil
}

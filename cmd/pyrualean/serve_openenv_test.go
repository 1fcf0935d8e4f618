package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/llm"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// rollout is one line of openenv/rollout.py's output.
type rollout struct {
	Job       int      `json:"job"`
	EpisodeID string   `json:"episode_id"`
	RunDir    string   `json:"run_dir"`
	Reward    *float64 `json:"reward"`
	Done      bool     `json:"done"`
	Steps     []struct {
		Tool    string   `json:"tool"`
		IsError bool     `json:"is_error"`
		Done    bool     `json:"done"`
		Reward  *float64 `json:"reward"`
		Text    string   `json:"text"`
	} `json:"steps"`
	State map[string]any `json:"state"`
	Error string         `json:"error"`
}

// TestServeOpenEnvClient runs `serve --openenv` and drives it with OpenEnv's own client from PyPI
// (GenericEnvClient, openenv/rollout.py): four sessions at once, two replaying reference solutions
// (one opening with a call of no such tool, one through openenv/trl_env.py, TRL's environment
// interface) and two acting with the embedded model (llama.cpp serving smollm2-135m, its tool calls
// held to the tools' schemas). Each must end done, with the reward the episode's success, a valid trace and a
// complete run folder; the gateway lists the four live episodes at once; a client without the token
// is refused.
func TestServeOpenEnvClient(t *testing.T) {
	if testing.Short() {
		t.Skip("boots four sealed episodes and a local model")
	}
	root := nbtest.Root(t)
	py := nbtest.Python(t)
	if err := exec.Command(py, "-c", "import openenv.core.generic_client").Run(); err != nil {
		t.Fatalf("OpenEnv's client is not installed in .venv (requirements/openenv.txt; make setup): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 18*time.Minute)
	defer cancel()
	model, err := llm.Start(ctx, llm.Options{Model: llm.TestModel, Root: root, Port: freePort(t), Threads: 2, Install: true})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Stop()

	out := t.TempDir()
	base := startServe(t, ctx, "--token", "tok-openenv-test", "--openenv", "--openenv-out", out,
		"--openenv-set", "images=none", "--openenv-max-turns", "8", "--openenv-max-steps", "5")
	ws := "ws" + strings.TrimPrefix(base, "http") + "/ws"
	if _, resp, err := websocket.DefaultDialer.Dial(ws, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a client without the token: %v %v, want 401", err, resp)
	}

	// JSON tool calls held to the tools' schemas by llama.cpp's grammar (tool_choice required), short
	// cells: on two loaded cores each call of the 135M model takes a minute or more
	short := map[string]any{"repeat_penalty": 1.3, "frequency_penalty": 0.5}
	sol := func(task string) string { return filepath.Join(root, "robotapi/solutions/tabletop", task+".py") }
	jobs := []map[string]any{
		{"task": "put_block_in_bowl", "seed": 0, "policy": "replay", "solution": sol("put_block_in_bowl"), "probe": true, "episode_id": "replay-bowl"},
		{"task": "put_block_on_plate", "seed": 1, "policy": "trl_env", "solution": sol("put_block_on_plate"), "episode_id": "replay-plate"},
		{"task": "stack_blocks", "seed": 0, "policy": "model", "base_url": model.BaseURL, "model": model.Model, "max_turns": 2, "max_tokens": 128,
			"prompt_profile": "compact", "episode_id": "model-stack", "sampling_seed": 1, "extra_body": short},
		{"task": "put_block_in_bowl", "seed": 2, "policy": "model", "base_url": model.BaseURL, "model": model.Model, "max_turns": 2, "max_tokens": 128,
			"prompt_profile": "compact", "episode_id": "model-bowl", "sampling_seed": 2, "extra_body": short},
	}
	args := []string{filepath.Join(root, "openenv", "rollout.py"), "--url", base, "--token", "tok-openenv-test", "--together", "--timeout-s", "900"}
	for _, j := range jobs {
		b, _ := json.Marshal(j)
		args = append(args, "--job", string(b))
	}
	cmd := exec.CommandContext(ctx, py, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	most, ran := make(chan int, 1), make(chan struct{})
	go func() { most <- watchEpisodes(ctx, base, "tok-openenv-test", ran) }()
	var rollouts []rollout
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r rollout
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("rollout.py line %q: %v", sc.Text(), err)
		}
		rollouts = append(rollouts, r)
	}
	werr := cmd.Wait()
	close(ran)
	if werr != nil || len(rollouts) != len(jobs) {
		t.Fatalf("rollout.py: %v, %d rollouts; stderr:\n%s", werr, len(rollouts), stderr.String())
	}
	if n := <-most; n != len(jobs) {
		t.Errorf("the gateway listed at most %d live episodes at once, want %d", n, len(jobs))
	}
	var traces []string
	for _, r := range rollouts {
		job := jobs[r.Job]
		res, err := readResult(r.RunDir)
		if err != nil {
			t.Fatalf("job %d: %v", r.Job, err)
		}
		success := res.EnvironmentSuccess != nil && *res.EnvironmentSuccess
		want := 0.0
		if success {
			want = 1
		}
		t.Logf("job %d (%s %s): status %s, success %v, reward %v, %d steps", r.Job, job["policy"], job["task"], res.Status, success, *r.Reward, len(r.Steps))
		switch {
		case r.Error != "" || !r.Done || r.Reward == nil:
			t.Errorf("job %d: %+v", r.Job, r)
		case *r.Reward != want || (r.State["environment_success"] == true) != success:
			t.Errorf("job %d: reward %v, state %v, result.json success %v", r.Job, *r.Reward, r.State["environment_success"], success)
		case res.Runtime != "openenv" || r.State["status"] != res.Status || filepath.Base(r.RunDir) != job["episode_id"]:
			t.Errorf("job %d: result.json %s/%s vs state %v", r.Job, res.Runtime, res.Status, r.State["status"])
		case job["policy"] != "model" && (!success || res.Status != agent.StatusCompleted):
			t.Errorf("job %d: the reference solution did not solve it: %s", r.Job, res.Status)
		case job["policy"] == "model" && res.Status != agent.StatusCompleted && res.Status != agent.StatusCallBudget:
			t.Errorf("job %d: the model's episode ended %s (%v)", r.Job, res.Status, res.Error)
		}
		if res.Seal == nil || !res.Seal.RobotServerForked {
			t.Errorf("job %d: the session's robot server was not forked from serve's forker: %+v", r.Job, res.Seal)
		}
		if job["probe"] == true && (len(r.Steps) == 0 || !r.Steps[0].IsError || r.Steps[0].Done || !strings.Contains(r.Steps[0].Text, "unknown tool")) {
			t.Errorf("job %d: a call of no such tool is not an error observation: %+v", r.Job, r.Steps[:1])
		}
		xs, err := agent.ReadExchanges(filepath.Join(r.RunDir, agent.ExchangesFile))
		if err != nil || len(xs) != len(r.Steps) {
			t.Errorf("job %d: exchanges.jsonl %d lines (%v), %d steps", r.Job, len(xs), err, len(r.Steps))
		}
		for i, x := range xs {
			if i < len(r.Steps) && !strings.HasPrefix(x.Text, r.Steps[i].Text) {
				t.Errorf("job %d step %d: the observation is not the episode's result:\n%q\n%q", r.Job, i, r.Steps[i].Text, x.Text)
			}
		}
		traces = append(traces, filepath.Join(r.RunDir, "trace.ipynb"))
	}
	nbtest.Validate(t, traces...)
}

// watchEpisodes polls the gateway's /api/episodes while cmd runs and returns the most it listed at once.
func watchEpisodes(ctx context.Context, base, token string, ran <-chan struct{}) int {
	most := 0
	for ctx.Err() == nil && !isClosed(ran) {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/episodes", nil)
		req.Header.Set("Authorization", "token "+token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			var eps []any
			if json.NewDecoder(resp.Body).Decode(&eps) == nil {
				most = max(most, len(eps))
			}
			resp.Body.Close()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return most
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestServeOpenEnvValidator runs OpenEnv's own runtime validator (openenv.cli._validation) against
// serve --openenv: OpenAPI, /health, /metadata, /schema and /mcp answer as its production mode (sessions
// over /ws only) wants, without the token; the token still guards /ws and the gateway's API.
func TestServeOpenEnvValidator(t *testing.T) {
	py := nbtest.Python(t)
	if err := exec.Command(py, "-c", "import openenv.cli._validation").Run(); err != nil {
		t.Fatalf("OpenEnv is not installed in .venv (requirements/openenv.txt; make setup): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := startServe(t, ctx, "--token", "tok-validator", "--openenv", "--openenv-out", t.TempDir())
	out, err := exec.CommandContext(ctx, py, "-c", `import json, sys
from openenv.cli._validation import validate_running_environment
print(json.dumps(validate_running_environment(sys.argv[1])))`, base).CombinedOutput()
	if err != nil {
		t.Fatalf("validator: %v\n%s", err, out)
	}
	var report struct {
		Passed   bool   `json:"passed"`
		Mode     string `json:"mode"`
		Profile  string `json:"standard_profile"`
		Criteria []struct {
			ID     string `json:"id"`
			Passed bool   `json:"passed"`
			Actual any    `json:"actual"`
		} `json:"criteria"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("validator output %q: %v", out, err)
	}
	if !report.Passed || report.Mode != "production" || report.Profile != "openenv-http/1.x" || len(report.Criteria) < 6 {
		t.Errorf("OpenEnv's validator: %s", out)
	}
	for _, path := range []string{"/ws", "/api/kernels"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, resp.StatusCode)
		}
	}
}

// startServe runs `pyrualean serve --port 0 ARGS` with OpenEnv on until the test ends (serve must then exit
// 0) and returns its base URL, without a trailing slash.
func startServe(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	sctx, stop := context.WithCancel(ctx)
	var stdout syncBuffer
	served := make(chan int, 1)
	go func() { served <- cmdServe(sctx, append([]string{"--port", "0"}, args...), &stdout, io.Discard) }()
	t.Cleanup(func() {
		stop()
		if code := <-served; code != 0 {
			t.Errorf("serve exited %d", code)
		}
	})
	re := regexp.MustCompile(`serving on (http://\S+)`)
	var m []string
	for deadline := time.Now().Add(60 * time.Second); m == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m = re.FindStringSubmatch(stdout.String())
	}
	if m == nil || !strings.Contains(stdout.String(), "openenv: ws://") {
		t.Fatalf("serve printed no URL: %q", stdout.String())
	}
	return strings.TrimSuffix(m[1], "/")
}

package rollouts

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/spec"
	"github.com/pyrualean/pyrualean/spec/spectest"
)

func TestMeanStd(t *testing.T) {
	for _, c := range []struct {
		v         []float64
		mean, std float64
	}{
		{[]float64{1, 0}, 0.5, math.Sqrt(0.5)},
		{[]float64{1, 1, 1, 1}, 1, 0},
		{[]float64{0}, 0, 0},
		{[]float64{1, 0, 0, 0}, 0.25, 0.5},
	} {
		m, s := meanStd(c.v)
		if math.Abs(m-c.mean) > 1e-12 || math.Abs(s-c.std) > 1e-12 {
			t.Errorf("meanStd(%v) = %v, %v; want %v, %v", c.v, m, s, c.mean, c.std)
		}
	}
}

// call is a scripted python or finish call.
func call(content, tool string, args map[string]string) openaitest.Step {
	b, _ := json.Marshal(args)
	return openaitest.Step{Reply: openaitest.Reply{Content: content, ToolCalls: []openaitest.ToolCall{{Name: tool, Arguments: string(b)}}}}
}

// playSample runs one sample of a group: the production openai runtime against the scripted server.
func playSample(t *testing.T, dir string, index int, steps ...openaitest.Step) string {
	t.Helper()
	srv := openaitest.New(steps...)
	t.Cleanup(srv.Close)
	t.Setenv("OPENAI_API_KEY", "test")
	out := filepath.Join(dir, "episodes", "put_block_in_bowl", "sample-"+string(rune('0'+index)))
	s := spectest.Tabletop(t, func(s *spec.Episode) {
		s.Task, s.Out, s.MaxCalls = "put_block_in_bowl", out, 8
		s.Policy = spec.Policy{Runtime: "openai", Model: "scripted", BaseURL: srv.URL + "/v1"}
		s.Sample = &spec.Sample{Index: index, Of: 2, Seed: int64(100 + index)}
	})
	rt, err := runtimes.For(s, runtimes.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ep, err := agent.StartEpisode(ctx, s, agent.Host{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runtimes.Play(ctx, rt, ep); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExport plays a group of two samples of one instance with the production openai runtime (one
// solves the task with the reference solution's cells, one gives up), exports it in every format, and
// checks the records against each format's own loader in .venv-train: `datasets` (all), TRL's
// conversational checks and chat-template rendering (trl), verifiers' trace reader (verifiers).
func TestExport(t *testing.T) {
	if testing.Short() {
		t.Skip("plays two episodes in real kernels")
	}
	root := nbtest.Root(t)
	trainPy := filepath.Join(root, ".venv-train", "bin", "python")
	if _, err := os.Stat(trainPy); err != nil {
		t.Fatalf("the training data libraries are not installed (.venv-train: scripts/setup.d/train.sh): %v", err)
	}
	dir := t.TempDir()
	sol, err := os.ReadFile(filepath.Join(root, "robotapi/solutions/tabletop/put_block_in_bowl.py"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []openaitest.Step
	for i, part := range strings.Split(string(sol), "# %%")[2:] {
		steps = append(steps, call("step "+string(rune('1'+i)), "python", map[string]string{"code": strings.TrimSpace(part)}))
	}
	steps = append(steps, call("", "finish", map[string]string{"status": "success", "summary": "in the bowl"}))
	solved := playSample(t, dir, 0, steps...)
	failed := playSample(t, dir, 1, call("I will look.", "python", map[string]string{"code": "print(robo.state())"}),
		openaitest.Step{Reply: openaitest.Reply{Content: "bad", ToolCalls: []openaitest.ToolCall{{Name: "python", Arguments: "{not json"}}}},
		call("", "finish", map[string]string{"status": "failure", "summary": "gave up"}))
	// Token data as the runtimes write it with --record-tokens (tokens.jsonl: one line per LLM call).
	tokens := `{"turn":1,"completion_ids":[11,12,13],"completion_tokens":["a","b","c"],"completion_logprobs":[-0.1,-0.2,-0.3]}` + "\n"
	if err := os.WriteFile(filepath.Join(solved, TokensFile), []byte(tokens), 0o644); err != nil {
		t.Fatal(err)
	}

	rs, errs := Load([]string{dir})
	if len(errs) > 0 || len(rs) != 2 || rs[1].Dir != failed {
		t.Fatalf("Load: %d rollouts, errors %v", len(rs), errs)
	}
	a := math.Sqrt(0.5) // rewards 1 and 0: mean 0.5, std (N-1) sqrt(0.5)
	if rs[0].Dir != solved || rs[0].Reward != 1 || math.Abs(rs[0].Advantage-0.5/a) > 1e-12 || rs[1].Reward != 0 ||
		math.Abs(rs[1].Advantage+0.5/a) > 1e-12 || rs[0].Group != rs[1].Group {
		t.Fatalf("rollouts: %+v / %+v", rs[0], rs[1])
	}
	c := rs[0].Conv
	// prompt, then per LLM turn an assistant message with its call, the result, and the images after it
	if c == nil || c.Messages[0].Role != "assistant" || c.Messages[0].Text != "step 1" || c.Messages[0].Tokens == nil ||
		c.Messages[1].Role != "tool" || !strings.Contains(c.Messages[1].Text, "ok") || len(c.Tools) != 2 {
		t.Fatalf("conversation: %+v", c)
	}
	bad := rs[1].Conv.Messages
	if len(bad) < 5 || !bad[3].IsError && !bad[4].IsError {
		t.Fatalf("the refused call is not kept: %+v", bad)
	}
	for _, f := range Formats {
		out := filepath.Join(t.TempDir(), "export", f+".jsonl")
		n, err := Export(rs, Options{Format: f, Out: out})
		if err != nil || n != 2 {
			t.Fatalf("%s: %d records, %v", f, n, err)
		}
		cmd := exec.Command(trainPy, filepath.Join(root, "rollouts", "validate_formats.py"), f, out)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		res, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: the format's own loader refused the export: %v\n%s", f, err, stderr.String())
		}
		t.Logf("%s: %s", f, strings.TrimSpace(string(res)))
	}
	if _, err := Export(rs, Options{Format: "parquet", Out: filepath.Join(dir, "x.jsonl")}); err == nil {
		t.Fatal("an unknown format was accepted")
	}
}

package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/pyrualean/pyrualean/atomicfile"
	"github.com/pyrualean/pyrualean/notebooks"
)

func TestTrimMiddleAndANSI(t *testing.T) {
	cases := []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"abcdefghij", 4, "ab\n... [6 chars omitted] ...\nij"},
		{"ééééé", 2, "é\n... [3 chars omitted] ...\né"},
	}
	for _, c := range cases {
		if got := TrimMiddle(c.in, c.limit); got != c.want {
			t.Errorf("TrimMiddle(%q, %d) = %q, want %q", c.in, c.limit, got, c.want)
		}
	}
	if got := StripANSI("\x1b[0;31mZeroDivisionError\x1b[0m: x\x1b[1;32m"); got != "ZeroDivisionError: x" {
		t.Errorf("StripANSI = %q", got)
	}
	long := strings.Repeat("x", MaxTextChars+10)
	if got := capText(long); !strings.HasSuffix(got, "\n[truncated]") || len(got) != MaxTextChars+len("\n[truncated]") {
		t.Errorf("capText length %d", len(got))
	}
}

func TestParseRawCompletion(t *testing.T) {
	cases := []struct {
		name, body    string
		want          Usage
		wantReasoning string
	}{
		{"openai details", `{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":7}}}`,
			Usage{Calls: 1, InputTokens: 100, CachedTokens: 64, OutputTokens: 20, ReasoningTokens: 7}, ""},
		{"sglang top-level reasoning", `{"choices":[{"message":{"reasoning_content":"think"}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"reasoning_tokens":3}}`,
			Usage{Calls: 1, InputTokens: 10, OutputTokens: 5, ReasoningTokens: 3}, "think"},
		{"vllm reasoning key", `{"choices":[{"message":{"reasoning":"hmm"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
			Usage{Calls: 1, InputTokens: 1, OutputTokens: 1}, "hmm"},
		{"llama.cpp timings", `{"choices":[{"message":{}}],"usage":{"prompt_tokens":50,"completion_tokens":2},"timings":{"cache_n":40}}`,
			Usage{Calls: 1, InputTokens: 50, CachedTokens: 40, OutputTokens: 2}, ""},
		{"ollama minimal", `{"choices":[{"message":{}}],"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11}}`,
			Usage{Calls: 1, InputTokens: 5, OutputTokens: 6}, ""},
		{"garbage", `not json`, Usage{}, ""},
	}
	for _, c := range cases {
		u, r := parseRawCompletion([]byte(c.body))
		if u != c.want || r != c.wantReasoning {
			t.Errorf("%s: %+v %q, want %+v %q", c.name, u, r, c.want, c.wantReasoning)
		}
	}
}

func TestPrices(t *testing.T) {
	tab := PriceTable{"gpt-x": {Input: 2, CachedInput: 0.5, Output: 8}, "qwen*": {Input: 1, Output: 1}}
	p, ok := tab.Lookup("gpt-x")
	if !ok {
		t.Fatal("exact lookup failed")
	}
	// 1M input of which 400k cached, 100k output.
	if got := p.Cost(Usage{InputTokens: 1_000_000, CachedTokens: 400_000, OutputTokens: 100_000}); got < 2.199 || got > 2.201 {
		t.Errorf("cost = %v, want 1.2 + 0.2 + 0.8", got)
	}
	if _, ok := tab.Lookup("qwen3-8b"); !ok {
		t.Error("prefix lookup failed")
	}
	if _, ok := tab.Lookup("llama"); ok {
		t.Error("unknown model priced")
	}
	path := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(path, []byte(`{"m": {"input": 1, "cached_input": 0.1, "output": 3}}`), 0o644)
	if pt, err := ReadPriceTable(path); err != nil || pt["m"].Output != 3 {
		t.Errorf("ReadPriceTable = %v, %v", pt, err)
	}
	os.WriteFile(path, []byte(`{"m": [}`), 0o644)
	if _, err := ReadPriceTable(path); err == nil {
		t.Error("corrupt price table accepted")
	}
}

// TestProviderDoer exercises the HTTP layer against a real server: extra body merge, retries with
// Retry-After, no retry on 400, and transport failures.
func TestProviderDoer(t *testing.T) {
	var hits atomic.Int32
	var lastBody atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		lastBody.Store(string(b))
		switch {
		case r.URL.Path == "/bad":
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"bad"}}`)
		case n <= 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(429)
		default:
			io.WriteString(w, `{"ok":true}`)
		}
	}))
	defer srv.Close()
	d := &providerDoer{client: srv.Client(), extra: map[string]any{"top_k": 5, "temperature": 0.0}, attempts: 4,
		backoff: time.Millisecond, maxBackoff: 5 * time.Millisecond, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sink := &rawSink{}
	req, _ := http.NewRequestWithContext(withRawSink(context.Background(), sink), "POST", srv.URL+"/v1", strings.NewReader(`{"model":"m","temperature":0.7}`))
	resp, err := d.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != `{"ok":true}` || sink.Attempts != 3 || string(sink.Body) != `{"ok":true}` {
		t.Errorf("status %d body %s attempts %d", resp.StatusCode, body, sink.Attempts)
	}
	var sent map[string]any
	json.Unmarshal([]byte(lastBody.Load().(string)), &sent)
	if sent["top_k"] != 5.0 || sent["temperature"] != 0.0 || sent["model"] != "m" {
		t.Errorf("body on the wire = %v", sent)
	}
	hits.Store(10)
	req, _ = http.NewRequest("POST", srv.URL+"/bad", strings.NewReader(`{}`))
	before := hits.Load()
	resp, err = d.Do(req)
	if err != nil || resp.StatusCode != 400 || hits.Load()-before != 1 {
		t.Errorf("400: err %v status %v hits %d (want one attempt)", err, resp, hits.Load()-before)
	}
	srv.Close()
	req, _ = http.NewRequest("POST", srv.URL+"/v1", strings.NewReader(`{}`))
	if _, err := d.Do(req); err == nil || !strings.Contains(err.Error(), "after 4 attempts") {
		t.Errorf("closed server: %v", err)
	}
	req, _ = http.NewRequest("POST", "http://x", strings.NewReader(`[1]`))
	if _, err := d.Do(req); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("non-object body with extras: %v", err)
	}
}

func TestPrimitiveCell(t *testing.T) {
	var args map[string]any
	dec := json.NewDecoder(strings.NewReader(`{"xyz": [0.5, -1e-3, 2], "gripper": null, "fast": true, "name": "a\"b\n", "opts": {"k": false}}`))
	dec.UseNumber()
	dec.Decode(&args)
	got, err := primitiveCell("move_to", args)
	want := `robo.move_to(fast=True, gripper=None, name="a\"b\n", opts={"k": False}, xyz=[0.5, -1e-3, 2])`
	if err != nil || got != want {
		t.Errorf("got %s (%v)\nwant %s", got, err, want)
	}
	if _, err := primitiveCell("move_to", map[string]any{"a b": 1}); err == nil {
		t.Error("non-identifier argument accepted")
	}
}

func pngB64(t *testing.T) string {
	var buf bytes.Buffer
	png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 4, 4)))
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func TestSelectImages(t *testing.T) {
	img := pngB64(t)
	out := func(source, camera string) notebooks.Output {
		o := notebooks.Output{OutputType: notebooks.OutputDisplayData, Data: notebooks.MimeBundle{"image/png": img, "text/plain": "<img>"}}
		if source != "" {
			o.Metadata = map[string]any{"pyrualean": map[string]any{"source": source, "camera": camera}}
		}
		return o
	}
	outs := []notebooks.Output{
		out("on-motion", "agentview"), out("on-motion", "wrist"), out("show", "wrist"), out("show", "wrist"),
		out("display", ""), out("", ""), {OutputType: notebooks.OutputStream, Name: "stdout", Text: "x"},
	}
	cases := map[string]string{
		ImagesOnMotion: "agentview.png,wrist.png,display_0,display_1",
		ImagesOnDemand: "wrist.png,display_0,display_1",
		ImagesNone:     "display_0,display_1",
	}
	for policy, want := range cases {
		var names []string
		for _, im := range selectImages(outs, policy) {
			names = append(names, im.Name)
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("%s: %s, want %s", policy, got, want)
		}
	}
}

func TestCellFeedbackShapes(t *testing.T) {
	outs := []notebooks.Output{
		{OutputType: notebooks.OutputStream, Name: "stdout", Text: strings.Repeat("a", 5000) + strings.Repeat("b", 5000)},
		{OutputType: notebooks.OutputError, Ename: "EpisodeFinished", Evalue: "terminated", Traceback: []string{"\x1b[31mEpisodeFinished\x1b[0m"}},
	}
	res, fb := buildCellFeedback(cellRun{Index: 3, Outputs: outs, Elapsed: 1234 * time.Millisecond}, FeedbackPure, ImagesOnMotion, nil)
	if fb.EpisodeFinished == nil || *fb.EpisodeFinished != "terminated" || fb.Exception != nil || !res.EpisodeDone || res.Finished {
		t.Errorf("EpisodeFinished: %+v", fb)
	}
	if !strings.Contains(fb.Stdout, "chars omitted") || !strings.HasPrefix(fb.Stdout, "aaaa") || !strings.HasSuffix(fb.Stdout, "bbbb") {
		t.Errorf("stdout not cut head+tail")
	}
	if fb.ElapsedS != 1.23 {
		t.Errorf("elapsed %v", fb.ElapsedS)
	}
	var keys []string
	var m map[string]json.RawMessage
	json.Unmarshal([]byte(res.Text), &m)
	for k := range m {
		keys = append(keys, k)
	}
	if len(keys) != 5 { // cell, stdout, stderr, elapsed_s, episode_finished
		t.Errorf("pure keys %v", keys)
	}
	if !strings.HasPrefix(res.Text, "{\n  \"cell\": 3,\n  \"episode_finished\": \"terminated\",\n  \"stdout\"") { // seed order
		t.Errorf("key order: %s", res.Text[:40])
	}
	// Timeout with a restart says the state was lost.
	_, fb = buildCellFeedback(cellRun{Index: 1, TimedOut: true, Restarted: true, TimeoutS: 5}, FeedbackRich, ImagesOnMotion, nil)
	if fb.Exception == nil || !strings.Contains(*fb.Exception, "RESTARTED") || fb.PrimitiveCalls == nil || fb.State == nil {
		t.Errorf("timeout feedback %+v", fb)
	}
}

func writeResult(t *testing.T, dir string, r Result) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	if err := atomicfile.WriteJSON(filepath.Join(dir, "result.json"), r); err != nil {
		t.Fatal(err)
	}
}

func TestSummarizeAndCompare(t *testing.T) {
	base := t.TempDir()
	yes, no := true, false
	cost := func(c float64) *float64 { return &c }
	mk := func(arm, task string, seed int, ok *bool, status string, llm, in int, c float64) Result {
		return Result{Schema: ResultSchema, System: "pyrualean", Arm: arm, Robot: "tabletop", Task: task, Seed: seed,
			EnvironmentSuccess: ok, Status: status, ToolTurns: llm - 1, Calls: 2 * llm, PolicyWallS: 10,
			Generation: Generation{Turns: llm, InputTokens: in, OutputTokens: 10}, CostUSD: cost(c)}
	}
	writeResult(t, filepath.Join(base, "cells", "a"), mk("cells", "stack", 0, &yes, StatusCompleted, 4, 20000, 0.02))
	writeResult(t, filepath.Join(base, "cells", "b"), mk("cells", "drawer", 0, &yes, StatusCompleted, 6, 30000, 0.03))
	writeResult(t, filepath.Join(base, "cells", "c"), mk("cells", "three", 0, &no, StatusCallBudget, 10, 60000, 0.06))
	writeResult(t, filepath.Join(base, "cells", "d"), mk("cells", "four", 0, nil, StatusPlannerError, 1, 100, 0.001))
	running := mk("cells", "five", 0, nil, StatusRunning, 1, 100, 0)
	running.PID = 999999999 // no such process: the play was killed
	writeResult(t, filepath.Join(base, "cells", "e"), running)
	os.MkdirAll(filepath.Join(base, "cells", "corrupt"), 0o755)
	os.WriteFile(filepath.Join(base, "cells", "corrupt", "result.json"), []byte(`{"status": `), 0o644)
	writeResult(t, filepath.Join(base, "tools", "a"), mk("tools", "stack", 0, &yes, StatusCompleted, 8, 50000, 0.05))
	writeResult(t, filepath.Join(base, "tools", "b"), mk("tools", "drawer", 0, &yes, StatusCompleted, 12, 90000, 0.09))
	writeResult(t, filepath.Join(base, "tools", "c"), mk("tools", "three", 0, &yes, StatusCompleted, 20, 150000, 0.15))

	rows, errs := LoadRuns([]string{filepath.Join(base, "cells"), filepath.Join(base, "missing")})
	var marked map[string]any
	b, _ := os.ReadFile(filepath.Join(base, "cells", "e", "result.json"))
	if json.Unmarshal(b, &marked); marked["status"] != StatusInterrupted || marked["pid"] != nil {
		t.Errorf("killed play's result.json not marked: %v %v", marked["status"], marked["pid"])
	}
	if len(rows) != 5 || len(errs) != 2 {
		t.Fatalf("rows %d errs %v", len(rows), errs)
	}
	var sawCorrupt, sawMissing bool
	for _, e := range errs {
		sawCorrupt = sawCorrupt || strings.HasSuffix(e.Path, "corrupt") && strings.Contains(e.Err, "corrupt")
		sawMissing = sawMissing || strings.HasSuffix(e.Path, "missing")
	}
	if !sawCorrupt || !sawMissing {
		t.Errorf("errors not named: %v", errs)
	}
	s := Summarize(rows)
	if s.NativeSRDenominator != 3 || s.Solved != 2 || s.Statuses[StatusInterrupted] != 1 || s.Statuses[StatusPlannerError] != 1 {
		t.Errorf("summary %+v", s)
	}
	if s.PerSolved == nil || s.PerSolved.LLMCalls != 5 || s.PerSolved.InputTokens != 25000 {
		t.Errorf("per solved %+v", s.PerSolved)
	}
	var buf bytes.Buffer
	WriteSummaryTable(&buf, rows, s)
	if !strings.Contains(buf.String(), "pyrualean:cells") || !strings.Contains(buf.String(), "interrupted") || !strings.Contains(buf.String(), "66.7% (2/3)") {
		t.Errorf("table:\n%s", buf.String())
	}

	left, _ := LoadRuns([]string{filepath.Join(base, "tools")})
	c := Compare(left, rows)
	if c.Pairs != 3 || c.JointlySolved != 2 || len(c.UnmatchedRight) != 2 || len(c.Duplicates) != 0 {
		t.Fatalf("compare %+v", c)
	}
	if c.Ratios.InputTokens == nil || *c.Ratios.InputTokens != 70000.0/25000.0 || *c.Ratios.LLMCalls != 2 {
		t.Errorf("ratios %+v", c.Ratios)
	}
	if c.Delta.CostUSD == nil || *c.Delta.CostUSD > -0.044 || *c.Delta.CostUSD < -0.046 {
		t.Errorf("delta %+v", c.Delta)
	}
	dup := Compare(append(left, left[0]), rows)
	if len(dup.Duplicates) != 1 {
		t.Errorf("duplicates %v", dup.Duplicates)
	}
}

func TestLoadActions(t *testing.T) {
	dir := t.TempDir()
	py := filepath.Join(dir, "s.py")
	os.WriteFile(py, []byte("# %% [markdown]\n# title\n\n# %%\na = 1\n\n# %%\nprint(a)\n"), 0o644)
	acts, err := LoadActions(py, ArmCells)
	if err != nil || len(acts) != 2 || acts[0].Tool != "python" || !strings.Contains(string(acts[1].Args), "print(a)") {
		t.Fatalf("%v %v", acts, err)
	}
	if _, err := LoadActions(py, ArmTools); err == nil {
		t.Error("a script replayed in the tools arm")
	}
	nb := &notebooks.Notebook{Nbformat: 4, NbformatMinor: 5, Metadata: map[string]any{}, Cells: []notebooks.Cell{
		{ID: "a", CellType: "code", Source: "from pyrualean_robot import make; robo = make()", Metadata: map[string]any{"pyrualean": map[string]any{"author": "setup"}}},
		{ID: "b", CellType: "code", Source: "robo.pick(object=\"x\")", Metadata: map[string]any{"pyrualean": map[string]any{"author": "tool", "tool": "pick", "args": map[string]any{"object": "x"}}}},
		{ID: "c", CellType: "code", Source: "h = 1", Metadata: map[string]any{"pyrualean": map[string]any{"author": "human"}}},
		{ID: "d", CellType: "markdown", Source: "**finish** — status `success`\n\ndone it", Metadata: map[string]any{"pyrualean": map[string]any{"author": "agent", "tool": "finish", "status": "success"}}},
	}}
	ipynb := filepath.Join(dir, "t.ipynb")
	if err := notebooks.WriteFileAtomic(ipynb, nb); err != nil {
		t.Fatal(err)
	}
	acts, err = LoadActions(ipynb, ArmTools)
	if err != nil || len(acts) != 2 || acts[0].Tool != "pick" || string(acts[0].Args) != `{"object":"x"}` || acts[1].Tool != "finish" || !strings.Contains(string(acts[1].Args), "done it") {
		t.Fatalf("%+v %v", acts, err)
	}
	acts, err = LoadActions(ipynb, ArmCells)
	if err != nil || len(acts) != 2 || acts[0].Tool != "python" {
		t.Fatalf("cells: %+v %v", acts, err)
	}
}

func TestGatePauseStepResume(t *testing.T) {
	g := newGate()
	ctx := context.Background()
	if err := g.wait(ctx); err != nil {
		t.Fatal(err)
	}
	blocked := func() chan error {
		done := make(chan error, 1)
		go func() { done <- g.wait(ctx) }()
		select {
		case err := <-done:
			t.Fatalf("call went through while paused (%v)", err)
		case <-time.After(50 * time.Millisecond):
		}
		return done
	}
	g.pause()
	done := blocked()
	g.step()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done = blocked() // one step lets exactly one call through
	g.resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	g.pause()
	cctx, cancel := context.WithCancelCause(ctx)
	go func() { time.Sleep(20 * time.Millisecond); cancel(ErrBudgetExceeded) }()
	if err := g.wait(cctx); err != ErrBudgetExceeded {
		t.Errorf("paused wait on a cancelled context = %v", err)
	}
}

func TestDropOldImages(t *testing.T) {
	img := func() openai.ChatMessagePart {
		return openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "data:image/png;base64,AA=="}}
	}
	txt := func(s string) openai.ChatMessagePart {
		return openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: s}
	}
	msgs := []openai.ChatCompletionMessage{
		{Role: "user", MultiContent: []openai.ChatMessagePart{txt("prompt"), img(), img()}},
		{Role: "assistant", Content: "x"},
		{Role: "user", MultiContent: []openai.ChatMessagePart{txt("call 1"), img(), img()}},
		{Role: "user", MultiContent: []openai.ChatMessagePart{txt("call 2"), img(), img()}},
	}
	msgs = dropOldImages(msgs, 3)
	if n := countImages(msgs); n != 3 {
		t.Fatalf("%d images kept", n)
	}
	if p := msgs[0].MultiContent; len(p) != 2 || p[1].Text != droppedImageNote {
		t.Errorf("first message parts %+v", p)
	}
	if p := msgs[2].MultiContent; len(p) != 3 || p[1].Text != droppedImageNote || p[2].Type != openai.ChatMessagePartTypeImageURL {
		t.Errorf("call 1 parts %+v", p)
	}
}

package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/spec"
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
		spec.ImagesOnMotion: "agentview.png,wrist.png,display_0,display_1",
		spec.ImagesOnDemand: "wrist.png,display_0,display_1",
		spec.ImagesNone:     "display_0,display_1",
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
	res, fb := buildCellFeedback(cellRun{Index: 3, Outputs: outs, Elapsed: 1234 * time.Millisecond}, spec.FeedbackPure, spec.ImagesOnMotion, nil, styleOriginal)
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
	_, fb = buildCellFeedback(cellRun{Index: 1, TimedOut: true, Restarted: true, TimeoutS: 5}, spec.FeedbackRich, spec.ImagesOnMotion, nil, styleOriginal)
	if fb.Exception == nil || !strings.Contains(*fb.Exception, "RESTARTED") || fb.PrimitiveCalls == nil || fb.State == nil {
		t.Errorf("timeout feedback %+v", fb)
	}
}

func TestGatePauseStepResume(t *testing.T) {
	g := newGate(&policyClock{})
	ctx := context.Background()
	call := CellInfo{Tool: "python", Code: "robo.move_to([0.5, 0, 0.3])"}
	if held, err := g.toolWait(ctx, call); err != nil || held {
		t.Fatalf("running: held %v, err %v", held, err)
	}
	if err := g.awaitTurn(ctx); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		held bool
		err  error
	}
	blocked := func(what string, f func() outcome) chan outcome {
		done := make(chan outcome, 1)
		go func() { done <- f() }()
		select {
		case o := <-done:
			t.Fatalf("%s went through while paused (%+v)", what, o)
		case <-time.After(50 * time.Millisecond):
		}
		return done
	}
	decision := func() outcome { return outcome{err: g.awaitTurn(ctx)} }
	tool := func() outcome { h, err := g.toolWait(ctx, call); return outcome{h, err} }

	if err := g.step(); !errors.Is(err, ErrNotPaused) {
		t.Errorf("step while running: %v", err)
	}
	// A pause that comes while the model decides holds the decided call, and shows it.
	g.pause()
	done := blocked("a decided call", tool)
	if _, _, held := g.view(); held == nil || held.Code != call.Code {
		t.Errorf("held cell shown as %+v", held)
	}
	g.step()
	if o := <-done; o.err != nil || !o.held {
		t.Fatalf("stepped held call: %+v", o)
	}
	// Paused: the next decision waits; one step lets one decision, and all its calls, through.
	done = blocked("a decision", decision)
	if _, waiting, _ := g.view(); !waiting {
		t.Error("a decision waiting at the pause is not shown as waiting")
	}
	g.step()
	if o := <-done; o.err != nil {
		t.Fatal(o.err)
	}
	for range 2 {
		if held, err := g.toolWait(ctx, call); err != nil || held {
			t.Fatalf("a stepped decision's call: held %v, err %v", held, err)
		}
	}
	done = blocked("the next decision", decision) // one step lets exactly one decision through
	g.resume()
	if o := <-done; o.err != nil {
		t.Fatal(o.err)
	}
	g.pause()
	cctx, cancel := context.WithCancelCause(ctx)
	go func() { time.Sleep(20 * time.Millisecond); cancel(ErrBudgetExceeded) }()
	if err := g.awaitTurn(cctx); err != ErrBudgetExceeded {
		t.Errorf("paused wait on a cancelled context = %v", err)
	}
	g.close()
	if err := g.pause(); !errors.Is(err, ErrEpisodeOver) {
		t.Errorf("pause after the end: %v", err)
	}
	if err := g.awaitTurn(ctx); err != nil {
		t.Errorf("decision after the end: %v", err)
	}
}

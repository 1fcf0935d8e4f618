package kernel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
)

func TestExecuteOutputs(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	cases := []struct {
		name, code string
		check      func(t *testing.T, r *ExecuteResult)
	}{
		{"stdout merged", "for i in range(3): print(i)", func(t *testing.T, r *ExecuteResult) {
			want := []notebooks.Output{{OutputType: "stream", Name: "stdout", Text: "0\n1\n2\n"}}
			if len(r.Outputs) != 1 || r.Outputs[0].Text != want[0].Text || r.Outputs[0].Name != "stdout" {
				t.Fatalf("outputs = %+v, want %+v", r.Outputs, want)
			}
			if r.Status != "ok" || r.ExecutionCount == nil {
				t.Fatalf("status %q count %v", r.Status, r.ExecutionCount)
			}
		}},
		{"stderr", "import sys; sys.stderr.write('oops\\n');", func(t *testing.T, r *ExecuteResult) {
			if len(r.Outputs) != 1 || r.Outputs[0].Name != "stderr" || r.Outputs[0].Text != "oops\n" {
				t.Fatalf("outputs = %+v", r.Outputs)
			}
		}},
		{"execute_result", "40+2", func(t *testing.T, r *ExecuteResult) {
			if len(r.Outputs) != 1 || r.Outputs[0].OutputType != "execute_result" || r.Outputs[0].Data["text/plain"] != "42" {
				t.Fatalf("outputs = %+v", r.Outputs)
			}
			if r.Outputs[0].ExecutionCount == nil || *r.Outputs[0].ExecutionCount != *r.ExecutionCount {
				t.Fatalf("execution_count %v vs %v", r.Outputs[0].ExecutionCount, *r.ExecutionCount)
			}
		}},
		{"PIL png", "from PIL import Image\nfrom IPython.display import display\ndisplay(Image.new('RGB', (8, 4), 'red'))", func(t *testing.T, r *ExecuteResult) {
			if len(r.Outputs) != 1 || r.Outputs[0].OutputType != "display_data" {
				t.Fatalf("outputs = %+v", r.Outputs)
			}
			s, _ := r.Outputs[0].Data["image/png"].(string)
			png, err := base64.StdEncoding.DecodeString(s)
			if err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
				t.Fatalf("image/png is not a base64 PNG: %v %.20q", err, s)
			}
		}},
		{"error", "1/0", func(t *testing.T, r *ExecuteResult) {
			if r.Status != "error" || r.Error == nil || r.Error.Ename != "ZeroDivisionError" {
				t.Fatalf("status %q error %+v", r.Status, r.Error)
			}
			if len(r.Outputs) != 1 || r.Outputs[0].OutputType != "error" || len(r.Outputs[0].Traceback) == 0 {
				t.Fatalf("outputs = %+v", r.Outputs)
			}
		}},
		{"clear_output wait", "from IPython.display import clear_output\nprint('a')\nclear_output(wait=True)\nprint('b')", func(t *testing.T, r *ExecuteResult) {
			if len(r.Outputs) != 1 || r.Outputs[0].Text != "b\n" {
				t.Fatalf("outputs = %+v", r.Outputs)
			}
		}},
		{"update_display", "from IPython.display import display\nh = display('one', display_id=True)\nprint('x')\nh.update('two')", func(t *testing.T, r *ExecuteResult) {
			if len(r.Outputs) != 2 || r.Outputs[0].Data["text/plain"] != "'two'" || r.Outputs[0].DisplayID == "" {
				t.Fatalf("outputs = %+v", r.Outputs)
			}
		}},
		{"carriage return", "print('10%\\r50%\\r100%')", func(t *testing.T, r *ExecuteResult) {
			if len(r.Outputs) != 1 || r.Outputs[0].Text != "100%\n" {
				t.Fatalf("outputs = %q", r.Outputs[0].Text)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, execOK(t, c, tc.code)) })
	}
}

func TestExecuteStreamsOutputs(t *testing.T) {
	k := launchTest(t)
	var got []notebooks.Output
	r, err := k.Client().Execute(context.Background(),
		"import sys, time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b', flush=True)\nsys.stderr.write('c')\n7",
		ExecuteOptions{OnOutput: func(o notebooks.Output) { got = append(got, o) }, UserExpressions: map[string]string{"v": "6*7"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].Text != "a\n" || got[1].Text != "b\n" || got[2].Name != "stderr" || got[3].OutputType != "execute_result" {
		t.Fatalf("streamed %+v", got)
	}
	if len(r.Outputs) != 3 || r.Outputs[0].Text != "a\nb\n" {
		t.Fatalf("merged outputs %+v", r.Outputs)
	}
	if !strings.Contains(string(r.UserExpressions["v"]), `"42"`) {
		t.Fatalf("user_expressions %s", r.UserExpressions["v"])
	}
	tm := r.Timing
	if tm.Busy.IsZero() || tm.ExecuteInput.IsZero() || tm.ExecuteReply.IsZero() || tm.Idle.IsZero() || tm.Idle.Before(tm.Busy) {
		t.Fatalf("timing %+v", tm)
	}
}

// TestDisplayUpdateAcrossCells: an update for a display shown by an earlier cell is not appended to
// the later cell's outputs; it is handed back in DisplayUpdates for whoever keeps the earlier cell.
func TestDisplayUpdateAcrossCells(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	r1 := execOK(t, c, "from IPython.display import display\nh = display('v1', display_id='shared-id')")
	if len(r1.Outputs) != 1 || r1.Outputs[0].DisplayID != "shared-id" {
		t.Fatalf("first cell %+v", r1.Outputs)
	}
	r2 := execOK(t, c, "h.update('v2')")
	if len(r2.Outputs) != 0 || len(r2.DisplayUpdates) != 1 || r2.DisplayUpdates[0].DisplayID != "shared-id" ||
		r2.DisplayUpdates[0].Data["text/plain"] != "'v2'" {
		t.Fatalf("second cell outputs %+v updates %+v", r2.Outputs, r2.DisplayUpdates)
	}
}

// TestExecuteWaitsForABusyIOPubThread is how a flood lost its final print: once a flush has waited
// flush_timeout for ipykernel's iopub thread, the kernel sends execute_reply, and the flush's message
// goes out after the status idle; the client stopped at the idle (or gave up on a quiet iopub 10 s
// after the reply). Here the kernel's iopub thread is held for 12 s (flush_timeout shortened to 0.5 s,
// so the reply comes 11 s before the output, and the idle just before it).
func TestExecuteWaitsForABusyIOPubThread(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	t0 := time.Now()
	r, err := c.Execute(context.Background(), "import sys, time\nsys.stdout.flush_timeout = sys.stderr.flush_timeout = 0.5\n"+
		"print('before')\nsys.stdout.pub_thread.schedule(lambda: time.sleep(12))\nprint('FINAL')", ExecuteOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var stdout string
	for _, o := range r.Outputs {
		if o.Name == "stdout" {
			stdout += o.Text
		}
	}
	if stdout != "before\nFINAL\n" || r.OutputsIncomplete || r.Status != "ok" {
		t.Fatalf("status %q incomplete %v outputs %+v", r.Status, r.OutputsIncomplete, r.Outputs)
	}
	if took := time.Since(t0); took < r.Timing.Idle.Sub(r.Timing.Busy)+8*time.Second {
		t.Fatalf("the idle was not held up: made %v into the cell, which took %v", r.Timing.Idle.Sub(r.Timing.Busy), took)
	}
}

// TestExecuteLostIdle: a status idle that never comes (dropped inside the kernel here) ends the cell
// after a quiet iopub (lostIdleAfter, shortened here) with its outputs, marked incomplete.
func TestExecuteLostIdle(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	c.lostIdleAfter = 3 * time.Second
	t0 := time.Now()
	r, err := c.Execute(context.Background(), `_k = get_ipython().kernel
_orig = _k._publish_status
def _drop_idle_once(status, channel, parent=None):
    if status == "idle" and channel == "shell":
        _k._publish_status = _orig
        return
    return _orig(status, channel, parent)
_k._publish_status = _drop_idle_once
print("done")`, ExecuteOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OutputsIncomplete || len(r.Outputs) != 1 || r.Outputs[0].Text != "done\n" || time.Since(t0) > 20*time.Second {
		t.Fatalf("after %v: incomplete %v outputs %+v", time.Since(t0), r.OutputsIncomplete, r.Outputs)
	}
	if r2 := execOK(t, c, "print(6*7)"); r2.OutputsIncomplete || len(r2.Outputs) != 1 || r2.Outputs[0].Text != "42\n" {
		t.Fatalf("next cell %+v", r2)
	}
}

// TestExecuteFlood: a cell printing 50 MB keeps the head and tail of its text (its final print
// included) around a marker, says how much it dropped, holds about its limit in memory while the
// flood streams in rather than the flood, and the kernel serves on.
func TestExecuteFlood(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // the heap's high-water mark while the cell runs
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	r, err := c.Execute(context.Background(), "import sys\nprint('BEGIN')\nfor i in range(50):\n    print('x' * 999_999)\n    sys.stdout.flush()\nprint('FINAL')",
		ExecuteOptions{Timeout: 5 * time.Minute})
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	total := int64(len("BEGIN\n") + 50*1_000_000 + len("FINAL\n"))
	o := r.Omitted
	if len(r.Outputs) != 1 || r.Status != "ok" {
		t.Fatalf("status %q, %d outputs", r.Status, len(r.Outputs))
	}
	text := r.Outputs[0].Text
	if !strings.HasPrefix(text, "BEGIN\nxxx") || !strings.HasSuffix(text, "xxx\nFINAL\n") ||
		!strings.Contains(text, fmt.Sprintf("\n... [%d bytes omitted] ...\n", o.StreamBytes)) ||
		int64(len(text))-int64(len(omittedMarker(int(o.StreamBytes), 0, nil)))+o.StreamBytes != total || len(text) > DefaultStreamBytes+100 {
		t.Fatalf("%d bytes kept, omitted %+v, head %q, tail %q", len(text), o, text[:20], text[len(text)-20:])
	}
	grew, held := int64(peak.Load())-int64(before.HeapAlloc), int64(after.HeapAlloc)-int64(before.HeapAlloc)
	t.Logf("heap: peak +%.1f MB during the cell, +%.1f MB held after (output %.0f MB)", float64(grew)/1e6, float64(held)/1e6, float64(total)/1e6)
	if grew > total/2 || held > 4*DefaultStreamBytes {
		t.Fatalf("heap grew by %d bytes at peak, %d held, for %d bytes of output", grew, held, total)
	}
	if r2 := execOK(t, c, "print(6*7)"); len(r2.Outputs) != 1 || r2.Outputs[0].Text != "42\n" {
		t.Fatalf("the kernel after the flood: %+v", r2.Outputs)
	}
}

// TestPersonsCellFromSubscription is how a cell run by another client (a person in JupyterLab) is
// assembled from subscribed iopub messages: the same OutputBuilder, fed the messages whose parent is
// that cell's request, finished at its status idle, gives what Execute gives its own caller.
func TestPersonsCellFromSubscription(t *testing.T) {
	k := launchTest(t)
	ours := k.Client()
	msgs, missed, cancel := ours.SubscribeCounted(4096)
	defer cancel()
	person, err := Attach(context.Background(), k.ConnectionFile(), ClientOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer person.Close()
	code := "from IPython.display import display, clear_output\nimport sys\nh = display('v1', display_id=True)\n" +
		"for i in range(3): print(i, end='\\r')\nprint()\nsys.stderr.write('warn\\n')\nh.update('v2')\n40+2"
	theirs, err := person.Execute(context.Background(), code, ExecuteOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	b := NewOutputBuilder(OutputLimits{}) // what a watcher of people's cells does
	var cell string
	for m := range msgs {
		if m.Channel != IOPub {
			continue
		}
		if m.MsgType == "execute_input" && parentSession(t, m) == person.Session() {
			cell = m.ParentMsgID
		}
		if cell == "" || m.ParentMsgID != cell {
			continue
		}
		if m.MsgType == "status" && strings.Contains(string(m.Content), `"idle"`) {
			break
		}
		if err := b.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	got := b.Final()
	if missed() != 0 || !reflect.DeepEqual(got, theirs.Outputs) {
		t.Fatalf("missed %d; from the subscription\n%#v\nfrom Execute\n%#v", missed(), got, theirs.Outputs)
	}
	want := []string{"display_data 'v2'", "stream stdout 2\r\n", "stream stderr warn\n", "execute_result 42"}
	for i, o := range got {
		s := o.OutputType + " " + o.Name + " " + o.Text
		if o.Data != nil {
			s = fmt.Sprintf("%s %v", o.OutputType, o.Data["text/plain"])
		}
		if i >= len(want) || strings.ReplaceAll(s, "  ", " ") != want[i] {
			t.Errorf("output %d: %q, want %q", i, s, want[min(i, len(want)-1)])
		}
	}
}

func parentSession(t *testing.T, m *Message) string {
	var h struct {
		Session string `json:"session"`
	}
	if err := json.Unmarshal(m.ParentHeader, &h); err != nil {
		t.Fatal(err)
	}
	return h.Session
}

// TestExecutePartialOnError: a wait that ends early (here ctx) still hands over what had arrived.
func TestExecutePartialOnError(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := c.Execute(ctx, "import time\nprint('so far', flush=True)\ntime.sleep(2)\nprint('later')",
		ExecuteOptions{OnOutput: func(notebooks.Output) { cancel() }})
	if !errors.Is(err, context.Canceled) || r == nil || len(r.Outputs) != 1 || r.Outputs[0].Text != "so far\n" {
		t.Fatalf("err %v result %+v", err, r)
	}
	if r2 := execOK(t, c, "print(1)"); len(r2.Outputs) != 1 || r2.Outputs[0].Text != "1\n" {
		t.Fatalf("next cell %+v", r2.Outputs)
	}
}

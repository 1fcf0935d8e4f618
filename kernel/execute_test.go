package kernel

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

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

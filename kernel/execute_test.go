package kernel

import (
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

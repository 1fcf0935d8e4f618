package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// TestReconnectBrowser resumes from a page in Chromium (e2e/ws_resume.mjs), as JupyterLab's kernel
// connection does: a clean close after 0.5 s of reading, and a close after the page's thread was busy
// for 200 ms while frames arrived (the browser answers the gateway's pings in its network layer, and the
// page drops what it had not read when its socket closes: before browserHold, 370 of 3,000 lines were
// lost in each trial). Every one of the 3,000 printed lines must arrive, in order, in each trial; what
// comes twice (at most the last browserHold of frames) is counted.
func TestReconnectBrowser(t *testing.T) {
	nbtest.Heavy(t, "Chromium and a kernel")
	const tok, lines, trials = "tok", 3000, 3
	_, hs := startGateway(t, Config{Token: tok})
	e2e := filepath.Join(nbtest.Root(t), "e2e")
	if _, err := os.Stat(filepath.Join(e2e, "node_modules", "playwright-core")); err != nil {
		t.Fatalf("e2e/node_modules missing: run `npm ci` in e2e/ (scripts/setup.sh does): %v", err)
	}
	var want strings.Builder
	for i := range lines {
		fmt.Fprintf(&want, "%d\n", i)
	}
	for _, mode := range []string{"clean", "busy"} {
		t.Run(mode, func(t *testing.T) {
			var km kernelModel
			mustStatus(t, api(t, hs, tok, "POST", "/api/kernels", map[string]any{"name": "pyrualean"}, &km), 201, "start")
			defer api(t, hs, tok, "DELETE", "/api/kernels/"+km.ID, nil, nil)
			for trial := range trials {
				cmd := exec.Command("node", "ws_resume.mjs")
				cmd.Dir = e2e
				cmd.Env = append(os.Environ(), "BASE="+hs.URL, "KERNEL="+km.ID, "TOKEN="+tok, fmt.Sprintf("LINES=%d", lines),
					"READ_MS=500", "MODE="+mode)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("trial %d: ws_resume.mjs: %v\n%s", trial, err, out)
				}
				var got struct {
					Text         string `json:"text"`
					Repeats      int    `json:"repeats"`
					FramesBefore int    `json:"frames_before"`
					FramesAfter  int    `json:"frames_after"`
				}
				line := strings.TrimSpace(string(out))
				if err := json.Unmarshal([]byte(line[strings.LastIndexByte(line, '\n')+1:]), &got); err != nil {
					t.Fatalf("trial %d: output %q: %v", trial, out, err)
				}
				g := strings.Split(strings.TrimSuffix(got.Text, "\n"), "\n")
				if got.Text != want.String() {
					t.Errorf("trial %d: %d of %d lines arrived (first divergence near line %d); frames before the leave %d, after %d",
						trial, len(g), lines, firstDiff(g), got.FramesBefore, got.FramesAfter)
				}
				if got.FramesAfter == 0 {
					t.Logf("trial %d: the cell ended before the leave; the resume was not exercised", trial)
				}
				t.Logf("trial %d: %d lines; frames before the leave %d, after %d, repeated %d", trial, len(g), got.FramesBefore, got.FramesAfter, got.Repeats)
			}
		})
	}
}

package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pyrualean/pyrualean/gateway/jupytertest"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// TestReconnectPythonClient resumes with Python's websocket-client 1.9.2 (what many Jupyter tools use),
// driven as such tools drive it: read by the clock (0.5 s, or 0.3 s), then leave with a clean close or
// by shutting the socket down under it, and reconnect with the same session_id; as a plain recv loop
// and as a WebSocketApp on a thread closed from another; straight to the gateway and through
// jupyter_server in gateway mode. Every one of the 3,000 printed lines must arrive, in order, in each
// of 5 trials; what comes twice must open the resumed stream and be the tail read before the leave
// (at least once: the frames read after the last answered ping, ws.go). jupyter_server is a relay (its
// pongs say it read a frame, not that its client did: acks.go), so through it a resume repeats what
// was sent in the last relayHold; before that rule it lost one 10-line frame in about 1 trial of 5.
func TestReconnectPythonClient(t *testing.T) {
	const tok, lines, trials = "tok", 3000, 5
	_, hs := startGateway(t, Config{Token: tok})
	js := jupytertest.Start(t, "server", hs.URL, tok)
	py := filepath.Join(nbtest.Root(t), ".venv", "bin", "python")
	var want strings.Builder
	for i := range lines {
		fmt.Fprintf(&want, "%d\n", i)
	}
	routes := []struct {
		name  string
		hs    *httptest.Server
		token string
	}{{"direct", hs, tok}, {"jupyter_server", asServer(js), js.Token}}
	cases := []struct{ style, mode, readFor string }{
		{"recv", "clean", "0.5"}, {"recv", "shutdown", "0.3"}, {"app", "clean", "0.5"}, {"app", "shutdown", "0.3"},
	}
	for _, rt := range routes {
		for _, tc := range cases {
			t.Run(rt.name+"/"+tc.style+"/"+tc.mode, func(t *testing.T) {
				var km kernelModel
				mustStatus(t, api(t, rt.hs, rt.token, "POST", "/api/kernels", map[string]any{"name": "pyrualean"}, &km), 201, "start")
				defer api(t, rt.hs, rt.token, "DELETE", "/api/kernels/"+km.ID, nil, nil)
				lost := make([]int, trials)
				for trial := range trials {
					url := wsURL(rt.hs.URL, km.ID, uuid.NewString(), rt.token)
					out, err := exec.Command(py, "testdata/ws_resume.py", url, tc.style, tc.mode, tc.readFor, fmt.Sprint(lines)).Output()
					if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
						t.Fatalf("trial %d: websocket-client script: %v\n%s", trial, err, ee.Stderr)
					} else if err != nil {
						t.Fatal(err)
					}
					var got struct {
						Text         string `json:"text"`
						Repeats      int    `json:"repeats"`
						Tail         bool   `json:"repeats_are_tail"`
						FramesBefore int    `json:"frames_before"`
						FramesAfter  int    `json:"frames_after"`
					}
					if err := json.Unmarshal(out, &got); err != nil {
						t.Fatalf("trial %d: script output %q: %v", trial, out, err)
					}
					g := strings.Split(strings.TrimSuffix(got.Text, "\n"), "\n")
					lost[trial] = lines - len(g)
					if got.Text != want.String() {
						t.Errorf("trial %d: %d of %d lines arrived (first divergence near line %d); frames before the leave %d, after %d",
							trial, len(g), lines, firstDiff(g), got.FramesBefore, got.FramesAfter)
					}
					if !got.Tail {
						t.Errorf("trial %d: %d frames came twice, not only the tail read before the leave", trial, got.Repeats)
					}
					if got.FramesAfter == 0 {
						t.Logf("trial %d: the cell ended before the leave; the resume was not exercised", trial)
					}
					t.Logf("trial %d: %d lines; frames before the leave %d, after %d, repeated %d", trial, len(g), got.FramesBefore, got.FramesAfter, got.Repeats)
				}
				t.Logf("lines lost per trial: %v", lost)
			})
		}
	}
}

package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
)

// readWire reads one legacy frame from a raw socket (the test drives reads itself, so it knows
// exactly which frames it consumed before closing).
func readWire(t *testing.T, ws *websocket.Conn) (*wireMsg, error) {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	kind, data, err := ws.ReadMessage()
	if err != nil {
		return nil, err
	}
	var m *wireMsg
	if kind == websocket.BinaryMessage {
		m, err = decodeLegacyBinary(data)
	} else {
		m, err = decodeLegacyText(data)
	}
	if err != nil {
		t.Fatalf("undecodable frame: %v", err)
	}
	return m, nil
}

// TestReconnectLosesNothing: a cell prints 3000 lines in 300 stream messages; the client closes its
// socket mid-stream (a clean close frame, or the TCP connection just dropped) and reconnects with the
// same session_id. Every line must arrive, in order.
//
// What the client read is known from the pongs that reached us, and each answers the ping after a
// frame: the last frames read before the close, whose pings were not answered (a close frame stops the
// pongs; a TCP reset drops those its kernel had not sent yet), come again. So the resumed stream may
// start with a repeat of the tail read before the close (at least once); nothing may be missing, and
// nothing else may repeat.
func TestReconnectLosesNothing(t *testing.T) {
	const tok = "tok"
	_, hs := startGateway(t, Config{Token: tok})
	var km kernelModel
	mustStatus(t, api(t, hs, tok, "POST", "/api/kernels", map[string]any{"name": "pyrualean"}, &km), 201, "start")
	var want strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&want, "%d\n", i)
	}
	code := "import sys\nfor i in range(3000):\n    print(i)\n    if i % 10 == 9: sys.stdout.flush()\n"
	dial := func(session string) *websocket.Conn {
		ws, _, err := websocket.DefaultDialer.Dial(wsURL(hs.URL, km.ID, session, tok), nil)
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	repeated := map[string]int{} // mode -> frames delivered twice, over all trials
	for _, mode := range []string{"clean", "abrupt"} {
		for trial := range 20 {
			session := uuid.NewString()
			ws := dial(session)
			c := &wsClient{t: t, ws: ws, session: session}
			id := c.execute(code)
			var got strings.Builder
			seen := map[string]bool{}
			var before, after []string // the cell's message ids read before the close and after the resume
			resumed := false
			take := func(m *wireMsg) (done bool) {
				if m.ParentMsgID != id {
					return false
				}
				if resumed {
					after = append(after, m.MsgID)
				} else {
					if seen[m.MsgID] {
						t.Fatalf("%s trial %d: message %s (%s) delivered twice on one socket", mode, trial, m.MsgID, m.MsgType)
					}
					before = append(before, m.MsgID)
				}
				if !seen[m.MsgID] && m.MsgType == "stream" {
					var s struct{ Text string }
					_ = json.Unmarshal(m.Content, &s)
					got.WriteString(s.Text)
				}
				seen[m.MsgID] = true
				return m.MsgType == "status" && statusOf(m) == "idle"
			}
			// Close after a different number of stream messages each trial, mid-output.
			closeAfter, streams, finished := 1+(trial*13)%200, 0, false
			for streams < closeAfter && !finished {
				m, err := readWire(t, ws)
				if err != nil {
					t.Fatalf("%s trial %d: read before close: %v", mode, trial, err)
				}
				finished = take(m)
				if m.MsgType == "stream" && m.ParentMsgID == id {
					streams++
				}
			}
			if mode == "clean" {
				// As a browser does after close(): what arrives after our close frame is not read.
				_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				for {
					if _, err := readWire(t, ws); err != nil {
						break
					}
				}
			}
			ws.Close()
			if !finished {
				ws = dial(session)
				resumed = true
				for !finished {
					m, err := readWire(t, ws)
					if err != nil {
						t.Fatalf("%s trial %d: read after reconnect: %v (got %d bytes)", mode, trial, err, got.Len())
					}
					finished = take(m)
				}
				ws.Close()
			}
			// What repeats is a prefix of the resumed stream equal to the tail read before the close.
			readBefore := map[string]bool{}
			for _, m := range before {
				readBefore[m] = true
			}
			repeats := 0
			for repeats < len(after) && readBefore[after[repeats]] {
				repeats++
			}
			if repeats > 0 && strings.Join(after[:repeats], " ") != strings.Join(before[len(before)-repeats:], " ") {
				t.Fatalf("%s trial %d: %d frames repeated after the resume, not the tail read before the close", mode, trial, repeats)
			}
			for i, m := range after[repeats:] {
				if readBefore[m] || slices.Contains(after[repeats:repeats+i], m) {
					t.Fatalf("%s trial %d: message %s delivered twice", mode, trial, m)
				}
			}
			repeated[mode] += repeats
			if got.String() != want.String() {
				g := strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
				t.Fatalf("%s trial %d (closed after %d streams): %d of 3000 lines arrived; first divergence near line %d",
					mode, trial, closeAfter, len(g), firstDiff(g))
			}
		}
	}
	t.Logf("20 trials each: 0 lines lost; frames repeated after a resume: clean %d, abrupt %d", repeated["clean"], repeated["abrupt"])
}

func firstDiff(lines []string) int {
	for i, l := range lines {
		if l != fmt.Sprint(i) {
			return i
		}
	}
	return len(lines)
}

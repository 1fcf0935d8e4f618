package rayjob

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// TestNew: the address must be the dashboard's URL; authentication comes from the variables Ray's
// own clients read.
func TestNew(t *testing.T) {
	for _, c := range []struct {
		name, address, headers, token string
		want                          string // error text, or the Authorization header
	}{
		{"plain", "http://head:8265", "", "", ""},
		{"token", "https://head:8265/", "", "tok", "Bearer tok"},
		{"headers win", "http://head:8265", `{"Authorization": "Basic x"}`, "tok", "Basic x"},
		{"bad headers", "http://head:8265", `[1]`, "", "error: $RAY_JOB_HEADERS"},
		{"no scheme", "head:8265", "", "", `error: ray address "head:8265"`},
		{"ray scheme", "ray://head:10001", "", "", "error: ray address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("RAY_JOB_HEADERS", c.headers)
			t.Setenv("RAY_AUTH_TOKEN", c.token)
			cl, err := New(c.address)
			if want, isErr := strings.CutPrefix(c.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err %v, want %q", err, want)
				}
				return
			}
			if err != nil || cl.Header.Get("Authorization") != c.want || strings.HasSuffix(cl.Address, "/") {
				t.Fatalf("%+v %v", cl, err)
			}
		})
	}
}

// TestTailJoinsPieces: the dashboard sends the log in pieces that cut lines anywhere (Ray's
// file_tail_iterator: 10 lines or 20000 characters); Tail gives whole lines, the last one too.
func TestTailJoinsPieces(t *testing.T) {
	long := strings.Repeat("x", 50000)
	pieces := []string{"first\nsec", "ond\n" + long[:20000], long[20000:], "\nlast without newline"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/jobs/job-1/logs/tail" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		for _, p := range pieces {
			ws.WriteMessage(websocket.TextMessage, []byte(p))
		}
		ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		ws.Close()
	}))
	defer srv.Close()
	t.Setenv("RAY_AUTH_TOKEN", "tok")
	cl, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	if err := cl.Tail(context.Background(), "job-1", func(l string) { lines = append(lines, l) }); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 4 || lines[0] != "first" || lines[1] != "second" || lines[2] != long || lines[3] != "last without newline" {
		t.Fatalf("%d lines: %.40q", len(lines), lines)
	}
	if err := cl.Tail(context.Background(), "job-2", func(string) {}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown job: %v", err)
	}
}

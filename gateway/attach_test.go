package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAttachLive: what AttachLive makes of the Jupyter Server's answers: a live document, a server
// without pyrualean's extension (Tornado's HTML 404) or without jupyter-collaboration (the extension's
// JSON 404), and an error the extension names.
func TestAttachLive(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		body    string
		noLive  bool
		wantErr string
	}{
		{"live", 200, `{"path": "pyrualean-episodes/ep-1.ipynb", "kernel_id": "k1", "session_id": "s1"}`, false, ""},
		{"no extension", 404, `<html><body>404 : Not Found</body></html>`, true, ""},
		{"no collaboration", 404, `{"message": "jupyter-collaboration is not enabled on this server: no live documents"}`, true, ""},
		{"unknown episode", 404, `{"message": "no live episode 'ep-1' on the gateway"}`, false, "no live episode"},
		{"gateway gone", 502, `{"message": "the episode's gateway is gone: refused"}`, false, "gateway is gone"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got *http.Request
			var body string
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r
				b, _ := io.ReadAll(r.Body)
				body = string(b)
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer hs.Close()
			res, err := AttachLive(context.Background(), AttachOptions{ServerURL: hs.URL, ServerToken: "lt", Path: "/pyrualean-episodes/ep-1.ipynb"}, "ep-1")
			if got.URL.Path != "/pyrualean/api/episodes/ep-1/live" || got.Header.Get("Authorization") != "token lt" ||
				body != `{"path":"pyrualean-episodes/ep-1.ipynb"}` {
				t.Errorf("request %s %q %q", got.URL.Path, got.Header.Get("Authorization"), body)
			}
			switch {
			case c.noLive:
				if !errors.Is(err, ErrNoLiveDocuments) {
					t.Errorf("err %v, want ErrNoLiveDocuments", err)
				}
			case c.wantErr != "":
				if err == nil || errors.Is(err, ErrNoLiveDocuments) || !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("err %v, want one saying %q", err, c.wantErr)
				}
			default:
				if err != nil || res.KernelID != "k1" || res.Path != "pyrualean-episodes/ep-1.ipynb" ||
					res.URL != hs.URL+"/lab/tree/pyrualean-episodes/ep-1.ipynb?token=lt" {
					t.Errorf("res %+v err %v", res, err)
				}
			}
		})
	}
}

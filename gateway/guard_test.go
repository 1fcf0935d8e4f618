package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestRefusesWhatJupyterRefuses: a Host that is not ours (DNS rebinding) gets 403 before anything
// else, an oversized body 413, a wrong method one JSON 405 with Allow, each with a {reason,message} body.
func TestRefusesWhatJupyterRefuses(t *testing.T) {
	_, hs := serveGateway(t, Config{Token: "secret", AllowHosts: []string{"gw.internal"}})
	tests := []struct {
		name, method, path, host, body string
		want                           int
		allow                          string
	}{
		{"rebinding host", "GET", "/api/kernels", "evil.example", "", 403, ""},
		{"rebinding host with port", "GET", "/api", "evil.example:8888", "", 403, ""},
		{"rebinding host before auth", "GET", "/api/kernels?token=nope", "evil.example", "", 403, ""},
		{"rebinding host on a kernel's socket", "GET", "/api/kernels/x/channels", "evil.example", "", 403, ""},
		{"localhost", "GET", "/api/kernels", "localhost:8888", "", 200, ""},
		{"loopback v4", "GET", "/api/kernels", "127.0.0.1:8888", "", 200, ""},
		{"loopback v6", "GET", "/api/kernels", "[::1]:8888", "", 200, ""},
		{"configured name", "GET", "/api/kernels", "GW.internal:80", "", 200, ""},
		{"body too large", "POST", "/api/kernels", "", `{"name":"` + strings.Repeat("x", 2<<20) + `"}`, 413, ""},
		{"session body too large", "POST", "/api/sessions", "", `{"path":"` + strings.Repeat("x", 2<<20) + `"}`, 413, ""},
		{"bad json", "POST", "/api/kernels", "", `{"name":`, 400, ""},
		{"wrong method", "PUT", "/api/kernels", "", "", 405, "GET, HEAD, POST"},
		{"wrong method on an action", "GET", "/api/kernels/x/restart", "", "", 405, "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, hs.URL+tt.path, strings.NewReader(tt.body))
			if tt.host != "" {
				req.Host = tt.host
			}
			req.Header.Set("Authorization", "token secret")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("got %d, want %d: %s", resp.StatusCode, tt.want, raw)
			}
			if tt.want >= 400 {
				var e errorBody
				if json.Unmarshal(raw, &e) != nil || e.Reason == "" || e.Message == "" {
					t.Fatalf("error without a {reason,message} body: %s", raw)
				}
			}
			if tt.allow != "" && resp.Header.Get("Allow") != tt.allow {
				t.Fatalf("Allow %q, want %q", resp.Header.Get("Allow"), tt.allow)
			}
		})
	}
}

package openenv

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// The /schema answer describes what the sessions send and take: real frames validate against it, and
// shapes an action may not have do not.
func TestSchemasDescribeTheFrames(t *testing.T) {
	schemas, err := Schemas()
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(name string) *jsonschema.Resolved {
		t.Helper()
		b, _ := json.Marshal(schemas[name])
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	action := resolve("action")
	tests := []struct {
		action string
		ok     bool
	}{
		{`{"code": "print(1)"}`, true},
		{`{"tool": "python", "arguments": {"code": "1"}}`, true},
		{`{"tool": "finish"}`, true},
		{`{"code": 1}`, false},
		{`{"tool": "python", "code": "1"}`, false},
		{`{"arguments": {}}`, false},
		{`[]`, false},
	}
	for _, tc := range tests {
		var v any
		json.Unmarshal([]byte(tc.action), &v)
		if err := action.Validate(v); (err == nil) != tc.ok {
			t.Errorf("action %s: %v, want ok %v", tc.action, err, tc.ok)
		}
	}
	one := 1.0
	frame, _ := json.Marshal(StepData{Observation: Observation{Text: "ok", Images: []Image{{Name: "agentview.png", MimeType: "image/png", Data: "AA=="}},
		Metadata: map[string]any{"cell": 1}}, Reward: &one, Done: true})
	var v any
	json.Unmarshal(frame, &v)
	if err := resolve("observation").Validate(v); err != nil {
		t.Errorf("an observation frame's data does not validate: %v\n%s", err, frame)
	}
}

func TestDescribeRoutes(t *testing.T) {
	mux := http.NewServeMux()
	for p, h := range Describe("v9") {
		mux.Handle(p, h)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(method, path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(b, &m) != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return m
	}
	if m := get("GET", "/health", ""); m["status"] != "healthy" {
		t.Errorf("health: %v", m)
	}
	if m := get("GET", "/metadata", ""); m["name"] != "pyrualean" || m["version"] != "v9" || m["description"] == "" {
		t.Errorf("metadata: %v", m)
	}
	paths := get("GET", "/openapi.json", "")["paths"].(map[string]any)
	for _, p := range []string{"/reset", "/step", "/state"} {
		if _, ok := paths[p]; ok {
			t.Errorf("openapi lists %s: sessions are over /ws only (production mode)", p)
		}
	}
	for _, tc := range []struct {
		body string
		code float64
	}{
		{`{}`, -32600},
		{`not json`, -32700},
		{`{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}`, -32601},
	} {
		m := get("POST", "/mcp", tc.body)
		if e, _ := m["error"].(map[string]any); m["jsonrpc"] != "2.0" || e == nil || e["code"] != tc.code {
			t.Errorf("mcp %s: %v, want error %v", tc.body, m, tc.code)
		}
	}
}

package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/mcp"
	"github.com/pyrualean/pyrualean/spec"
	"github.com/pyrualean/pyrualean/spec/spectest"
)

// startEpisode boots a real episode: a pyrualean kernel with the tabletop robot.
func startEpisode(t *testing.T, mod func(*spec.Episode)) *agent.Episode {
	t.Helper()
	cfg := spectest.Tabletop(t, func(s *spec.Episode) { mod(s); s.Policy = spec.Policy{Runtime: "mcp"} })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	ep, err := agent.StartEpisode(ctx, cfg, agent.Host{})
	if err != nil {
		t.Fatalf("StartEpisode: %v", err)
	}
	t.Logf("episode booted in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { ep.Finish(context.Background(), "", nil) })
	return ep
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func images(res *sdk.CallToolResult) int {
	n := 0
	for _, c := range res.Content {
		if ic, ok := c.(*sdk.ImageContent); ok && ic.MIMEType == "image/png" && len(ic.Data) > 8 && string(ic.Data[1:4]) == "PNG" {
			n++
		}
	}
	return n
}

func TestServeCellsEpisodeOverHTTP(t *testing.T) {
	ep := startEpisode(t, func(s *spec.Episode) { s.Arm = spec.ArmCells; s.MaxCalls = 4; s.Images = spec.ImagesOnDemand })
	hs, err := mcp.ListenHTTP(mcp.NewServer(ep.Toolkit(), mcp.Options{}), "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("tool %s: readOnlyHint not set: %+v", tool.Name, tool.Annotations)
		}
		if tool.OutputSchema != nil {
			t.Errorf("tool %s has an output schema", tool.Name)
		}
	}
	if strings.Join(names, ",") != "finish,python" && strings.Join(names, ",") != "python,finish" {
		t.Fatalf("tools = %v, want python and finish", names)
	}

	call := func(name string, args map[string]any) *sdk.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("CallTool %s: %v", name, err)
		}
		if res.StructuredContent != nil {
			t.Errorf("%s: structured content present (Claude Code would drop the images)", name)
		}
		return res
	}
	cases := []struct {
		name     string
		tool     string
		args     map[string]any
		wantErr  bool
		wantText string
		images   int
	}{
		{"print", "python", map[string]any{"code": "print(6*7)"}, false, "42", 0},
		{"exception is a normal result", "python", map[string]any{"code": "1/0"}, false, "ZeroDivisionError", 0},
		{"display attaches a png", "mcp__pyrualean__python", map[string]any{"code": "import numpy as np\ndisplay(np.zeros((16, 16, 3), np.uint8))"}, false, "", 1},
		{"unknown tool", "teleport", map[string]any{"to": "moon"}, true, "teleport", 0},
		{"call budget", "python", map[string]any{"code": "print(1)"}, false, "", 0},
		{"budget exhausted", "python", map[string]any{"code": "print(2)"}, true, "budget", 0},
		{"finish", "finish", map[string]any{"status": "failure", "summary": "test"}, false, "", 0},
	}
	for _, c := range cases {
		res := call(c.tool, c.args)
		got := text(res)
		t.Logf("%s: isError=%v images=%d text=%.300s", c.name, res.IsError, images(res), got)
		if res.IsError != c.wantErr {
			t.Errorf("%s: isError = %v, want %v", c.name, res.IsError, c.wantErr)
		}
		if !strings.Contains(got, c.wantText) {
			t.Errorf("%s: text %q lacks %q", c.name, got, c.wantText)
		}
		if images(res) != c.images {
			t.Errorf("%s: %d images, want %d", c.name, images(res), c.images)
		}
	}
	if !ep.Finished() {
		t.Error("episode not finished after finish")
	}
	r, err := ep.Finish(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	t.Logf("result: %.600s", b)
	if _, err := os.Stat(filepath.Join(ep.Dir(), "trace.ipynb")); err != nil {
		t.Error(err)
	}
}

func TestObjectSchema(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `{"properties":{},"type":"object"}`},
		{`{"properties":{"code":{"type":"string"}},"required":["code"]}`, `{"properties":{"code":{"type":"string"}},"required":["code"],"type":"object"}`},
		{`{"type":"object","properties":{}}`, `{"properties":{},"type":"object"}`},
		{`{"type":"string"}`, `{"properties":{},"type":"object"}`},
		{`[1,2]`, `{"properties":{},"type":"object"}`},
	}
	for _, tc := range tests {
		got, _ := json.Marshal(mcp.ObjectSchema(json.RawMessage(tc.in)))
		if string(got) != tc.want {
			t.Errorf("ObjectSchema(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

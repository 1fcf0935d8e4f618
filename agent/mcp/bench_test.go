package mcp_test

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/mcp"
	"github.com/pyrualean/pyrualean/spec"
	"github.com/pyrualean/pyrualean/spec/spectest"
)

// BenchmarkToolCall measures what serving a cell over MCP (streamable HTTP, the go-sdk client)
// adds to the same cell called on the Toolkit directly, in one run, on one real episode:
//
//	go test ./agent/mcp -run '^$' -bench ToolCall -benchtime 40x
func BenchmarkToolCall(b *testing.B) {
	s := spectest.Tabletop(b, func(s *spec.Episode) { s.Images, s.Policy = spec.ImagesNone, spec.Policy{Runtime: "bench"} })
	ep, err := agent.StartEpisode(context.Background(), s, agent.Host{})
	if err != nil {
		b.Fatal(err)
	}
	defer ep.Finish(context.Background(), "", nil)
	hs, err := mcp.ListenHTTP(mcp.NewServer(ep.Toolkit(), mcp.Options{}), "127.0.0.1:0", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer hs.Close()
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "0"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"code": "x = 1"}
	raw, _ := json.Marshal(args)
	medians := map[string]time.Duration{}
	for _, mode := range []string{"direct", "mcp-http"} {
		b.Run(mode, func(b *testing.B) {
			var d []time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if mode == "direct" {
					if _, err := ep.Toolkit().Call(ctx, "python", raw); err != nil {
						b.Fatal(err)
					}
				} else if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "python", Arguments: args}); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(start))
			}
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			medians[mode] = d[len(d)/2]
			b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "median-ms")
		})
	}
	if medians["direct"] > 0 {
		b.Logf("median cell: direct %s, over MCP %s, ratio %.2f", medians["direct"], medians["mcp-http"],
			float64(medians["mcp-http"])/float64(medians["direct"]))
	}
}

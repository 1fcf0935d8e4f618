package report

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/eval"
)

// TestReportNodes: the episodes table has a node column (Ray's node id, shortened, in full on hover)
// exactly when some episode ran on a Ray node, as eval --engine ray records in the manifest.
func TestReportNodes(t *testing.T) {
	for _, c := range []struct {
		name  string
		nodes []string // set on the first episodes, in order
		want  bool
	}{
		{"local", nil, false},
		{"ray", []string{"5ea54c30aa11bb22cc33dd44ee55ff6600112233445566778899aabb", "c80d7d75aa11bb22cc33dd44ee55ff6600112233445566778899aabb"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := layoutSuite(t)
			man, err := eval.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range c.nodes {
				man.Episodes[man.Order[i]].Node = n
			}
			b, _ := json.MarshalIndent(man, "", "  ")
			if err := os.WriteFile(eval.ManifestPath(dir), b, 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "report.html")
			if err := Write(context.Background(), Options{SuiteDir: dir, Out: out}); err != nil {
				t.Fatal(err)
			}
			page, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(page), "<th>node</th>"); got != c.want {
				t.Errorf("node column shown: %v, want %v", got, c.want)
			}
			for _, n := range c.nodes {
				if !strings.Contains(string(page), `<td title="`+n+`">`+n[:8]+`</td>`) {
					t.Errorf("node %s not in the episodes table", n[:8])
				}
			}
		})
	}
}

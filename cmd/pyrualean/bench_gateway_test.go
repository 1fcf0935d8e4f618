package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// TestBenchGatewayJSON runs a tiny bench (our gateway only, one kernel) through the real serve
// subcommand of a freshly built binary and checks the JSON shape the issue asks for.
func TestBenchGatewayJSON(t *testing.T) {
	bin := buildGatewayBin(t)
	var out, errb bytes.Buffer
	code := benchGatewayWith(context.Background(), bin, []string{"--json", "--servers", "ours", "--kernels", "1", "--n", "5", "--duration", "500ms"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var doc struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	names := map[string]bool{}
	for _, r := range doc.Rows {
		names[r["name"].(string)] = true
		for _, k := range []string{"unit", "better", "ours", "kernel_gateway", "jupyter_server"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("row %v lacks %q", r, k)
			}
		}
		if b := r["better"]; b != "lower" && b != "higher" {
			t.Fatalf("row %v: better=%v", r, b)
		}
		if r["ours"] == nil {
			t.Fatalf("row %v has no measurement for ours", r)
		}
	}
	for _, n := range []string{"ws_roundtrip_1plus1_p50", "throughput_1_kernels", "server_rss_per_kernel_at_1"} {
		if !names[n] {
			t.Fatalf("missing row %s in %v", n, names)
		}
	}
}

// buildGatewayBin builds bin/pyrualean into a temp dir (the test binary cannot serve).
func buildGatewayBin(t *testing.T) string {
	t.Helper()
	nbtest.Heavy(t, "gateways with real kernels")
	bin := filepath.Join(t.TempDir(), "pyrualean")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeSpec(t *testing.T, dir, name, body string) {
	t.Helper()
	d := filepath.Join(dir, "kernels", name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "kernel.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFindSpecsPrecedence(t *testing.T) {
	first, second, data := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("JUPYTER_PATH", first+string(os.PathListSeparator)+second)
	t.Setenv("JUPYTER_DATA_DIR", data)
	t.Setenv("VIRTUAL_ENV", "")
	t.Setenv("CONDA_PREFIX", "")
	writeSpec(t, first, "Shared", `{"argv":["a","{connection_file}"],"display_name":"First","language":"python"}`)
	writeSpec(t, second, "shared", `{"argv":["b"],"display_name":"Second","language":"python"}`)
	writeSpec(t, data, "mine", `{"argv":["c"],"display_name":"Mine","language":"r","interrupt_mode":"message","env":{"X":"${HOME}/x"}}`)
	writeSpec(t, data, "broken", `{not json`)
	writeSpec(t, data, "bad name!", `{"argv":["d"]}`)

	specs, err := FindSpecs()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]Spec{}
	for _, s := range specs {
		names[s.Name] = s
	}
	if s := names["shared"]; s.DisplayName != "First" {
		t.Errorf("JUPYTER_PATH order not honoured: %+v", s)
	}
	if s := names["mine"]; s.InterruptMode != "message" || s.Language != "r" || s.Env["X"] != "${HOME}/x" {
		t.Errorf("mine: %+v", s)
	}
	if _, ok := names["broken"]; ok {
		t.Error("broken kernel.json listed")
	}
	if _, ok := names["bad name!"]; ok {
		t.Error("invalid name listed")
	}
	s, err := FindSpec("SHARED")
	if err != nil || s.InterruptMode != "signal" || s.Argv[0] != "a" {
		t.Errorf("FindSpec case-insensitive: %+v %v", s, err)
	}
	if _, err := FindSpec("nope"); !errors.Is(err, ErrNoSuchKernel) {
		t.Errorf("missing: %v", err)
	}
}

func TestKernelEnv(t *testing.T) {
	t.Setenv("PYR_TEST_BASE", "/base")
	env := kernelEnv(map[string]string{"A": "${PYR_TEST_BASE}/a", "B": "spec"}, map[string]string{"B": "extra"})
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	if got["A"] != "/base/a" || got["B"] != "extra" || got["JPY_PARENT_PID"] == "" || got["PYR_TEST_BASE"] != "/base" {
		t.Fatalf("env %v", got)
	}
}

func TestConnectionFile(t *testing.T) {
	t.Setenv("JUPYTER_RUNTIME_DIR", t.TempDir())
	ci, err := newConnectionInfo()
	if err != nil {
		t.Fatal(err)
	}
	path, err := writeConnectionFile(ci)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	back, err := ReadConnectionFile(path)
	if err != nil || back != ci {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	ports := map[int]bool{ci.ShellPort: true, ci.IOPubPort: true, ci.StdinPort: true, ci.ControlPort: true, ci.HBPort: true}
	if len(ports) != 5 || ci.Key == "" || ci.SignatureScheme != "hmac-sha256" {
		t.Fatalf("connection info %+v", ci)
	}
}

package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWrite(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	cases := []struct {
		name     string
		existing os.FileMode // 0: no file before
		want     os.FileMode
	}{
		{"new file is 0644", 0, 0o644},
		{"replaced file keeps its mode", 0o600, 0o600},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name+".json")
			if c.existing != 0 {
				if err := os.WriteFile(p, []byte("old"), c.existing); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteJSON(p, map[string]int{"a": 1}); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(p)
			st, _ := os.Stat(p)
			if string(b) != "{\n  \"a\": 1\n}\n" || st.Mode().Perm() != c.want {
				t.Errorf("got %q mode %v, want mode %v", b, st.Mode().Perm(), c.want)
			}
			if stale, _ := filepath.Glob(TempPattern(p)); len(stale) != 0 {
				t.Errorf("temp files left: %v", stale)
			}
		})
	}
	if err := Write(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	p := filepath.Join(dir, "t")
	os.WriteFile(filepath.Join(dir, ".t.123.tmp"), nil, 0o644)
	RemoveStale(p)
	if stale, _ := filepath.Glob(TempPattern(p)); len(stale) != 0 {
		t.Errorf("RemoveStale left %v", stale)
	}
}

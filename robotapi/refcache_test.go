package robotapi

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// TestCachedReference: the reference from the cache is the package's own; a second ask reads the
// file (a planted one is what comes back, so the file is what is read), and a change of the
// package's sources is a new key.
func TestCachedReference(t *testing.T) {
	nbtest.Heavy(t, "the robot package's API reference")
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "refs")
	want, err := Reference(ctx, "", "", FormatText)
	if err != nil {
		t.Fatal(err)
	}
	got, err := CachedReference(ctx, dir, "", "", FormatText)
	if err != nil || got != want {
		t.Fatalf("cached reference differs (%v)", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "reference-*.txt"))
	if len(files) != 1 {
		t.Fatalf("cache files %v", files)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("cache folder mode %v", st.Mode().Perm())
	}
	os.WriteFile(files[0], []byte("planted"), 0o600)
	if got, _ := CachedReference(ctx, dir, "", "", FormatText); got != "planted" {
		t.Errorf("the second ask did not read the file: %.40q", got)
	}
	k1, err := referenceKey("tabletop", "full", FormatText)
	if err != nil {
		t.Fatal(err)
	}
	if k2, _ := referenceKey("tabletop", "full", FormatTools); k2 == k1 {
		t.Error("text and tools share a key")
	}
	root, _ := Root()
	extra := filepath.Join(root, "robotapi", "python", "pyrualean_robot", "zz_refcache_test_probe.py")
	if err := os.WriteFile(extra, []byte("# probe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(extra)
	if k3, _ := referenceKey("tabletop", "full", FormatText); k3 == k1 {
		t.Error("a new file in the package kept the key")
	}
}

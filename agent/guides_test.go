package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// With $RPENT_ROOT naming an RPent checkout, --guides copies the paper's three LIBERO guides from it, as
// the original does, and records each file's sha256 and that they are the paper's; a missing one is an
// error naming it; without $RPENT_ROOT the guides are pyrualean's own, and say so.
func TestPaperGuidesFromRPentRoot(t *testing.T) {
	nbtest.Heavy(t, "the robot registry (Python)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := nbtest.Root(t)
	rpent := t.TempDir()
	dir := filepath.Join(rpent, "robots", "libero", "guides")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	names := []string{"strict_hybrid_guide.md", "pro_hybrid_guide.md", "env_calibration.md"}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("# "+n+"\nthe paper's text\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("RPENT_ROOT", rpent)
	found, source, paper, err := gatherGuides(ctx, root, "libero")
	if err != nil || !paper || source != dir || len(found) != 3 {
		t.Fatalf("gatherGuides: %d guides from %q (paper %v): %v", len(found), source, paper, err)
	}
	f, err := openRunFolder(filepath.Join(t.TempDir(), "run"))
	if err != nil {
		t.Fatal(err)
	}
	copied, sums, err := copyGuides(found, f)
	if err != nil || len(copied) != 3 {
		t.Fatalf("copyGuides: %v %v", copied, err)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(f.dir, "workspace", "guides", n))
		sum := sha256.Sum256(b)
		if err != nil || !strings.Contains(string(b), "the paper's text") || sums[n] != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: %q, sha256 %q (%v)", n, b, sums[n], err)
		}
	}

	os.Remove(filepath.Join(dir, "env_calibration.md"))
	if _, _, _, err := gatherGuides(ctx, root, "libero"); err == nil || !strings.Contains(err.Error(), "env_calibration.md") ||
		!strings.Contains(err.Error(), "$RPENT_ROOT") {
		t.Errorf("a missing paper guide: %v", err)
	}

	t.Setenv("RPENT_ROOT", "")
	if _, source, paper, err := gatherGuides(ctx, root, "libero"); err != nil || paper || source != "pyrualean" {
		t.Errorf("without RPENT_ROOT: %q paper %v: %v", source, paper, err)
	}
}

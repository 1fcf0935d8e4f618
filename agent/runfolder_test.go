package agent

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// plantedFolder is a reused --out whose workspace an agent wrote: links out of it, a link loop, a chain
// of links longer than PATH_MAX once resolved, a FIFO and an oversized file.
func plantedFolder(t *testing.T) (out, outside string) {
	t.Helper()
	base := t.TempDir()
	out, outside = filepath.Join(base, "run"), filepath.Join(base, "outside")
	ws := filepath.Join(out, "workspace")
	for _, d := range []string{ws, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("HOST-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"guides":     outside,                              // --guides would write into outside/
		"abs.py":     filepath.Join(outside, "secret.txt"), // an absolute link out
		"rel.py":     "../../outside/secret.txt",           // a relative one
		"loop.py":    "loop.py",
		"environ.py": "/proc/self/environ",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	plantLongChain(t, ws)
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo.py"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "big.py"), make([]byte, MaxWorkspaceRead+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "ok.py"), []byte("def run(robo):\n    pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return out, outside
}

// plantLongChain builds ws/chain.py: a chain of links down 24 directories of 200-character names (made
// relative to each directory, as dir_fd calls do), whose resolved path is past PATH_MAX, ending in a
// link back up and out to outside/secret.txt. filepath.EvalSymlinks cannot resolve it; the kernel can.
func plantLongChain(t *testing.T, ws string) {
	t.Helper()
	const depth = 24
	name := strings.Repeat("d", 200)
	r, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	roots := []*os.Root{r}
	for range depth {
		cur := roots[len(roots)-1]
		if err := cur.Mkdir(name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := cur.OpenRoot(name)
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, next)
	}
	// The bottom: x -> back up to the run folder's parent, then outside/secret.txt.
	if err := roots[depth].Symlink(strings.Repeat("../", depth+2)+"outside/secret.txt", "x"); err != nil {
		t.Fatal(err)
	}
	// Each level's n leads one level down: n -> <name>/n, the last -> <name>/x.
	for i := depth - 1; i >= 0; i-- {
		target := name + "/n"
		if i == depth-1 {
			target = name + "/x"
		}
		link := "n"
		if i == 0 {
			link = "chain.py"
		}
		if err := roots[i].Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	for _, rt := range roots {
		rt.Close()
	}
	// The attack's precondition: the old check could not resolve it, the kernel follows it out.
	if _, err := filepath.EvalSymlinks(filepath.Join(ws, "chain.py")); err == nil {
		t.Fatalf("EvalSymlinks resolved the long chain: the test does not model the attack")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "chain.py")); err != nil || string(b) != "HOST-SECRET" {
		t.Fatalf("the kernel does not follow the chain out (%q, %v): the test does not model the attack", b, err)
	}
}

// TestRunFolderPlantedLinks: nothing the host reads or writes in a reused run folder follows a link out
// of it, and each refusal says why.
func TestRunFolderPlantedLinks(t *testing.T) {
	out, outside := plantedFolder(t)
	f, err := openRunFolder(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	tk := &programToolkit{e: &Episode{files: f}}
	for _, c := range []struct{ path, want string }{
		{"abs.py", "path escapes"},
		{"rel.py", "path escapes"},
		{"loop.py", "too many levels of symbolic links"},
		{"environ.py", "path escapes"},
		{"chain.py", "escapes|too many levels"},
		{"../outside/secret.txt", "path escapes"},
		{filepath.Join(outside, "secret.txt"), "outside the workspace"},
		{"/proc/self/environ", "outside the workspace"},
		{"fifo.py", "not a regular file"},
		{"big.py", "more than the"},
		{"missing.py", "no such file"},
		{"", "not a file name"},
		{"a\x00b", "not a file name"},
	} {
		src, err := tk.readWorkspaceFile(c.path)
		t.Logf("%q: %v", c.path, err)
		if err == nil || !regexp.MustCompile(c.want).MatchString(err.Error()) {
			t.Errorf("read %q: err %v, want %q", c.path, err, c.want)
		}
		if strings.Contains(src, "HOST-SECRET") || strings.Contains(src, "PATH=") {
			t.Errorf("read %q returned host content", c.path)
		}
	}
	for _, p := range []string{"ok.py", filepath.Join(out, "workspace", "ok.py"), "deep/../ok.py"} {
		if src, err := tk.readWorkspaceFile(p); err != nil || !strings.Contains(src, "def run") {
			t.Errorf("read %q: %q, %v", p, src, err)
		}
	}

	// --guides into the planted workspace: the link named guides is replaced by the guides' folder,
	// nothing is written through it.
	if _, _, err := copyGuides([]guide{{"hybrid_guide.md", "GUIDE"}}, f); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "workspace", "guides", "hybrid_guide.md")); err != nil || string(b) != "GUIDE" {
		t.Errorf("guides: %q, %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(out, "workspace", "guides")); err != nil || !fi.IsDir() {
		t.Errorf("workspace/guides is not a folder: %v %v", fi, err)
	}
	// A link planted inside the guides folder, pointing out, is replaced too.
	os.Symlink(filepath.Join(outside, "g.md"), filepath.Join(out, "workspace", "guides", "g.md"))
	if _, _, err := copyGuides([]guide{{"g.md", "G2"}}, f); err != nil {
		t.Fatal(err)
	}
	// Saving a cell over a planted link replaces the link, never writes through it.
	if err := f.writeWorkspace("abs.py", []byte("print(1)")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(out, "workspace", "abs.py")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("abs.py after save: %v %v", fi, err)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("files written outside the run folder: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "HOST-SECRET" {
		t.Errorf("the outside file changed: %q", b)
	}
}

// TestRunFolderRefusesLinkedWorkspace: a workspace that is itself a link (the sandbox and kernel get
// its path) or run-folder files that are links out are refused or replaced, never followed.
func TestRunFolderRefusesLinkedWorkspace(t *testing.T) {
	base := t.TempDir()
	out, outside := filepath.Join(base, "run"), filepath.Join(base, "outside")
	for _, d := range []string{out, outside} {
		os.MkdirAll(d, 0o755)
	}
	if err := os.Symlink(outside, filepath.Join(out, "workspace")); err != nil {
		t.Fatal(err)
	}
	if _, err := openRunFolder(out); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a linked workspace: %v", err)
	}
	os.Remove(filepath.Join(out, "workspace"))
	target := filepath.Join(outside, "victim")
	os.WriteFile(target, []byte("KEEP"), 0o644)
	os.Symlink(target, filepath.Join(out, "turns.jsonl"))
	if _, err := openRunFolder(out); err == nil {
		t.Errorf("turns.jsonl through a link opened")
	}
	os.Remove(filepath.Join(out, "turns.jsonl"))
	os.Symlink(target, filepath.Join(out, "result.json"))
	f, err := openRunFolder(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	if err := f.writeJSON("result.json", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "KEEP" {
		t.Errorf("result.json written through a link: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(out, "result.json")); err != nil || fi.Mode().Perm() != 0o644 || !fi.Mode().IsRegular() {
		t.Errorf("result.json: %v %v", fi, err)
	}
}

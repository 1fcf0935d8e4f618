// Package nbtest checks notebooks with Jupyter's own tools (the nbformat validator, nbconvert,
// nbclient) from Go tests. Any package whose tests write notebooks can call Validate on them.
// It also holds what every test package shares: the repository root, its venv's Python, and Heavy,
// the fast tier's skip.
package nbtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Root is the repository root: the nearest directory above the working directory holding go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("nbtest: no go.mod above the test directory")
		}
		dir = parent
	}
}

// Heavy skips the test under -short (`make test-fast`): it needs a real part that is slow to start or to
// run, named by what ("a real IPython kernel", "JupyterLab and Chromium", "a Ray cluster", "the llama.cpp
// model", "an episode: a kernel and the simulator"). `make test` runs it. Test helpers that start such a
// part call it, so a test needs no skip of its own and the pure tests of a heavy package still run.
func Heavy(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("heavy (needs %s): skipped under -short; make test runs it", what)
	}
}

// Python is the project's interpreter, <root>/.venv/bin/python. It must exist (set-up installs it).
func Python(t testing.TB) string {
	t.Helper()
	p := filepath.Join(Root(t), ".venv", "bin", "python")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("nbtest: %v (run scripts/setup.sh)", err)
	}
	return p
}

// validateScript validates every path given in argv with nbformat and prints one JSON line per file:
// {"path": ..., "error": null|"..."}. Reading uses as_version=4 without conversion, so the file is
// checked as written.
const validateScript = `
import json, sys, nbformat
from nbformat.validator import ValidationError
for path in sys.argv[1:]:
    err = None
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        if raw.get("nbformat") != 4 or raw.get("nbformat_minor", 0) < 5:
            err = "not nbformat 4.5+: %r.%r" % (raw.get("nbformat"), raw.get("nbformat_minor"))
        else:
            nbformat.validate(raw, version=4, version_minor=raw["nbformat_minor"])
            ids = [c.get("id") for c in raw["cells"]]
            if len(set(ids)) != len(ids):
                err = "duplicate cell ids"
    except ValidationError as e:
        err = "ValidationError: %s" % str(e)[:2000]
    except Exception as e:
        err = "%s: %s" % (type(e).__name__, e)
    print(json.dumps({"path": path, "error": err}), flush=True)
`

// ValidateErr runs the official nbformat validator (strict, nbformat 4.5+) over paths in one Python
// process and returns one error per invalid file, joined.
func ValidateErr(ctx context.Context, python string, paths ...string) error {
	if len(paths) == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, python, append([]string{"-c", validateScript}, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("nbformat validator: %w: %s", err, stderr.String())
	}
	var problems []string
	seen := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			Path  string
			Error *string
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return fmt.Errorf("nbformat validator: bad output %q: %w", line, err)
		}
		seen++
		if r.Error != nil {
			problems = append(problems, fmt.Sprintf("%s: %s", r.Path, *r.Error))
		}
	}
	if seen != len(paths) {
		return fmt.Errorf("nbformat validator: answered for %d of %d files: %s", seen, len(paths), stderr.String())
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid notebooks:\n%s", strings.Join(problems, "\n"))
	}
	return nil
}

// Validate fails the test unless every path passes the official nbformat validator.
func Validate(t testing.TB, paths ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := ValidateErr(ctx, Python(t), paths...); err != nil {
		t.Error(err)
	}
}

// ValidateBytes writes b to a temporary file and validates it.
func ValidateBytes(t testing.TB, b []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nb.ipynb")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	Validate(t, p)
}

// RenderHTML converts path with `jupyter nbconvert --to html` and returns the HTML.
func RenderHTML(t testing.TB, path string) string {
	t.Helper()
	Heavy(t, "Jupyter's nbconvert")
	dir := t.TempDir()
	jupyter := filepath.Join(Root(t), ".venv", "bin", "jupyter")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, jupyter, "nbconvert", "--to", "html", "--output-dir", dir, "--output", "out", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nbconvert --to html %s: %v\n%s", path, err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out.html"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Execute re-runs path with `jupyter nbconvert --to notebook --execute` (nbclient) on the given
// kernelspec and returns the executed notebook's path. Cell errors fail the test unless allowErrors.
func Execute(t testing.TB, path, kernelName string, allowErrors bool, timeout time.Duration) string {
	t.Helper()
	Heavy(t, "a real IPython kernel (nbclient)")
	dir := t.TempDir()
	jupyter := filepath.Join(Root(t), ".venv", "bin", "jupyter")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := []string{"nbconvert", "--to", "notebook", "--execute", "--output-dir", dir, "--output", "executed",
		"--ExecutePreprocessor.kernel_name=" + kernelName,
		fmt.Sprintf("--ExecutePreprocessor.timeout=%d", int(timeout.Seconds())),
	}
	if allowErrors {
		args = append(args, "--allow-errors")
	}
	args = append(args, path)
	cmd := exec.CommandContext(ctx, jupyter, args...)
	cmd.Dir = filepath.Dir(path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nbconvert --execute %s: %v\n%s", path, err, out)
	}
	return filepath.Join(dir, "executed.ipynb")
}

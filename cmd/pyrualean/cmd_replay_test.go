package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks"
)

// writeTrace writes a small trace whose recorded outputs are what IPython prints for its cells.
func writeTrace(t *testing.T, path string, secondOutput string) {
	t.Helper()
	tr, err := notebooks.NewTrace(path, notebooks.TraceMeta{Episode: map[string]any{"robot": "none"}})
	if err != nil {
		t.Fatal(err)
	}
	one := 1
	if err := tr.AddCode("x = 20\nprint('x is', x)", notebooks.CodeRun{ExecutionCount: &one, Outputs: []notebooks.Output{
		{OutputType: notebooks.OutputStream, Name: "stdout", Text: "x is 20\n"}}}, map[string]any{"author": "setup"}); err != nil {
		t.Fatal(err)
	}
	if err := tr.AddMarkdown("adding", map[string]any{"author": "agent"}); err != nil {
		t.Fatal(err)
	}
	two := 2
	if err := tr.AddCode("x + 22", notebooks.CodeRun{ExecutionCount: &two, Outputs: []notebooks.Output{
		{OutputType: notebooks.OutputExecuteResult, ExecutionCount: &two, Data: notebooks.MimeBundle{"text/plain": secondOutput}}}},
		map[string]any{"author": "agent"}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCmdReplay(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.ipynb"), filepath.Join(dir, "bad.ipynb")
	writeTrace(t, good, "42")
	writeTrace(t, bad, "43")
	tests := []struct {
		name string
		args []string
		code int
		want string // in stdout+stderr
	}{
		{"no trace", nil, 2, "want exactly one trace"},
		{"bad flag", []string{"--bogus", good}, 2, "flag provided but not defined"},
		{"bad tolerance", []string{good, "--img-tol", "2"}, 2, "tolerances"},
		{"missing file", []string{filepath.Join(dir, "nope.ipynb")}, 2, "no such file"},
		{"reproduces", []string{good, "--out", filepath.Join(dir, "new.ipynb")}, 0, "REPRODUCED"},
		{"diverges", []string{bad}, 1, "first divergent cell: 2"},
		{"until before the edit", []string{"--until", "1", bad}, 0, "partial replay"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cmdReplay(context.Background(), tc.args, &stdout, &stderr)
			all := stdout.String() + stderr.String()
			if code != tc.code || !strings.Contains(all, tc.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s", code, tc.code, tc.want, all)
			}
		})
	}
	nb, err := notebooks.ReadFile(filepath.Join(dir, "new.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	if got := nb.Cells[2].Outputs[0].Data["text/plain"]; got != "42" {
		t.Errorf("replayed notebook cell 2 = %v", got)
	}
}

package notebooks_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// corpus builds (once per test binary) notebooks written by nbformat after nbclient executed them
// on the pyrualean kernel, plus hand-written edge cases, all through nbformat.write.
var corpus = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "nbcorpus")
	if err != nil {
		return "", err
	}
	return dir, nil
})

func corpusDir(t *testing.T) string {
	t.Helper()
	dir, err := corpus()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "executed.ipynb")); err == nil {
		return dir
	}
	py := nbtest.Python(t)
	cmd := exec.Command(py, filepath.Join("testdata", "make_corpus.py"), dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make_corpus.py: %v\n%s", err, out)
	}
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if dir, err := corpus(); err == nil {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

func corpusFiles(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(corpusDir(t), "*.ipynb"))
	static, _ := filepath.Glob(filepath.Join("testdata", "*.ipynb"))
	files = append(files, static...)
	if len(files) < 3 {
		t.Fatalf("corpus too small: %v", files)
	}
	return files
}

// TestRoundTripCorpus: read then write is byte-identical for every notebook nbformat wrote.
func TestRoundTripCorpus(t *testing.T) {
	for _, path := range corpusFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			nb, err := notebooks.Read(bytes.NewReader(want))
			if err != nil {
				t.Fatal(err)
			}
			got, err := nb.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("round trip differs from nbformat's bytes:\n%s", firstDiff(got, want))
			}
		})
	}
}

// TestCorpusShape checks the reader's in-memory view of what nbclient produced: joined strings,
// every output type present, images kept as one base64 string.
func TestCorpusShape(t *testing.T) {
	nb, err := notebooks.ReadFile(filepath.Join(corpusDir(t), "executed.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	var png string
	for _, c := range nb.Cells {
		if c.ID == "" || c.Metadata["execution"] == nil {
			t.Errorf("cell %q lacks an id or metadata.execution: %v", c.Source, c.Metadata)
		}
		for _, o := range c.Outputs {
			types[o.OutputType]++
			if s, ok := o.Data["image/png"].(string); ok && png == "" {
				png = s
			}
		}
	}
	for _, ty := range []string{notebooks.OutputStream, notebooks.OutputDisplayData, notebooks.OutputExecuteResult, notebooks.OutputError} {
		if types[ty] == 0 {
			t.Errorf("no %s output in the corpus: %v", ty, types)
		}
	}
	if png == "" || strings.Contains(png, "\n") {
		t.Errorf("png should be one base64 string, got %.40q", png)
	}
	if got := nb.Cells[0].Outputs[0].Text; got != "hello\n" {
		t.Errorf("stream text joined = %q", got)
	}
}

// TestCanonicalisesLikeNbformat: for inputs nbformat did not write (unsplit strings, split pngs, key
// order, transient keys), our Read+Write equals nbformat.read+nbformat.write.
func TestCanonicalisesLikeNbformat(t *testing.T) {
	in := t.TempDir()
	cases := map[string]string{
		"unsplit.ipynb": `{"nbformat": 4, "nbformat_minor": 5, "metadata": {"signature": "sha256:x", "orig_nbformat": 3, "b": 1.50, "a": 1E3},
			"cells": [{"id": "a1", "cell_type": "code", "metadata": {"trusted": true}, "execution_count": 1,
			"source": "line1\nline2\r\nline3\u2028line4\u0085end",
			"outputs": [{"output_type": "stream", "name": "stdout", "text": "x\ny"},
			  {"output_type": "display_data", "metadata": {}, "data": {"image/png": ["iVBO\n", "Rw0K"], "text/plain": "a\nb", "text/markdown": ["# t\n", "x"], "application/json": ["not", "joined"]}}]},
			{"id": "b2", "cell_type": "markdown", "metadata": {}, "source": ["a", "b\n", "c"]}]}`,
		"compact.ipynb": `{"cells":[{"cell_type":"raw","id":"r","metadata":{},"source":""}],"metadata":{"x":"<&>\u2029\u007f\u0001"},"nbformat":4,"nbformat_minor":5}`,
	}
	var paths []string
	for name, body := range cases {
		p := filepath.Join(in, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out := t.TempDir()
	cmd := exec.Command(nbtest.Python(t), append([]string{filepath.Join("testdata", "make_corpus.py"), "--canon", out}, paths...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("canon: %v\n%s", err, b)
	}
	for _, p := range paths {
		want, err := os.ReadFile(filepath.Join(out, filepath.Base(p)))
		if err != nil {
			t.Fatal(err)
		}
		nb, err := notebooks.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := nb.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: differs from nbformat:\n%s", filepath.Base(p), firstDiff(got, want))
		}
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"not json", `{"cells": [`, "unexpected EOF"},
		{"list", `[]`, "top level is a list"},
		{"nbformat 2", `{"nbformat": 2, "nbformat_minor": 0, "metadata": {}, "worksheets": []}`, "nbformat 2"},
		{"v3 worksheets", `{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": {}}`, "worksheets is an object"},
		{"v3 cell type", `{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "widget"}]}]}`, "worksheet 0 cell 0"},
		// What nbformat's validator calls invalid is refused, in its words.
		{"code without outputs", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"id": "a", "cell_type": "code", "metadata": {}, "source": "1", "execution_count": null}]}`, `cell 0: notebooks: not a valid nbformat 4 notebook: invalid code cell: 'outputs' is a required property`},
		{"code without count", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"id": "a", "cell_type": "code", "metadata": {}, "source": "1", "outputs": []}]}`, `'execution_count' is a required property`},
		{"markdown without source", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"id": "a", "cell_type": "markdown", "metadata": {}}]}`, `invalid markdown cell: 'source' is a required property`},
		{"cell without metadata", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"id": "a", "cell_type": "raw", "source": ""}]}`, `invalid raw cell: 'metadata' is a required property`},
		{"no metadata", `{"nbformat": 4, "nbformat_minor": 5, "cells": []}`, `invalid notebook: 'metadata' is a required property`},
		{"result without count", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"id": "a", "cell_type": "code", "metadata": {}, "source": "", "execution_count": 1, "outputs": [{"output_type": "execute_result", "data": {}, "metadata": {}}]}]}`, `output 0: notebooks: not a valid nbformat 4 notebook: invalid execute_result output: 'execution_count' is a required property`},
		{"stream without name", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"id": "a", "cell_type": "code", "metadata": {}, "source": "", "execution_count": 1, "outputs": [{"output_type": "stream", "text": ""}]}]}`, `missing "name"`},
		{"error without traceback", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"id": "a", "cell_type": "code", "metadata": {}, "source": "", "execution_count": 1, "outputs": [{"output_type": "error", "ename": "E", "evalue": ""}]}]}`, `'traceback' is a required property`},
		{"missing minor", `{"nbformat": 4, "metadata": {}, "cells": []}`, `missing "nbformat_minor"`},
		{"cells not list", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": {}}`, "cells is an object"},
		{"bad cell type", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "heading", "metadata": {}, "source": ""}]}`, `unknown cell_type "heading"`},
		{"bad source", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "metadata": {}, "source": 5, "outputs": []}]}`, "source is a number"},
		{"bad output", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "metadata": {}, "source": "", "outputs": [{"output_type": "pyout"}]}]}`, `unsupported output_type "pyout"`},
		{"extra key", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [], "extra": 1}`, `unknown top-level key "extra"`},
		{"trailing", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []} {}`, "trailing data"},
		{"float count", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "metadata": {}, "source": "", "outputs": [], "execution_count": 1.5}]}`, "not an integer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := notebooks.Read(strings.NewReader(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
			if !errors.Is(err, notebooks.ErrFormat) {
				t.Errorf("err %v is not ErrFormat", err)
			}
		})
	}
}

// TestPythonFloatsAndStrings compares the writer's number and string encoding with Python's json on
// values built in Go (not read from text), where json.Number cannot help: floats must come out as
// Python writes the value it would read from encoding/json's text.
func TestPythonFloatsAndStrings(t *testing.T) {
	floats := []float64{0, 1, -1, 0.1, 1.5, 1e15, 1e16, 1.2345e16, 123456789012345.6, 1e-4, 1e-5, 0.00012345,
		2.5e-300, 1.7976931348623157e308, 5e-324, math.Copysign(0, -1), 3.141592653589793, 100, 1e22, 0.3}
	strs := []string{"", "a<b>&c", "\u2028\u2029", "\x00\x01\x1f\x7f", "tab\tnl\ncr\rbs\bff\f", `q"b\`, "🤖 é 中"}
	nb := notebooks.New()
	fl := make([]any, len(floats))
	for i, f := range floats {
		fl[i] = f
	}
	ss := make([]any, len(strs))
	for i, s := range strs {
		ss[i] = s
	}
	nb.Metadata["floats"] = fl
	nb.Metadata["strings"] = ss
	nb.Metadata["ints"] = []int{0, -5, 1 << 40}
	got, err := nb.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	fj, _ := json.Marshal(floats)
	sj, _ := json.Marshal(strs)
	script := fmt.Sprintf(`
import json, sys, nbformat
from nbformat.v4 import new_notebook
nb = new_notebook()
# What Python gets reading Go's encoding/json output: whole numbers come back as ints.
nb.metadata["floats"] = json.loads(%q)
nb.metadata["strings"] = json.loads(%q)
nb.metadata["ints"] = [0, -5, 1 << 40]
sys.stdout.write(nbformat.writes(nb) + "\n")
`, fj, sj)
	want, err := exec.Command(nbtest.Python(t), "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("differs from Python:\n%s", firstDiff(got, want))
	}
}

func TestWriteRejectsNaN(t *testing.T) {
	nb := notebooks.New()
	nb.Metadata["x"] = map[string]any{"y": []any{1.0, func() float64 { z := 0.0; return z / z }()}}
	if _, err := nb.Bytes(); !errors.Is(err, notebooks.ErrNotJSON) {
		t.Fatalf("err = %v, want ErrNotJSON", err)
	}
}

func TestCellIDs(t *testing.T) {
	nb := notebooks.New()
	seen := map[string]bool{}
	for i := 0; i < 2000; i++ {
		c := nb.AppendCell(notebooks.Cell{CellType: notebooks.CellCode, ID: "dup"})
		if seen[c.ID] {
			t.Fatalf("duplicate id %q", c.ID)
		}
		seen[c.ID] = true
	}
	if err := nb.Check(); err != nil {
		t.Fatal(err)
	}
	if id := notebooks.NewCellID(); len(id) != 8 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Errorf("NewCellID() = %q, want 8 hex digits", id)
	}
}

func firstDiff(got, want []byte) string {
	gs := bufio.NewScanner(bytes.NewReader(got))
	ws := bufio.NewScanner(bytes.NewReader(want))
	gs.Buffer(nil, 1<<26)
	ws.Buffer(nil, 1<<26)
	for line := 1; ; line++ {
		g, w := gs.Scan(), ws.Scan()
		if !g && !w {
			return fmt.Sprintf("(same lines; lengths %d vs %d)", len(got), len(want))
		}
		if gs.Text() != ws.Text() || g != w {
			return fmt.Sprintf("line %d:\n got: %.300q\nwant: %.300q", line, gs.Text(), ws.Text())
		}
	}
}

// TestUpgrade: appending to a 4.4 notebook (no ids) upgrades it to a valid 4.5 one.
func TestUpgrade(t *testing.T) {
	nb, err := notebooks.ReadFile(filepath.Join(corpusDir(t), "v4_4_no_ids.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	if nb.NbformatMinor != 4 || nb.Cells[0].ID != "" {
		t.Fatalf("read a 4.4 notebook as minor %d with id %q", nb.NbformatMinor, nb.Cells[0].ID)
	}
	nb.AppendCell(notebooks.Cell{CellType: notebooks.CellMarkdown, Source: "new"})
	path := filepath.Join(t.TempDir(), "up.ipynb")
	if err := notebooks.WriteFileAtomic(path, nb); err != nil {
		t.Fatal(err)
	}
	nbtest.Validate(t, path)
}

// TestUpgradeV3LikeNbformat: an nbformat 3 notebook reads as the 4.5 notebook nbformat.read(...,
// as_version=4) makes of it (byte for byte once written, cell ids aside: both draw them at random),
// and what we write passes nbformat's validator.
func TestUpgradeV3LikeNbformat(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "v3", "*.ipynb"))
	if len(paths) < 3 {
		t.Fatalf("want at least 3 nbformat 3 fixtures, found %v", paths)
	}
	want := t.TempDir()
	cmd := exec.Command(nbtest.Python(t), append([]string{filepath.Join("testdata", "make_corpus.py"), "--upgrade", want}, paths...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nbformat upgrade: %v\n%s", err, b)
	}
	ids := regexp.MustCompile(`"id": "[^"]*"`)
	got := t.TempDir()
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			nb, err := notebooks.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if nb.Nbformat != 4 || nb.NbformatMinor != 5 {
				t.Fatalf("read as nbformat %d.%d, want 4.5", nb.Nbformat, nb.NbformatMinor)
			}
			if err := nb.Check(); err != nil {
				t.Fatal(err)
			}
			ours, err := nb.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := os.ReadFile(filepath.Join(want, filepath.Base(p)))
			if err != nil {
				t.Fatal(err)
			}
			o, w := ids.ReplaceAll(ours, []byte(`"id": "ID"`)), ids.ReplaceAll(theirs, []byte(`"id": "ID"`))
			if !bytes.Equal(o, w) {
				t.Errorf("differs from nbformat's upgrade:\n%s", firstDiff(o, w))
			}
			out := filepath.Join(got, filepath.Base(p))
			if err := notebooks.WriteFileAtomic(out, nb); err != nil {
				t.Fatal(err)
			}
			nbtest.Validate(t, out)
		})
	}
}

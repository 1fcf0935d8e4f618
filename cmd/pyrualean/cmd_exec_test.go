package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

func runExec(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = cmdExec(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func TestExecPercentFile(t *testing.T) {
	nbtest.Heavy(t, "a real IPython kernel")
	dir := t.TempDir()
	src := filepath.Join(dir, "cells.py")
	os.WriteFile(src, []byte("print('hello')\n# %%\nfrom PIL import Image\nfrom IPython.display import display\n"+
		"display(Image.new('RGB', (4, 4)))\n# %% [markdown]\n# # Title\n# %%\n21*2\n"), 0o644)
	out := filepath.Join(dir, "out.ipynb")
	code, stdout, stderr := runExec(t, "--out", out, src)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"hello\n", "[image/png, ", "42\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	nbtest.Validate(t, out)
	nb, err := notebooks.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(nb.Cells) != 4 || nb.Cells[2].CellType != "markdown" || nb.Cells[2].Source != "# Title" {
		t.Fatalf("cells: %+v", nb.Cells)
	}
	if ec := nb.Cells[3].ExecutionCount; ec == nil || *ec != 3 {
		t.Fatalf("execution count %v", ec)
	}
	if nb.Metadata["kernelspec"] == nil || nb.Metadata["language_info"] == nil {
		t.Fatalf("metadata %v", nb.Metadata)
	}
}

func TestExecStopsAtError(t *testing.T) {
	nbtest.Heavy(t, "a real IPython kernel")
	dir := t.TempDir()
	src := filepath.Join(dir, "nb.ipynb")
	nb := notebooks.New()
	for _, s := range []string{"x = 1", "raise ValueError('boom')", "print('never')"} {
		nb.AppendCell(notebooks.Cell{CellType: notebooks.CellCode, Source: s})
	}
	if err := notebooks.WriteFileAtomic(src, nb); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.ipynb")
	code, stdout, stderr := runExec(t, "--out", out, src)
	if code != 1 || !strings.Contains(stderr, "ValueError: boom") || strings.Contains(stdout, "never") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	nbtest.Validate(t, out)
}

func TestExecUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"no file", nil},
		{"missing file", []string{"/nonexistent/x.py"}},
		{"bad flag", []string{"--bogus", "x.py"}},
		{"bad timeout", []string{"--timeout", "soon", "x.py"}},
		{"unknown kernel", []string{"--kernel", "no-such-kernel", "cmd_exec.go"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runExec(t, tc.args...)
			if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
		})
	}
}

func TestKernelspecsLists(t *testing.T) {
	var o, e bytes.Buffer
	if code := cmdKernelspecs(context.Background(), nil, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	if !strings.Contains(o.String(), "pyrualean") || !strings.Contains(o.String(), "python") {
		t.Fatalf("output: %s", o.String())
	}
	if code := cmdKernelspecs(context.Background(), []string{"extra"}, &o, &e); code != 2 {
		t.Fatalf("extra arg: exit %d", code)
	}
}

func TestExecTimeout(t *testing.T) {
	nbtest.Heavy(t, "a real IPython kernel")
	dir := t.TempDir()
	src := filepath.Join(dir, "slow.py")
	os.WriteFile(src, []byte("import time\ntime.sleep(30)\n# %%\nprint('never')\n"), 0o644)
	code, stdout, stderr := runExec(t, "--timeout", "1", src)
	if code != 1 || !strings.Contains(stderr, "timed out") || strings.Contains(stdout, "never") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

// TestBenchKernelJSON runs the benchmark briefly (two rounds) for its shape, not its timings.
func TestBenchKernelJSON(t *testing.T) {
	nbtest.Heavy(t, "real IPython kernels")
	var o, e bytes.Buffer
	if code := benchKernel(context.Background(), []string{"--json", "--n", "2"}, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	var got struct {
		Rows []map[string]any `json:"rows"`
		Pool *float64         `json:"pool_take_ms"`
	}
	if err := json.Unmarshal(o.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, o.String())
	}
	if len(got.Rows) != 3 || got.Pool == nil {
		t.Fatalf("json %s", o.String())
	}
	for _, r := range got.Rows {
		for _, k := range []string{"name", "ours_p50_ms", "jupyter_client_p50_ms", "floor_p50_ms", "ratio_floor", "ratio_jupyter_client"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row lacks %s: %v", k, r)
			}
		}
		if len(r) != 6 {
			t.Errorf("row has extra keys: %v", r)
		}
	}
	if code := benchKernel(context.Background(), []string{"--n", "0"}, &o, &e); code != 2 {
		t.Errorf("--n 0: exit %d", code)
	}
}

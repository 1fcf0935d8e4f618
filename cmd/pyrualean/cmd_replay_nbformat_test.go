package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// TestCmdReplayNbformat: `pyrualean replay` opens what Jupyter opens and refuses what its validator
// refuses. An nbformat 3 notebook is upgraded and replayed; a v4 notebook whose code cell lacks
// `outputs` is rejected with the validation error (exit 2, usage/bad input) before any kernel runs,
// not replayed and reported as diverged.
func TestCmdReplayNbformat(t *testing.T) {
	dir := t.TempDir()
	v3 := filepath.Join(dir, "v3.ipynb")
	writeFile(t, v3, `{"metadata": {"name": "old"}, "nbformat": 3, "nbformat_minor": 0, "worksheets": [{"metadata": {}, "cells": [
  {"cell_type": "heading", "level": 2, "metadata": {}, "source": "An old notebook"},
  {"cell_type": "code", "collapsed": false, "language": "python", "metadata": {}, "prompt_number": 1,
   "input": ["x = 20\n", "print('x is', x)"], "outputs": [{"output_type": "stream", "stream": "stdout", "text": ["x is 20\n"]}]},
  {"cell_type": "code", "collapsed": false, "language": "python", "metadata": {}, "prompt_number": 2,
   "input": "x + 22", "outputs": [{"output_type": "pyout", "prompt_number": 2, "metadata": {}, "text": "42"}]}]}]}`)
	invalid := filepath.Join(dir, "invalid.ipynb")
	writeFile(t, invalid, `{"metadata": {}, "nbformat": 4, "nbformat_minor": 5, "cells": [
  {"id": "a", "cell_type": "code", "metadata": {}, "execution_count": 1, "source": "print('ran')"}]}`)

	tests := []struct {
		name string
		args []string
		code int
		want []string // in stdout+stderr
	}{
		{"nbformat 3 upgraded and replayed", []string{v3}, 0, []string{"REPRODUCED"}},
		{"invalid v4 rejected", []string{invalid}, 2, []string{"invalid code cell: 'outputs' is a required property", "cell 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.code == 0 {
				nbtest.Heavy(t, "a real IPython kernel (the replay)")
			}
			var stdout, stderr bytes.Buffer
			code := cmdReplay(context.Background(), tc.args, &stdout, &stderr)
			all := stdout.String() + stderr.String()
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
			if tc.code == 2 && (strings.Contains(all, "DIVERGED") || strings.Contains(all, "ran")) {
				t.Errorf("an invalid notebook was replayed:\n%s", all)
			}
		})
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

package notebooks_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks"
)

// FuzzReadWrite: whatever Read accepts, Write turns into a file that Read accepts again and that a
// second round trip leaves byte-identical (the canonical form is a fixed point).
func FuzzReadWrite(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.ipynb"))
	v3, _ := filepath.Glob(filepath.Join("testdata", "v3", "*.ipynb"))
	seeds = append(seeds, v3...)
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"nbformat": 4, "nbformat_minor": 5, "metadata": {"a": 1e400, "b": -0, "c": 1.0E-7}, "cells": [{"id": "x", "cell_type": "code", "metadata": {}, "source": "a\r\nb\u2028", "outputs": [{"output_type": "stream", "name": "stdout", "text": ["\u0085", "x"]}], "execution_count": null}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		nb, err := notebooks.Read(bytes.NewReader(doc))
		if err != nil {
			return
		}
		first, err := nb.Bytes()
		if err != nil {
			return // e.g. a number Python would write as Infinity
		}
		nb2, err := notebooks.Read(bytes.NewReader(first))
		if err != nil {
			t.Fatalf("our own output does not read back: %v\n%s", err, first)
		}
		second, err := nb2.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("canonical form is not a fixed point:\n%s\n---\n%s", first, second)
		}
	})
}

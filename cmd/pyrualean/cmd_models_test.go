package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/llm"
)

func TestModelsCLI(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		out  string // substring of stdout
		err  string // substring of stderr
	}{
		{[]string{"--dir", dir}, 0, llm.DefaultModel + " (default)", ""},
		{[]string{"--bogus"}, 2, "", "flag provided but not defined"},
		{[]string{"extra"}, 2, "", "unexpected argument"},
		{[]string{"install"}, 2, "", "want exactly one model NAME"},
		{[]string{"install", "nope"}, 2, "", "unknown local model"},
		{[]string{"verify", "--dir", dir, llm.TestModel}, 1, "", "not installed"},
		{[]string{"serve", "nope"}, 2, "", "unknown local model"},
		{[]string{"serve", "--port", "-1", llm.TestModel}, 2, "", "--port"},
	} {
		var out, errb bytes.Buffer
		code := cmdModels(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.err) {
			t.Errorf("models %v = %d\nstdout %q\nstderr %q\nwant %d, %q, %q", tc.args, code, out.String(), errb.String(), tc.code, tc.out, tc.err)
		}
	}

	var out bytes.Buffer
	if code := cmdModels(context.Background(), []string{"--json", "--dir", dir}, &out, &out); code != 0 {
		t.Fatalf("models --json: %d %s", code, out.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(llm.Models()) {
		t.Fatalf("%d rows, registry has %d", len(rows), len(llm.Models()))
	}
	for i, r := range rows {
		m := llm.Models()[i]
		if r["name"] != m.Name || r["installed"] != false || r["sha256"] != m.SHA256 || !strings.HasPrefix(r["path"].(string), dir) {
			t.Errorf("row %d = %v, want %s not installed under %s", i, r, m.Name, dir)
		}
	}
}

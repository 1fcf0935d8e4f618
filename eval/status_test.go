package eval

import (
	"bytes"
	"strings"
	"testing"
)

// TestStatusNodes: --status counts finished episodes per Ray node and names the retried ones.
func TestStatusNodes(t *testing.T) {
	rec := func(id, status, node string, attempts int) Record {
		return Record{EpisodeState: EpisodeState{Episode: Episode{ID: id, Arm: "cells"}, Status: status, Node: node, Attempts: attempts}}
	}
	tests := []struct {
		name string
		recs []Record
		want []string
		not  []string
	}{
		{"local: no node line", []Record{rec("a", "completed", "", 1)}, nil, []string{"Ray node", "retried"}},
		{"two nodes, a retry", []Record{rec("a", "completed", "aaaaaaaa1111", 1), rec("b", "completed", "bbbbbbbb2222", 3), rec("c", "completed", "bbbbbbbb2222", 1)},
			[]string{"finished per Ray node: aaaaaaaa=1 bbbbbbbb=2", "retried b: 3 attempts, completed on node bbbbbbbb"}, nil},
		{"a pending retry is named, not counted on a node", []Record{rec("a", "boot_error", "cccccccc3333", 2)},
			[]string{"retried a: 2 attempts, boot_error"}, []string{"Ray node"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			WriteStatus(&b, StatusOf(&Manifest{}, tc.recs))
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("missing %q in:\n%s", w, b.String())
				}
			}
			for _, n := range tc.not {
				if strings.Contains(b.String(), n) {
					t.Errorf("unexpected %q in:\n%s", n, b.String())
				}
			}
		})
	}
}

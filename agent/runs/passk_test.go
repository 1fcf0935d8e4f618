package runs

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestPassAtKEstimator(t *testing.T) {
	for _, c := range []struct {
		n, c, k int
		want    float64
	}{
		{4, 0, 4, 0}, {4, 4, 1, 1}, {4, 1, 1, 0.25}, {4, 1, 4, 1}, {4, 2, 2, 1 - 1.0/6}, {10, 3, 5, 1 - 21.0/252},
		{5, 0, 1, 0}, {3, 1, 2, 1 - 1.0/3},
	} {
		if got := passAtK(c.n, c.c, c.k); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("pass@%d n=%d c=%d = %v, want %v", c.k, c.n, c.c, got, c.want)
		}
	}
}

func TestPassAtKOf(t *testing.T) {
	yes, no := true, false
	row := func(task string, seed, sample int, ok *bool, status string) Row {
		return Row{System: "pyrualean:cells", Model: "m", Robot: "tabletop", Task: task, Seed: seed, Sample: sample, Samples: 4,
			Group: "tabletop/" + task + "/" + string(rune('0'+seed)) + "/default", OK: ok, Status: status}
	}
	var rows []Row
	for k, ok := range []*bool{&yes, &no, &no, &no} { // 1/4
		rows = append(rows, row("a", 0, k, ok, "completed"))
	}
	for k := range 4 { // 0/4 (a boot failure counts as a failed episode)
		st := "completed"
		if k == 3 {
			st = "boot_error"
		}
		rows = append(rows, row("b", 0, k, &no, st))
	}
	for k, ok := range []*bool{&yes, &yes, &yes, nil} { // 3 outcomes, one still running: partial
		st := "completed"
		if ok == nil {
			st = "running"
		}
		rows = append(rows, row("c", 0, k, ok, st))
	}
	rows = append(rows, Row{System: "pyrualean:cells", Model: "m", Task: "lone", OK: &yes, Status: "completed"}) // not a sample
	ps := PassAtKOf(rows)
	if len(ps) != 1 {
		t.Fatalf("groups: %+v", ps)
	}
	p := ps[0]
	if p.K != 4 || p.Instances != 3 || p.Complete != 2 || p.Partial != 1 || len(p.PerInst) != 3 {
		t.Fatalf("%+v", p)
	}
	if want := (0.25 + 0 + 1) / 3; math.Abs(p.Pass1.Value-want) > 1e-12 || p.Pass1.Lo > p.Pass1.Value || p.Pass1.Hi < p.Pass1.Value {
		t.Fatalf("pass@1 %+v, want %v", p.Pass1, want)
	}
	if math.Abs(p.PassK.Value-0.5) > 1e-12 { // a: 1, b: 0
		t.Fatalf("pass@4 %+v", p.PassK)
	}
	if again := PassAtKOf(rows); *again[0].PassK != *p.PassK || *again[0].Pass1 != *p.Pass1 {
		t.Fatal("the bootstrap is not deterministic")
	}
	var b bytes.Buffer
	WritePassAtK(&b, ps)
	for _, want := range []string{"3 instances x 4 samples", "pass@1 41.7", "pass@4 50.0", "1 with fewer than 4 outcomes left out", "tabletop/c/0/default 3/3"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printed %q lacks %q", b.String(), want)
		}
	}
	if PassAtKOf(rows[len(rows)-1:]) != nil {
		t.Fatal("lone episodes have no pass@K")
	}
}

// Package docs has no code: its test keeps architecture.md's package-dependency table equal to the
// imports `go list` reports, so the page cannot drift from the code it describes. It lives beside the
// page it checks, and no package imports it.
//
// Regenerate the table after moving code: go test ./docs -run TestDependencyTable -update
package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/atomicfile"
)

var update = flag.Bool("update", false, "rewrite architecture.md's dependency table from `go list`")

const (
	page       = "architecture.md"
	tableBegin = "<!-- deps:begin (generated: go test ./docs -update) -->"
	tableEnd   = "<!-- deps:end -->"
	tableHead  = "| package | imports (module packages) |\n|---|---|\n"
	noImports  = "—"
)

// graph maps each module package (path relative to the module root) to the module packages its
// production files import, sorted.
type graph map[string][]string

// row is one table line as the page has it.
type row struct {
	line    int
	pkg     string
	imports []string
}

func TestDependencyTable(t *testing.T) {
	code, err := listImports("..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	want := renderTable(code)
	if *update {
		out, err := replaceTable(doc, want)
		if err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.Write(page, out); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: dependency table rewritten (%d packages)", page, len(code))
		return
	}
	rows, err := parseTable(doc)
	if err != nil {
		t.Fatalf("%s: %v\n\nthe table to paste between the markers:\n%s", page, err, want)
	}
	if problems := compare(rows, code); len(problems) > 0 {
		t.Errorf("%s's dependency table disagrees with `go list`:\n  %s\n\n"+
			"regenerate it: go test ./docs -run TestDependencyTable -update\nor paste:\n%s",
			page, strings.Join(problems, "\n  "), want)
	}
}

// listImports runs `go list` over the module in dir: every package with production files and its
// imports of other module packages (test files' imports are not part of the design).
func listImports(dir string) (graph, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Module,GoFiles,CgoFiles,Imports", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.Bytes())
	}
	type pkg struct {
		ImportPath        string
		Module            *struct{ Path string }
		GoFiles, CgoFiles []string
		Imports           []string
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		if p.Module == nil || len(p.GoFiles)+len(p.CgoFiles) == 0 {
			continue // a test-only directory (like this one) has no production imports to check
		}
		name, ok := relative(p.Module.Path, p.ImportPath)
		if !ok {
			continue
		}
		deps := []string{}
		for _, imp := range p.Imports {
			if rel, ok := relative(p.Module.Path, imp); ok {
				deps = append(deps, rel)
			}
		}
		sort.Strings(deps)
		g[name] = deps
	}
	if len(g) == 0 {
		return nil, errors.New("go list found no packages")
	}
	return g, nil
}

// relative is path without the module prefix; ok is false outside the module.
func relative(module, path string) (string, bool) {
	if path == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// order lists the packages leaves first: by depth (the longest import chain below a package), then
// by name, so every row imports only rows above it.
func order(g graph) []string {
	depth := map[string]int{}
	var walk func(string) int
	walk = func(p string) int {
		if d, ok := depth[p]; ok {
			return d
		}
		d := 0
		for _, imp := range g[p] {
			d = max(d, walk(imp)+1)
		}
		depth[p] = d
		return d
	}
	names := make([]string, 0, len(g))
	for p := range g {
		walk(p)
		names = append(names, p)
	}
	sort.Slice(names, func(i, j int) bool {
		if depth[names[i]] != depth[names[j]] {
			return depth[names[i]] < depth[names[j]]
		}
		return names[i] < names[j]
	})
	return names
}

func renderTable(g graph) string {
	var b strings.Builder
	b.WriteString(tableHead)
	for _, p := range order(g) {
		b.WriteString(renderRow(p, g[p]))
		b.WriteByte('\n')
	}
	return b.String()
}

func renderRow(pkg string, imports []string) string {
	cell := noImports
	if len(imports) > 0 {
		cell = "`" + strings.Join(imports, "`, `") + "`"
	}
	return "| `" + pkg + "` | " + cell + " |"
}

// section returns the byte offsets of the text between the two markers.
func section(doc []byte) (start, end int, err error) {
	b := bytes.Index(doc, []byte(tableBegin))
	e := bytes.Index(doc, []byte(tableEnd))
	if b < 0 || e < 0 || e < b {
		return 0, 0, fmt.Errorf("no dependency table: the page needs the lines %q and %q around it", tableBegin, tableEnd)
	}
	start = b + len(tableBegin)
	if start < len(doc) && doc[start] == '\n' {
		start++
	}
	return start, e, nil
}

func replaceTable(doc []byte, table string) ([]byte, error) {
	start, end, err := section(doc)
	if err != nil {
		return nil, err
	}
	return slices.Concat(doc[:start], []byte(table), doc[end:]), nil
}

// parseTable reads the rows between the markers: | `pkg` | `a`, `b` | (or — for none).
func parseTable(doc []byte) ([]row, error) {
	start, end, err := section(doc)
	if err != nil {
		return nil, err
	}
	firstLine := bytes.Count(doc[:start], []byte("\n")) + 1
	var rows []row
	for i, line := range strings.Split(strings.TrimRight(string(doc[start:end]), "\n"), "\n") {
		n := firstLine + i
		line = strings.TrimSpace(line)
		if i < 2 { // the header and its separator
			if want := strings.Split(tableHead, "\n")[i]; line != want {
				return nil, fmt.Errorf("line %d: %q, want the header line %q", n, line, want)
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if !strings.HasPrefix(line, "|") || len(cells) != 2 {
			return nil, fmt.Errorf("line %d: %q is not a `| package | imports |` row", n, line)
		}
		r := row{line: n, pkg: strings.Trim(strings.TrimSpace(cells[0]), "`")}
		if deps := strings.TrimSpace(cells[1]); deps != noImports && deps != "" {
			for _, d := range strings.Split(deps, ",") {
				r.imports = append(r.imports, strings.Trim(strings.TrimSpace(d), "`"))
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// compare lists every way the page's rows differ from the code: rows missing or extra, edges missing
// or extra (with the corrected row), duplicates, and a row that imports a package listed below it.
func compare(rows []row, code graph) []string {
	var problems []string
	listed := map[string]bool{}
	for _, r := range rows {
		listed[r.pkg] = true
	}
	seen := map[string]int{}
	for _, r := range rows {
		if prev, dup := seen[r.pkg]; dup {
			problems = append(problems, fmt.Sprintf("line %d: `%s` already has a row (line %d)", r.line, r.pkg, prev))
			continue
		}
		seen[r.pkg] = r.line
		want, ok := code[r.pkg]
		if !ok {
			problems = append(problems, fmt.Sprintf("line %d: `%s` is not a package of the module (with production files); delete the row", r.line, r.pkg))
			continue
		}
		extra, missing := diff(r.imports, want), diff(want, r.imports)
		if len(extra)+len(missing) > 0 {
			msg := fmt.Sprintf("line %d: `%s`", r.line, r.pkg)
			if len(missing) > 0 {
				msg += fmt.Sprintf(" also imports `%s`;", strings.Join(missing, "`, `"))
			}
			if len(extra) > 0 {
				msg += fmt.Sprintf(" does not import `%s`;", strings.Join(extra, "`, `"))
			}
			problems = append(problems, msg+" the row is: "+renderRow(r.pkg, want))
		}
		for _, imp := range r.imports {
			// a missing row is reported once, below, not at every importer
			if _, above := seen[imp]; !above && listed[imp] && slices.Contains(want, imp) {
				problems = append(problems, fmt.Sprintf("line %d: `%s` imports `%s`, which must be listed above it (rows go leaves first)", r.line, r.pkg, imp))
			}
		}
	}
	for _, p := range order(code) {
		if _, ok := seen[p]; !ok {
			problems = append(problems, fmt.Sprintf("no row for `%s`; add (below the packages it imports): %s", p, renderRow(p, code[p])))
		}
	}
	return problems
}

// diff is what a has and b lacks, in a's order.
func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// TestCompareFindsDrift feeds the checker pages that drift from a small graph in each way it reports.
func TestCompareFindsDrift(t *testing.T) {
	code := graph{"a": {}, "b": {"a"}, "c": {"a", "b"}}
	page := func(rows ...string) []byte {
		return []byte("text\n" + tableBegin + "\n" + tableHead + strings.Join(rows, "\n") + "\n" + tableEnd + "\n")
	}
	tests := []struct {
		name string
		doc  []byte
		want []string // substrings, one per problem, in order
	}{
		{"exact", page("| `a` | — |", "| `b` | `a` |", "| `c` | `a`, `b` |"), nil},
		{"generated", []byte(tableBegin + "\n" + renderTable(code) + tableEnd), nil},
		{"missing row", page("| `a` | — |", "| `c` | `a`, `b` |"),
			[]string{"no row for `b`; add (below the packages it imports): | `b` | `a` |"}},
		{"extra row", page("| `a` | — |", "| `b` | `a` |", "| `c` | `a`, `b` |", "| `gone` | `a` |"),
			[]string{"line 8: `gone` is not a package"}},
		{"missing edge", page("| `a` | — |", "| `b` | `a` |", "| `c` | `b` |"),
			[]string{"`c` also imports `a`; the row is: | `c` | `a`, `b` |"}},
		{"extra edge", page("| `a` | — |", "| `b` | `a`, `c` |", "| `c` | `a`, `b` |"),
			[]string{"`b` does not import `c`; the row is: | `b` | `a` |"}},
		{"order", page("| `b` | `a` |", "| `a` | — |", "| `c` | `a`, `b` |"),
			[]string{"`b` imports `a`, which must be listed above it"}},
		{"duplicate", page("| `a` | — |", "| `b` | `a` |", "| `c` | `a`, `b` |", "| `a` | — |"),
			[]string{"line 8: `a` already has a row (line 5)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := parseTable(tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			got := compare(rows, code)
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestParseTableRejectsMalformed(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"no markers", "| package | imports (module packages) |\n", "no dependency table"},
		{"wrong header", tableBegin + "\n| pkg | deps |\n|---|---|\n" + tableEnd, "want the header line"},
		{"three cells", tableBegin + "\n" + tableHead + "| `a` | — | x |\n" + tableEnd, "is not a `| package | imports |` row"},
		{"prose inside", tableBegin + "\n" + tableHead + "some words\n" + tableEnd, "is not a `| package | imports |` row"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseTable([]byte(tt.doc)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestUpdateRewritesOnlyTheTable(t *testing.T) {
	code := graph{"a": {}, "b": {"a"}}
	doc := []byte("before\n" + tableBegin + "\n" + tableHead + "| `old` | — |\n" + tableEnd + "\nafter\n")
	out, err := replaceTable(doc, renderTable(code))
	if err != nil {
		t.Fatal(err)
	}
	want := "before\n" + tableBegin + "\n" + tableHead + "| `a` | — |\n| `b` | `a` |\n" + tableEnd + "\nafter\n"
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}

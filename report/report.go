// Package report writes a suite's HTML report: one self-contained page (inline CSS and SVG plots, no
// scripts, nothing fetched, under a CSP that says so) with the paper's table, the results per group, the plots, a table of
// episodes linking each trace rendered as HTML, and the suite's settings.
package report

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "embed"

	"github.com/pyrualean/pyrualean/agent/runs"
	"github.com/pyrualean/pyrualean/atomicfile"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/prices"
	"github.com/pyrualean/pyrualean/robotapi"
)

//go:embed report.html.tmpl
var pageTemplate string

//go:embed render_traces.py
var renderScript string

// CSP is the Content-Security-Policy of every page the report writes (the report and each rendered
// trace): no script runs and nothing is fetched; images only from data: URIs, styles only inline.
// A trace's outputs are the agent's, so its pages must not run or load anything the agent put there.
const CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

// cspMeta is the tag that carries CSP in a page's head.
const cspMeta = `<meta http-equiv="Content-Security-Policy" content="` + CSP + `">`

// Options say what to write.
type Options struct {
	SuiteDir string // eval folder (manifest.json, episodes/)
	Out      string // the HTML file
	// Traces renders each episode's trace.ipynb to trace.html beside it (jupyter nbconvert, one
	// process for all; a trace.html newer than its notebook is kept) and links it.
	Traces bool
	Python string        // the venv's python (default: the repository's .venv)
	Prices *prices.Table // prices of the costs (default: the shipped table)
}

type episodeRow struct {
	eval.Record
	Trace string // link, relative to the report
	OK    string
	Infra string // the infrastructure failure the episode ended in, if any
}

type groupView struct {
	eval.GroupStats
	Plots []template.HTML
}

// tableView is a paper table's cells as the text and Markdown outputs print them.
type tableView struct {
	Setup string
	runs.Grid
	Notes []noteView // the grid's notes, each with the items under it
	Final bool
}

// noteView is a note and the items listed under it (paths of episodes to rerun).
type noteView struct {
	Text  string
	Items []string
}

func noteViews(notes []string) []noteView {
	var out []noteView
	for _, n := range notes {
		if strings.HasPrefix(n, "  ") && len(out) > 0 {
			out[len(out)-1].Items = append(out[len(out)-1].Items, strings.TrimSpace(n))
			continue
		}
		out = append(out, noteView{Text: n})
	}
	return out
}

type page struct {
	Title     string
	Dir       string
	Generated string
	Manifest  *eval.Manifest
	Results   eval.Results
	Summary   string
	PassAtK   []runs.PassAtK // group rollouts (eval --samples K > 1)
	Tables    []tableView
	Groups    []groupView
	Episodes  []episodeRow
	Nodes     bool // some episode ran on a Ray node (--engine ray): the episodes table says which
	Matrix    []string
	CSP       template.HTMLAttr
}

// Title names a suite's report: the matrix's name, else the eval folder's.
func Title(suiteDir string, m *eval.Manifest) string {
	name := m.Matrix.Name
	if name == "" {
		name = filepath.Base(mustAbs(suiteDir))
	}
	return name + " · pyrualean report"
}

// Write writes the report; the returned error is for the report (a trace that does not render is
// linked to its notebook instead).
func Write(ctx context.Context, o Options) error {
	man, err := eval.ReadManifest(o.SuiteDir)
	if err != nil {
		return err
	}
	pt := o.Prices
	if pt == nil {
		if pt, err = prices.Embedded(); err != nil {
			return err
		}
	}
	recs := eval.LoadRecordsPriced(o.SuiteDir, man, pt)
	res := eval.AnalyzeWith(recs, pt)
	outDir, err := filepath.Abs(filepath.Dir(o.Out))
	if err != nil {
		return err
	}
	rendered := map[string]bool{}
	if o.Traces {
		rendered, err = renderTraces(ctx, o, recs)
		if err != nil {
			return fmt.Errorf("render traces: %w", err)
		}
	}
	pg := page{Title: Title(o.SuiteDir, man), Dir: mustAbs(o.SuiteDir), Generated: time.Now().UTC().Format(time.RFC3339),
		Manifest: man, Results: res, Matrix: matrixLines(man.Matrix)}
	var sum strings.Builder
	eval.WriteResults(&sum, recs, res)
	pg.Summary = sum.String()
	pg.PassAtK = res.Summary.PassAtK
	for _, t := range res.Tables {
		g := runs.TableGrid(t.Table, runs.FormatMarkdown)
		pg.Tables = append(pg.Tables, tableView{Setup: t.Setup, Grid: g, Notes: noteViews(g.Notes), Final: t.NotFinal.Final()})
	}
	for _, g := range res.Groups {
		var grecs []eval.Record
		for _, r := range recs {
			if r.Group() == g.Group && r.Row.Path != "" {
				grecs = append(grecs, r)
			}
		}
		gv := groupView{GroupStats: g}
		for _, s := range plots(g, grecs) {
			gv.Plots = append(gv.Plots, template.HTML(s)) // our own SVG: every text in it is escaped
		}
		pg.Groups = append(pg.Groups, gv)
	}
	for _, r := range recs {
		row := episodeRow{Record: r, OK: "-", Infra: runs.Infra(r.Row)}
		if r.Row.Path != "" && r.Row.OK != nil {
			row.OK = map[bool]string{true: "yes", false: "no"}[*r.Row.OK]
		}
		dir := filepath.Join(mustAbs(o.SuiteDir), filepath.FromSlash(r.Dir))
		target := filepath.Join(dir, "trace.ipynb")
		if rendered[dir] {
			target = filepath.Join(dir, "trace.html")
		}
		if _, err := os.Stat(target); err == nil {
			if rel, err := filepath.Rel(outDir, target); err == nil {
				row.Trace = filepath.ToSlash(rel)
			}
		}
		pg.Episodes = append(pg.Episodes, row)
		pg.Nodes = pg.Nodes || r.Node != ""
	}
	pg.CSP = template.HTMLAttr(`content="` + CSP + `"`)
	t, err := template.New("report").Funcs(templateFuncs()).Parse(pageTemplate)
	if err != nil {
		return err
	}
	var page bytes.Buffer
	if err := t.Execute(&page, pg); err != nil {
		return err
	}
	return atomicfile.Write(o.Out, page.Bytes())
}

// templateFuncs format the page's figures.
func templateFuncs() template.FuncMap {
	return template.FuncMap{
		"short": func(id string) string { return id[:min(len(id), 8)] }, // Ray's node ids: 56 hex digits
		"pct": func(iv *eval.Interval) string {
			if iv == nil {
				return "-"
			}
			return fmt.Sprintf("%.0f%% [%.0f, %.0f]", 100*iv.Value, 100*iv.Lo, 100*iv.Hi)
		},
		"ratio": func(iv *eval.Interval) string { return iv.String() },
		"pct1": func(iv *runs.Interval) string {
			if iv == nil {
				return "-"
			}
			return fmt.Sprintf("%.1f%% [%.1f, %.1f]", 100*iv.Value, 100*iv.Lo, 100*iv.Hi)
		},
		"cost": func(c *float64) string {
			if c == nil {
				return "unknown"
			}
			return fmt.Sprintf("$%.4f", *c)
		},
		"right": func(g runs.Grid, i int) bool { return i < len(g.Right) && g.Right[i] },
		"isAll": func(row []string) bool { return len(row) > 0 && row[0] == runs.AllBenchmarks },
		// A cell "a → b (r× [lo, hi])" shows its ratio on a line of its own.
		"figure": func(c string) string { a, _, _ := strings.Cut(c, " ("); return a },
		"aside": func(c string) string {
			if _, b, ok := strings.Cut(c, " ("); ok {
				return "(" + b
			}
			return ""
		},
	}
}

// matrixLines describe the matrix's rows, settings as name=value pairs ("default" when none).
func matrixLines(m eval.Matrix) []string {
	var out []string
	for i, r := range m.Rows {
		settings := "default"
		if len(r.Settings) > 0 {
			var kv []string
			for _, k := range slices.Sorted(maps.Keys(r.Settings)) {
				kv = append(kv, k+"="+r.Settings[k])
			}
			settings = strings.Join(kv, " ")
		}
		out = append(out, fmt.Sprintf("%s: robot=%s suite=%s tasks=%s seeds=%s arms=%s runtime=%s models=%s settings: %s",
			r.Label(i), r.Robot, orDefault(r.Suite), r.Tasks, r.Seeds, strings.Join(r.Arms, ","), r.Runtime, orDefault(strings.Join(r.Models, ",")), settings))
	}
	return out
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// renderTraces converts the traces that need it with one nbconvert process; it returns the run
// folders that have a current trace.html.
func renderTraces(ctx context.Context, o Options, recs []eval.Record) (map[string]bool, error) {
	done := map[string]bool{}
	var todo []string
	for _, r := range recs {
		dir := filepath.Join(mustAbs(o.SuiteDir), filepath.FromSlash(r.Dir))
		nb, err := os.Stat(filepath.Join(dir, "trace.ipynb"))
		if err != nil {
			continue
		}
		if h, err := os.Stat(filepath.Join(dir, "trace.html")); err == nil && h.ModTime().After(nb.ModTime()) && sealedPage(filepath.Join(dir, "trace.html")) {
			done[dir] = true
			continue
		}
		todo = append(todo, filepath.Join(dir, "trace.ipynb"))
	}
	if len(todo) == 0 {
		return done, nil
	}
	python := o.Python
	if python == "" {
		root, err := robotapi.Root()
		if err != nil {
			return nil, err
		}
		python = robotapi.Python(root)
	}
	// One process renders them all, each beside its notebook, from a sanitised copy (render_traces.py).
	script, err := os.CreateTemp("", "pyrualean-render-*.py")
	if err != nil {
		return nil, err
	}
	defer os.Remove(script.Name())
	if _, err := script.WriteString(renderScript); err != nil {
		script.Close()
		return nil, err
	}
	script.Close()
	cmd := exec.CommandContext(ctx, python, append([]string{script.Name(), CSP}, todo...)...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err = cmd.Run()
	for _, p := range todo {
		// Only a page that carries the CSP is linked; an older trace.html (unsanitised) is not.
		if sealedPage(strings.TrimSuffix(p, ".ipynb") + ".html") {
			done[filepath.Dir(p)] = true
		}
	}
	if err != nil && len(done) == 0 {
		return nil, fmt.Errorf("render traces: %v: %s", err, lastLine(stderr.String()))
	}
	return done, nil
}

// sealedPage says whether the HTML page at path opens with the report's CSP (rendered by
// render_traces.py, not an older unsanitised nbconvert page).
func sealedPage(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	return bytes.Contains(head[:n], []byte(cspMeta))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

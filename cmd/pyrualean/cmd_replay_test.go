package main

import (
	"bytes"
	"context"
	"encoding/json"
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

// writeTrace writes a small trace whose recorded outputs are what IPython prints for its cells.
func writeTrace(t *testing.T, path string, secondOutput string) {
	t.Helper()
	tr, err := notebooks.NewTrace(path, notebooks.TraceMeta{Episode: map[string]any{"robot": "none"}})
	if err != nil {
		t.Fatal(err)
	}
	one := 1
	if err := tr.AddCode("x = 20\nprint('x is', x)", notebooks.CodeRun{ExecutionCount: &one, Outputs: []notebooks.Output{
		{OutputType: notebooks.OutputStream, Name: "stdout", Text: "x is 20\n"}}}, map[string]any{"author": "setup"}); err != nil {
		t.Fatal(err)
	}
	if err := tr.AddMarkdown("adding", map[string]any{"author": "agent"}); err != nil {
		t.Fatal(err)
	}
	two := 2
	if err := tr.AddCode("x + 22", notebooks.CodeRun{ExecutionCount: &two, Outputs: []notebooks.Output{
		{OutputType: notebooks.OutputExecuteResult, ExecutionCount: &two, Data: notebooks.MimeBundle{"text/plain": secondOutput}}}},
		map[string]any{"author": "agent"}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCmdReplay(t *testing.T) {
	nbtest.Heavy(t, heavyEpisode)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.ipynb"), filepath.Join(dir, "bad.ipynb")
	writeTrace(t, good, "42")
	writeTrace(t, bad, "43")
	// A cell cut short in the recording (the kernel died under it) is run but not compared.
	aborted := filepath.Join(dir, "aborted.ipynb")
	writeTrace(t, aborted, "42")
	tr, err := notebooks.OpenTrace(aborted)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.AddCode("print('half')", notebooks.CodeRun{Outputs: []notebooks.Output{
		{OutputType: notebooks.OutputError, Ename: "KernelDied", Evalue: "kernel died"}}},
		map[string]any{"author": "agent", "status": "aborted"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string // in stdout+stderr
	}{
		{"no trace", nil, 2, "want exactly one trace"},
		{"bad flag", []string{"--bogus", good}, 2, "flag provided but not defined"},
		{"bad tolerance", []string{good, "--img-tol", "2"}, 2, "tolerances"},
		{"missing file", []string{filepath.Join(dir, "nope.ipynb")}, 2, "no such file"},
		{"reproduces", []string{good, "--out", filepath.Join(dir, "new.ipynb")}, 0, "REPRODUCED"},
		{"diverges", []string{bad}, 1, "first divergent cell: 2"},
		{"until before the edit", []string{"--until", "1", bad}, 0, "partial replay"},
		{"json", []string{"--json", bad}, 1, `"first_divergent":{"index":2,`},
		{"aborted cell", []string{aborted}, 0, "skipped  recorded as aborted"},
		// Sealed by default: this trace makes no robot, so auto runs it unsealed and says why; on refuses.
		{"sealed auto, recorded", []string{good}, 0, "sealed: NO (--sealed auto: the trace has no setup cell calling make("},
		{"sealed on refuses", []string{"--sealed", "on", good}, 1, "cannot seal the kernel: the trace has no setup cell"},
		{"sealed off, recorded", []string{"--json", "--sealed", "off", good}, 0, `"sealed":false,"seal":{"mode":"off","judge":"kernel"`},
		{"bad sealed", []string{"--sealed", "maybe", good}, 2, `--sealed "maybe": want auto, on or off`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cmdReplay(context.Background(), tc.args, &stdout, &stderr)
			all := stdout.String() + stderr.String()
			if code != tc.code || !strings.Contains(all, tc.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s", code, tc.code, tc.want, all)
			}
		})
	}
	nb, err := notebooks.ReadFile(filepath.Join(dir, "new.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	if got := nb.Cells[2].Outputs[0].Data["text/plain"]; got != "42" {
		t.Errorf("replayed notebook cell 2 = %v", got)
	}
}

// TestPlayKilled SIGKILLs `pyrualean play` at random moments of an episode: the trace left behind is
// always a valid notebook (official validator) holding every cell that was on disk before the kill, in
// order, each complete; and the replay of what is left reproduces.
func TestPlayKilled(t *testing.T) {
	if os.Getenv("PYRUALEAN_PLAY_CHILD") != "" {
		t.Skip("child")
	}
	nbtest.Heavy(t, heavyEpisode)
	dir := t.TempDir()
	// Eight moving cells; each prints its index after it moved, so a complete cell is recognisable.
	var cells strings.Builder
	const n = 8
	for i := range n {
		fmt.Fprintf(&cells, "# %%%%\nrobo.move_to([0.45 + 0.01 * %d, 0.0, 0.25])\nprint('cell', %d)\n\n", i%3, i)
	}
	from := filepath.Join(dir, "cells.py")
	if err := os.WriteFile(from, []byte(cells.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	var traces []string
	for round := range 3 {
		out := filepath.Join(dir, fmt.Sprintf("run%d", round))
		trace := filepath.Join(out, "trace.ipynb")
		mark := fmt.Sprintf("killtest-%d-%d", os.Getpid(), round)
		args, _ := json.Marshal([]string{"play", "--runtime", "replay", "--from", from, "--task", "put_block_on_plate", "--out", out})
		cmd := exec.Command(os.Args[0], "-test.run=^TestPlayChild$")
		cmd.Env = append(os.Environ(), "PYRUALEAN_PLAY_CHILD="+string(args), "PYRUALEAN_KILLTEST_MARK="+mark)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Watch the trace while the episode runs; kill once a random number of agent cells is on disk
		// (plus a random few ms, to land inside a cell or a save).
		target := 1 + rng.IntN(n-2)
		seen := 0
		deadline := time.Now().Add(2 * time.Minute)
		for seen < target && time.Now().Before(deadline) {
			if nb, err := notebooks.ReadFile(trace); err == nil {
				seen = max(seen, agentCells(nb))
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		if nb, err := notebooks.ReadFile(trace); err == nil {
			seen = max(seen, agentCells(nb))
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		orphans := killMarked(t, mark)
		if seen < target {
			t.Fatalf("round %d: play never wrote %d agent cells; stderr:\n%s", round, target, stderr.String())
		}
		nb, err := notebooks.ReadFile(trace)
		if err != nil {
			t.Fatalf("round %d: trace after SIGKILL: %v", round, err)
		}
		got := agentCells(nb)
		if got < seen {
			t.Fatalf("round %d: %d agent cells were on disk before the kill, %d after", round, seen, got)
		}
		k := 0
		for _, c := range nb.Cells {
			if c.CellType != notebooks.CellCode || c.Metadata["pyrualean"].(map[string]any)["author"] != "agent" {
				continue
			}
			want := fmt.Sprintf("print('cell', %d)", k)
			if !strings.Contains(c.Source, want) {
				t.Fatalf("round %d: agent cell %d is %q, want the cell printing %d", round, k, c.Source, k)
			}
			if !hasStream(c.Outputs, fmt.Sprintf("cell %d\n", k)) {
				t.Errorf("round %d: agent cell %d lacks its output: %+v", round, k, c.Outputs)
			}
			k++
		}
		t.Logf("round %d: killed after %d agent cells on disk; trace holds %d; orphaned kernels killed: %d", round, seen, got, orphans)
		traces = append(traces, trace)
	}
	nbtest.Validate(t, traces...)

	// What a killed episode leaves replays like any trace.
	var stdout, stderr bytes.Buffer
	if code := cmdReplay(context.Background(), []string{traces[0]}, &stdout, &stderr); code != 0 {
		t.Errorf("replay of a killed episode's trace: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

// TestPlayChild is TestPlayKilled's `pyrualean play` process.
func TestPlayChild(t *testing.T) {
	raw := os.Getenv("PYRUALEAN_PLAY_CHILD")
	if raw == "" {
		t.Skip("run by TestPlayKilled")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	os.Exit(run(context.Background(), args, os.Stdout, os.Stderr))
}

func agentCells(nb *notebooks.Notebook) int {
	n := 0
	for _, c := range nb.Cells {
		if m, ok := c.Metadata["pyrualean"].(map[string]any); ok && c.CellType == notebooks.CellCode && m["author"] == "agent" {
			n++
		}
	}
	return n
}

func hasStream(outs []notebooks.Output, text string) bool {
	for _, o := range outs {
		if o.OutputType == notebooks.OutputStream && strings.Contains(o.Text, text) {
			return true
		}
	}
	return false
}

// killMarked kills the processes (the episode's kernel) that inherited our marker variable and are
// still alive after their parent was killed, and says how many there were.
func killMarked(t *testing.T, mark string) int {
	t.Helper()
	want := []byte("PYRUALEAN_KILLTEST_MARK=" + mark + "\x00")
	killed := 0
	// A kernel whose parent died may take a moment to notice; give it that moment, then end it.
	time.Sleep(1500 * time.Millisecond)
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		env, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}

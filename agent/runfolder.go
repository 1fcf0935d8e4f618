package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// runFolder is an episode's folder: result.json (ledger.go saves it), the append-only turns.jsonl,
// calls.jsonl and exchanges.jsonl (exchanges.go), tool_turns.json (toolturns.go), and the robot's
// workspace. Everything is written as the episode goes, so a killed process leaves every finished
// cell on disk.
type runFolder struct {
	dir, workspace          string
	turns, calls, exchanges *jsonlWriter
	toolTurns               *toolTurns
}

func openRunFolder(dir string) (*runFolder, error) {
	f := &runFolder{dir: dir, workspace: filepath.Join(dir, "workspace"), toolTurns: &toolTurns{path: filepath.Join(dir, ToolTurnsFile)}}
	if err := os.MkdirAll(f.workspace, 0o755); err != nil {
		return nil, err
	}
	var err error
	if f.turns, err = openJSONL(filepath.Join(dir, "turns.jsonl")); err != nil {
		return nil, fmt.Errorf("turns.jsonl: %w", err)
	}
	if f.calls, err = openJSONL(filepath.Join(dir, "calls.jsonl")); err != nil {
		f.turns.Close()
		return nil, fmt.Errorf("calls.jsonl: %w", err)
	}
	if f.exchanges, err = openJSONL(filepath.Join(dir, ExchangesFile)); err != nil {
		f.turns.Close()
		f.calls.Close()
		return nil, fmt.Errorf("%s: %w", ExchangesFile, err)
	}
	return f, nil
}

func (f *runFolder) path(name string) string { return filepath.Join(f.dir, name) }

func (f *runFolder) close() {
	f.turns.Close()
	f.calls.Close()
	f.exchanges.Close()
}

// jsonlWriter appends one JSON object per line; each line is one write(2), so a killed process leaves
// only whole lines behind.
type jsonlWriter struct {
	mu sync.Mutex
	f  *os.File
}

func openJSONL(path string) (*jsonlWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &jsonlWriter{f: f}, nil
}

func (w *jsonlWriter) Write(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return fmt.Errorf("jsonl writer closed")
	}
	_, err := w.f.Write(buf.Bytes())
	return err
}

func (w *jsonlWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

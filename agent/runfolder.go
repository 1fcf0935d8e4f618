package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// runFolder is an episode's folder: result.json (ledger.go saves it), the append-only turns.jsonl,
// calls.jsonl and exchanges.jsonl (exchanges.go), tool_turns.json (toolturns.go), and the robot's
// workspace. Everything is written as the episode goes, so a killed process leaves every finished
// cell on disk.
//
// The agent writes the workspace (and, unsealed, may have written anything in a reused --out), so
// every host-side file operation in the run folder goes through an os.Root: a link planted there is
// followed only while it stays beneath the folder, never out of it, and an unresolvable path (a link
// loop, a chain past PATH_MAX) is an error, never retried unresolved.
type runFolder struct {
	dir, workspace          string
	root, ws                *os.Root // the run folder and its workspace
	turns, calls, exchanges *jsonlWriter
	toolTurns               *toolTurns
}

func openRunFolder(dir string) (_ *runFolder, err error) {
	f := &runFolder{dir: dir, workspace: filepath.Join(dir, "workspace"), toolTurns: &toolTurns{path: filepath.Join(dir, ToolTurnsFile)}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if f.root, err = os.OpenRoot(dir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if f.ws, err = openWorkspace(f.root); err != nil {
		return nil, err
	}
	if f.turns, err = openJSONL(f.root, "turns.jsonl"); err != nil {
		return nil, fmt.Errorf("turns.jsonl: %w", err)
	}
	if f.calls, err = openJSONL(f.root, "calls.jsonl"); err != nil {
		return nil, fmt.Errorf("calls.jsonl: %w", err)
	}
	if f.exchanges, err = openJSONL(f.root, ExchangesFile); err != nil {
		return nil, fmt.Errorf("%s: %w", ExchangesFile, err)
	}
	return f, nil
}

// openWorkspace makes (or reuses) the run folder's workspace: a real directory, never a link, since
// the sandbox and the kernel are given its path.
func openWorkspace(root *os.Root) (*os.Root, error) {
	if err := root.Mkdir("workspace", 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	fi, err := root.Lstat("workspace")
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace: %s is a %v, not a directory (refusing to follow it)",
			filepath.Join(root.Name(), "workspace"), fi.Mode().Type())
	}
	return root.OpenRoot("workspace")
}

func (f *runFolder) path(name string) string { return filepath.Join(f.dir, name) }

// writeFile replaces name (relative to the run folder) atomically, beneath it.
func (f *runFolder) writeFile(name string, data []byte) error { return writeAtomic(f.root, name, data) }

// writeJSON replaces name with v as indented JSON and a final newline, beneath the run folder.
func (f *runFolder) writeJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return f.writeFile(name, append(b, '\n'))
}

// writeWorkspace replaces name (relative to the workspace) atomically, beneath the workspace.
func (f *runFolder) writeWorkspace(name string, data []byte) error {
	return writeAtomic(f.ws, name, data)
}

// MaxWorkspaceRead caps what the host reads back from the agent's workspace (a program file).
const MaxWorkspaceRead = 1 << 20

// readWorkspace reads a regular file beneath the workspace, at most limit bytes. Nothing is followed out
// of the workspace; a FIFO or device the agent made is refused, not opened for reading (it would block
// or never end).
func (f *runFolder) readWorkspace(name string, limit int64) ([]byte, error) {
	h, err := f.ws.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	fi, err := h.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%d bytes, more than the %d allowed", fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(h, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit { // it grew while read
		return nil, fmt.Errorf("more than the %d bytes allowed", limit)
	}
	return b, nil
}

func (f *runFolder) close() {
	for _, w := range []*jsonlWriter{f.turns, f.calls, f.exchanges} {
		if w != nil {
			w.Close()
		}
	}
	for _, r := range []*os.Root{f.ws, f.root} {
		if r != nil {
			r.Close()
		}
	}
}

// writeAtomic is atomicfile.Write beneath a root: a temp file beside name (created, never opened
// through a link), fsync, rename over name (a link there is replaced, not followed), directory fsync.
func writeAtomic(root *os.Root, name string, data []byte) (err error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	dir := filepath.Dir(name)
	tmp := filepath.Join(dir, "."+filepath.Base(name)+"."+hex.EncodeToString(rnd[:])+".tmp")
	t, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	defer func() {
		if err != nil {
			t.Close()
			root.Remove(tmp)
		}
	}()
	if _, err = t.Write(data); err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	if err = t.Chmod(0o644); err != nil { // the umask may have narrowed it; readers expect 0644
		return fmt.Errorf("atomic write: %w", err)
	}
	if err = t.Sync(); err != nil {
		return fmt.Errorf("atomic write: fsync: %w", err)
	}
	if err = t.Close(); err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	if err = root.Rename(tmp, name); err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	if d, derr := root.Open(dir); derr == nil {
		serr := d.Sync()
		d.Close()
		if serr != nil {
			return fmt.Errorf("atomic write: fsync dir: %w", serr)
		}
	}
	return nil
}

// jsonlWriter appends one JSON object per line; each line is one write(2), so a killed process leaves
// only whole lines behind.
type jsonlWriter struct {
	mu sync.Mutex
	f  *os.File
}

func openJSONL(root *os.Root, name string) (*jsonlWriter, error) {
	f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o644)
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

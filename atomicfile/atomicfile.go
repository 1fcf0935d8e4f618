// Package atomicfile replaces files so that a crash at any moment leaves either the old file or the
// new one, never a torn one: a temp file in the same directory, fsync, rename, fsync of the directory.
// Every run-folder file pyrualean rewrites (trace.ipynb, result.json, card.json, prompt.txt) goes
// through it, so they all end with the same mode (0644, or the mode of the file they replace).
package atomicfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// TempPattern is the glob of the temp files Write makes beside path; a writer killed between create
// and rename leaves one behind (see RemoveStale).
func TempPattern(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
}

// RemoveStale deletes the temp files a killed writer of path left behind.
func RemoveStale(path string) {
	stale, _ := filepath.Glob(TempPattern(path))
	for _, p := range stale {
		os.Remove(p)
	}
}

// Write replaces path with data.
func Write(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	// Keep the mode a plain os.WriteFile would give (CreateTemp makes 0600).
	mode := os.FileMode(0o644)
	if st, serr := os.Stat(path); serr == nil {
		mode = st.Mode().Perm()
	}
	if err = f.Chmod(mode); err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("atomic write: fsync: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	if d, derr := os.Open(dir); derr == nil {
		// The rename is durable only once the directory entry is on disk.
		serr := d.Sync()
		d.Close()
		if serr != nil {
			return fmt.Errorf("atomic write: fsync dir: %w", serr)
		}
	}
	return nil
}

// WriteJSON replaces path with v as indented JSON and a final newline.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return Write(path, append(b, '\n'))
}

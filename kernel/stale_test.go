package kernel

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStaleConnectionFilesRemoved: an owner killed with SIGKILL cannot remove its kernels' connection
// files; the next launch in the same runtime dir does, and leaves other owners' files alone.
func TestStaleConnectionFilesRemoved(t *testing.T) {
	spec := testSpec(t) // the child and the parent each launch a kernel
	if os.Getenv("PYRUALEAN_STALE_CHILD") == "1" {
		// The child: launch a kernel, say where its connection file is, wait to be killed.
		k, err := Launch(context.Background(), spec, LaunchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("CONNFILE", k.ConnectionFile())
		time.Sleep(5 * time.Minute)
		return
	}
	dir := t.TempDir()
	t.Setenv("JUPYTER_RUNTIME_DIR", dir)
	foreign := filepath.Join(dir, "kernel-0b1c2d3e.json") // jupyter_client's naming: not ours to judge
	if err := os.WriteFile(foreign, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStaleConnectionFilesRemoved$", "-test.v")
	cmd.Env = append(os.Environ(), "PYRUALEAN_STALE_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stale string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f, ok := strings.CutPrefix(sc.Text(), "CONNFILE "); ok {
			stale = f
			break
		}
	}
	if stale == "" {
		cmd.Process.Kill()
		t.Fatal("child did not launch a kernel")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the killed owner's connection file should still be there before the next launch: %v", err)
	}
	k := launchTest(t)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale connection file %s survived the next launch (err %v)", stale, err)
	}
	for _, f := range []string{foreign, k.ConnectionFile()} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s removed: %v", f, err)
		}
	}
}

package seal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults for the workspace quota: far more than an episode's notes, images and programs, far less
// than a disk.
const (
	DefaultWorkspaceBytes   = 4 << 30
	DefaultWorkspaceEntries = 100_000
	quotaEvery              = time.Second
)

// Usage is what a folder holds: bytes allocated on disk (sparse files count what they use) and entries.
type Usage struct {
	Bytes   int64
	Entries int
}

// errOverQuota stops a walk once the usage has passed the quota: the rest need not be counted.
var errOverQuota = errors.New("over quota")

// MeasureWorkspace sums the space under root (links themselves, never what they point to) and stops
// early once either bound in q is passed (over is then true).
func MeasureWorkspace(root string, q Usage) (u Usage, over bool, err error) {
	err = walkBeneath(root, func(_ *os.Root, _ string, fi fs.FileInfo) error {
		u.Entries++
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			u.Bytes += st.Blocks * 512
		} else {
			u.Bytes += fi.Size()
		}
		if u.Bytes > q.Bytes || u.Entries > q.Entries {
			return errOverQuota
		}
		return nil
	})
	if errors.Is(err, errOverQuota) || errors.Is(err, errTooDeep) { // too deep to count: over, not unbounded
		return u, true, nil
	}
	return u, false, err
}

// WatchWorkspace checks the workspace against its quota every second until the sandbox is closed; the
// first time it is over, over is called once (with what was counted) and the watch ends. RLIMIT_FSIZE
// bounds one file; this bounds them all, within what a second of writing adds.
func (s *Sandbox) WatchWorkspace(over func(Usage)) {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopWatch = cancel
	q := Usage{Bytes: s.Info.WorkspaceMax, Entries: s.Info.WorkspaceEntriesMax}
	go func() {
		t := time.NewTicker(quotaEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if u, isOver, err := MeasureWorkspace(s.workspace, q); err == nil && isOver {
				over(u)
				return
			}
		}
	}()
}

// Kill ends every process of the sandbox at once (the kernel then dies as if it crashed), through its
// pids cgroup; without one it says so and kills nothing.
func (s *Sandbox) Kill() error {
	if s.cgroup == "" {
		return errors.New("seal: no pids cgroup to kill the sandbox by")
	}
	if err := os.WriteFile(filepath.Join(s.cgroup, "cgroup.kill"), []byte("1"), 0o644); err == nil {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(s.cgroup, "cgroup.procs")) // cgroup v1: one pid at a time
	if err != nil {
		return fmt.Errorf("seal: kill: %w", err)
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

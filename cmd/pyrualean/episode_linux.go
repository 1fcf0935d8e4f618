package main

import (
	"fmt"
	"os"
	"syscall"
)

// dieWithParent asks the kernel for SIGTERM when the parent dies (its context then ends the
// episode and its kernel), and checks the parent is still the one expected (0: the current one).
func dieWithParent(parent int) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", e)
	}
	if parent != 0 && os.Getppid() != parent {
		return fmt.Errorf("parent %d is gone", parent)
	}
	return nil
}

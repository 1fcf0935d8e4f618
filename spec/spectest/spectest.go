// Package spectest makes episode specs for tests: a validated tabletop episode in a test's own
// temporary folder, with the robot in the kernel (sealed off) unless the test says otherwise.
package spectest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// Tabletop is a validated spec of stack_blocks, seed 0, cells arm, driven by the scripted model of an
// OpenAI-compatible test server, with a 60 s cell timeout and no wall-clock budget, recorded under
// t.TempDir(); change applies
// the test's own settings before validation.
func Tabletop(t testing.TB, change func(*spec.Episode)) spec.Episode {
	t.Helper()
	s := spec.New()
	s.Robot, s.Task, s.Seed, s.Sealed, s.BudgetS, s.CellTimeoutS = robotapi.DefaultRobot, "stack_blocks", 0, spec.SealOff, 0, 60
	s.Out = filepath.Join(t.TempDir(), "run")
	s.Policy = spec.Policy{Runtime: "openai", Model: "scripted"}
	if change != nil {
		change(&s)
	}
	if err := s.Validate(context.Background(), &robotapi.Registry{}); err != nil {
		t.Fatalf("spectest: %v", err)
	}
	return s
}

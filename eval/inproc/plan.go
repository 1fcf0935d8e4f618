package inproc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// Plan checks a matrix and expands it into its episodes: each row's robot and runtime defaults filled
// (returned in the matrix), every episode's spec validated and each row's runtime built once, so that a
// wrong setting is refused, naming its row, before anything runs.
func Plan(ctx context.Context, m eval.Matrix) (eval.Matrix, []eval.Episode, error) {
	m.Rows = slices.Clone(m.Rows)
	for i := range m.Rows {
		if err := checkRow(&m.Rows[i]); err != nil {
			return m, nil, fmt.Errorf("%s: %w", m.Rows[i].Label(i), err)
		}
	}
	robots, err := robotapi.Robots(ctx)
	if err != nil {
		return m, nil, fmt.Errorf("robots: %w", err)
	}
	eps, err := eval.Expand(ctx, m, robots, robotapi.Tasks)
	if err != nil {
		return m, nil, err
	}
	if err := checkSpecs(ctx, m, eps); err != nil {
		return m, nil, err
	}
	if len(eps) == 0 {
		return m, nil, errors.New("the matrix has no episodes")
	}
	return m, eps, nil
}

// DefaultDir is a matrix's eval folder when none is named: runs/suite-<hash of the matrix>, so the same
// matrix resumes.
func DefaultDir(m eval.Matrix) string {
	b, _ := json.Marshal(m)
	h := sha256.Sum256(b)
	return filepath.Join("runs", "suite-"+hex.EncodeToString(h[:])[:10])
}

// Run runs a matrix's suite in this process into dir (DefaultDir when empty), as `pyrualean eval` does
// with the local engine: the same ids, run folders, manifest, resume, retries and results.json. The
// error is the suite's own (a bad matrix, its folder, a cancelled context); episodes that fail are
// outcomes in the results.
func Run(ctx context.Context, dir string, m eval.Matrix, o Options) (*eval.Manifest, eval.Results, error) {
	m, eps, err := Plan(ctx, m)
	if err != nil {
		return nil, eval.Results{}, err
	}
	if dir == "" {
		dir = DefaultDir(m)
	}
	o.Jobs = max(o.Jobs, 1)
	x := New(dir, o)
	defer x.Close()
	r := &eval.Runner{Dir: dir, Engine: eval.Local{Jobs: o.Jobs + o.BootAhead}, Exec: x, Retries: o.Retries,
		Versions: eval.BuildVersions(), Events: o.Events, OnPlan: x.Expect, Logger: o.Logger}
	man, err := r.Run(ctx, m, eps)
	if man == nil {
		return nil, eval.Results{}, err
	}
	_, res, werr := eval.SaveResults(r.Dir, man)
	return man, res, errors.Join(err, werr)
}

// checkRow fills a row's defaults: the robot, and the runtime (chosen as play would, from the row's
// settings and first model).
func checkRow(r *eval.Row) error {
	if r.Robot == "" {
		r.Robot = robotapi.DefaultRobot
	}
	p := spec.Policy{Runtime: r.Runtime, BaseURL: r.Settings["base-url"]}
	if len(r.Models) > 0 {
		p.Model = r.Models[0]
	}
	if err := runtimes.Resolve(&p); err != nil {
		return err
	}
	r.Runtime = p.Runtime // one name per runtime in ids
	if r.Runtime == "replay" && slices.Contains(r.Arms, spec.ArmProgram) {
		return errors.New("arm program: the replay runtime has no reference program to replay (tasks have cell scripts)")
	}
	return nil
}

// checkSpecs validates every episode's spec (the robot registry is asked once) and builds each row's
// runtime once, so that a wrong setting is refused, naming its row, before anything runs.
func checkSpecs(ctx context.Context, m eval.Matrix, eps []eval.Episode) error {
	reg := &robotapi.Registry{}
	built := map[int]bool{}
	for i := range eps {
		e := &eps[i]
		label := m.Rows[e.Row].Label(e.Row)
		if err := runtimes.Resolve(&e.Spec.Policy); err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		if err := e.Spec.Validate(ctx, reg); err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		if built[e.Row] {
			continue
		}
		built[e.Row] = true
		probe := e.Spec
		if probe.Policy.Runtime == "replay" {
			probe.Arm = spec.ArmCells // a replayed tools episode replays its cells twin's calls (toolActions)
		}
		if _, err := runtimes.For(probe, runtimes.Wiring{}); err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
	}
	return nil
}

package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"strconv"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/robotserver"
	"github.com/pyrualean/pyrualean/seal"
)

// Seal modes, as play's --sealed: a trace's cells are the agent's code, so a replay runs them as a sealed
// episode does (the kernel in the OS sandbox, the robot and its judge in a robot server outside it).
const (
	SealOff  = "off"  // the robot in an unsandboxed kernel, as before (opt-out, recorded)
	SealAuto = "auto" // sealed where this machine can seal; otherwise unsealed, recorded with the reason
	SealOn   = "on"   // sealed, or the replay does not start
)

// ErrNotSealed means a sealed replay (SealOn) was asked for where it cannot be sealed.
var ErrNotSealed = errors.New("replay: cannot seal the kernel")

// SealRecord says how the replay ran the trace's code: the report's and the replayed notebook's "seal".
type SealRecord struct {
	Mode  string `json:"mode"`  // off | auto | on
	Judge string `json:"judge"` // where the outcome is read: "robot_server" | "kernel"
	seal.Info
}

// sealedKernel is a replay's robot server and kernel sandbox.
type sealedKernel struct {
	srv      *robotserver.Server
	sb       *seal.Sandbox
	robotDir string
}

func (s *sealedKernel) close(log *slog.Logger) {
	if s == nil {
		return
	}
	if err := s.srv.Close(); err != nil {
		log.Warn("robot server close", "err", err)
	}
	if err := s.sb.Close(); err != nil {
		log.Warn("seal close", "err", err)
	}
	os.RemoveAll(s.robotDir)
}

// sealKernel starts the robot the trace's setup cell makes in a robot server and wraps ks in the OS
// sandbox, whose only writable folder is dir. With mode off, or auto where this machine cannot seal, it
// returns nil and the record says why; with on it fails instead.
func sealKernel(ctx context.Context, mode string, ks kernel.Spec, dir string, trace *notebooks.Notebook, log *slog.Logger) (*sealedKernel, kernel.Spec, kernel.LaunchOptions, SealRecord, error) {
	rec := SealRecord{Mode: mode, Judge: "kernel"}
	lo := kernel.LaunchOptions{Dir: dir, Logger: log}
	if mode == SealOff {
		rec.Reason = "sealed off: the trace's code ran in an unsandboxed kernel"
		return nil, ks, lo, rec, nil
	}
	refuse := func(err error) (*sealedKernel, kernel.Spec, kernel.LaunchOptions, SealRecord, error) {
		rec.Reason = err.Error()
		if mode == SealOn {
			return nil, ks, lo, rec, fmt.Errorf("%w: %w", ErrNotSealed, err)
		}
		log.Warn("REPLAY NOT SEALED: the trace's code runs without an OS sandbox (it can read this machine's files "+
			"and environment)", "reason", err)
		return nil, ks, lo, rec, nil
	}
	if err := seal.Check(ctx); err != nil {
		return refuse(err)
	}
	robot, err := setupRobot(trace)
	if err != nil {
		return refuse(err)
	}
	root, err := robotapi.Root()
	if err != nil {
		return refuse(err)
	}
	robot.Root, robot.Logger = root, log
	if robot.Dir, err = os.MkdirTemp("", "pyrualean-replay-robot-"); err != nil {
		return nil, ks, lo, rec, err
	}
	srv, err := robotserver.Launch(robot)
	if err != nil {
		os.RemoveAll(robot.Dir)
		return nil, ks, lo, rec, fmt.Errorf("robot server: %w", err)
	}
	sk := &sealedKernel{srv: srv, robotDir: robot.Dir}
	env := map[string]string{"PYRUALEAN_ROBOT_SERVER": srv.AgentSocket()}
	for k, v := range ks.Env { // the kernelspec's own settings (MUJOCO_GL, PYRUALEAN_ROOT, ...)
		env[k] = os.Expand(v, os.Getenv)
	}
	delete(env, "CUDA_VISIBLE_DEVICES") // the kernel renders nothing: the GPU is the robot server's
	sb, err := seal.New(ctx, ks, seal.Options{Workspace: dir, ReadOnly: []string{srv.AgentDir()}, Env: env,
		PythonPath: robotserver.PythonPath(root, os.Getenv("PYTHONPATH"))})
	if err != nil {
		sk.close(log)
		return nil, ks, lo, rec, fmt.Errorf("seal: %w", err)
	}
	sk.sb = sb
	if err := srv.WaitReady(ctx); err != nil {
		sk.close(log)
		return nil, ks, lo, rec, fmt.Errorf("robot server: %w", err)
	}
	rec.Judge, rec.Info = "robot_server", sb.Info
	lo.IPC = sb.IPC
	return sk, sb.Spec, lo, rec, nil
}

var (
	makeCall = regexp.MustCompile(`\bmake\(\s*("(?:[^"\\\n]|\\.)*")`)
	makeKw   = regexp.MustCompile(`\b([A-Za-z_]\w*)\s*=\s*("(?:[^"\\\n]|\\.)*"|-?\d+)`)
)

// setupRobot reads the robot the trace's setup cell makes: make("robot", task=..., seed=..., ...) as
// robotapi.SetupCode writes it (JSON string literals and integers); the robot's own options are the
// keywords make() does not name.
func setupRobot(trace *notebooks.Notebook) (robotserver.Options, error) {
	var o robotserver.Options
	var src string
	for _, c := range trace.Cells {
		if c.CellType == notebooks.CellCode && notebooks.CellMetaOf(c).Author == notebooks.AuthorSetup {
			src = c.Source
			break
		}
	}
	m := makeCall.FindStringSubmatchIndex(src)
	if m == nil {
		return o, errors.New("the trace has no setup cell calling make(\"robot\", ...): its robot cannot be served")
	}
	if err := json.Unmarshal([]byte(src[m[2]:m[3]]), &o.Robot); err != nil {
		return o, fmt.Errorf("setup cell: robot: %w", err)
	}
	for _, kv := range makeKw.FindAllStringSubmatch(src[m[1]:], -1) {
		key, lit := kv[1], kv[2]
		var s string
		if lit[0] == '"' {
			if err := json.Unmarshal([]byte(lit), &s); err != nil {
				return o, fmt.Errorf("setup cell: %s: %w", key, err)
			}
		} else {
			s = lit
		}
		switch key {
		case "task":
			o.Task = s
		case "seed", "max_env_steps":
			n, err := strconv.Atoi(s)
			if err != nil {
				return o, fmt.Errorf("setup cell: %s=%s: %w", key, lit, err)
			}
			if key == "seed" {
				o.Seed = n
			} else {
				o.MaxEnvSteps = n
			}
		case "images":
			o.Images = s
		case "primitives":
			o.Primitives = s
		case "suite":
			o.Suite = s
		case "workspace": // the replay's own folder, not the recorded one
		default:
			if o.Options == nil {
				o.Options = map[string]string{}
			}
			o.Options[key] = s
		}
	}
	return o, nil
}

// sealedOutcome asks the robot server (the judge outside the kernel) for the replayed episode's end.
func (s *sealedKernel) outcome(ctx context.Context) (*robotapi.CellReport, error) {
	rep, err := s.srv.Report(ctx)
	if err != nil {
		return nil, err
	}
	success := rep.Success
	return &robotapi.CellReport{Success: &success, Done: rep.Done}, nil
}

// Line is the record as the text report prints it.
func (r SealRecord) Line() string {
	if r.Sealed {
		return fmt.Sprintf("sealed: yes (%s, uid %d, network %s; robot and judge in a robot server)", r.Method, r.UID, r.Network)
	}
	return fmt.Sprintf("sealed: NO (--sealed %s: %s)", r.Mode, r.Reason)
}

// recordMap is the record as the replayed notebook's metadata.pyrualean.replay.seal.
func (r SealRecord) recordMap() map[string]any {
	b, _ := json.Marshal(r)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return maps.Clone(m)
}

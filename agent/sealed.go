package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/robotserver"
	"github.com/pyrualean/pyrualean/seal"
)

// Sealed modes (EpisodeConfig.Sealed).
const (
	SealOff  = "off"  // the robot lives in the kernel (in-process), as before
	SealAuto = "auto" // robot server + OS sandbox where this machine has one; else served, unsealed, said loudly
	SealOn   = "on"   // robot server + OS sandbox, or the episode does not start
)

// ErrNotSealed means a sealed episode (Sealed "on") was asked for where no OS sandbox is available.
var ErrNotSealed = errors.New("episode: cannot seal the kernel")

// SealInfo is result.json's "seal": where the robot and the judge live, and the kernel's sandbox.
type SealInfo struct {
	Mode           string  `json:"mode"`  // off | auto | on
	Robot          string  `json:"robot"` // "server" (outside the kernel) | "kernel"
	Judge          string  `json:"judge"` // where success, env steps and the ledger are read: "robot_server" | "kernel"
	RobotServerPID int     `json:"robot_server_pid,omitempty"`
	RobotStartupS  float64 `json:"robot_startup_s,omitempty"`
	seal.Info
	// Refused lists the agent's raw RPCs the robot server refused (private names); RefusedTotal counts all.
	Refused      []string `json:"refused,omitempty"`
	RefusedTotal int      `json:"refused_total,omitempty"`
}

// served is a sealed episode's robot server and kernel sandbox.
type served struct {
	srv *robotserver.Server
	sb  *seal.Sandbox // nil: unsealed
}

func sealMode(m string) (string, error) {
	switch m {
	case "", SealOff:
		return SealOff, nil
	case SealAuto, SealOn:
		return m, nil
	}
	return "", fmt.Errorf("episode: sealed %q (want off, auto or on)", m)
}

// serve starts the robot server and wraps the kernelspec in the OS sandbox (Sealed auto|on); for
// Sealed off it returns spec and opts unchanged. The setup cell's make() then returns the proxy
// ($PYRUALEAN_ROBOT_SERVER), so the trace's setup cell is the same in every mode.
func (e *Episode) serve(ctx context.Context, spec kernel.Spec, opts kernel.LaunchOptions) (kernel.Spec, kernel.LaunchOptions, error) {
	c := e.cfg
	info := SealInfo{Mode: c.Sealed, Robot: "kernel", Judge: "kernel", Info: seal.Info{Reason: "sealed off: the robot runs in the kernel"}}
	defer func() {
		e.mu.Lock()
		e.res.Sealed, e.res.Seal = info.Sealed, &info
		e.mu.Unlock()
	}()
	if c.Sealed == SealOff {
		return spec, opts, nil
	}
	checkErr := seal.Check(ctx)
	if checkErr != nil && c.Sealed == SealOn {
		info.Reason = checkErr.Error()
		return spec, opts, fmt.Errorf("%w: %w", ErrNotSealed, checkErr)
	}
	extra := map[string]string{}
	if c.SAM3Endpoint != "" {
		extra["sam3_endpoint"] = c.SAM3Endpoint // segment runs where the robot does
	}
	if c.LiberoType != "" {
		extra["libero_type"] = c.LiberoType
	}
	srvEnv := map[string]string{}
	if c.CUDADevice != "" {
		srvEnv["CUDA_VISIBLE_DEVICES"] = c.CUDADevice
	}
	// The robot boots while the kernel starts; boot waits for it before the setup cell (awaitRobot).
	srv, err := robotserver.Launch(robotserver.Options{
		Root: c.Root, Robot: c.Robot, Task: c.Task, Seed: c.Seed, Suite: c.Suite, Images: c.Images,
		Primitives: c.Primitives, MaxEnvSteps: c.MaxEnvSteps, VLAEndpoint: c.VLAEndpoint, EnvEndpoint: c.EnvEndpoint,
		Extra: extra, Dir: filepath.Join(c.Out, "robot"), Env: srvEnv, Logger: e.log,
	})
	if err != nil {
		return spec, opts, fmt.Errorf("robot server: %w", err)
	}
	e.served = &served{srv: srv}
	info.Robot, info.Judge, info.RobotServerPID = "server", "robot_server", srv.Pid()
	if checkErr != nil {
		// Loudly: the robot and the judge are out of the kernel, but the kernel sees this machine.
		info.Reason = checkErr.Error()
		e.log.Warn("EPISODE NOT SEALED: the agent's kernel runs without an OS sandbox (it can read this "+
			"machine's files and environment); result.json records sealed: false", "reason", checkErr)
		env := map[string]string{"PYRUALEAN_ROBOT_SERVER": srv.AgentSocket(),
			"PYTHONPATH": robotserver.PythonPath(c.Root, os.Getenv("PYTHONPATH"))}
		for k, v := range opts.Env {
			env[k] = v
		}
		opts.Env = env
		return spec, opts, nil
	}
	env := map[string]string{"PYRUALEAN_ROBOT_SERVER": srv.AgentSocket()}
	for k, v := range spec.Env { // the kernelspec's own settings (MUJOCO_GL, PYRUALEAN_ROOT, ...)
		env[k] = os.Expand(v, os.Getenv)
	}
	for k, v := range opts.Env {
		env[k] = v
	}
	delete(env, "CUDA_VISIBLE_DEVICES") // the kernel renders nothing: the GPU is the robot server's
	sb, err := seal.New(ctx, spec, seal.Options{Workspace: e.workspace, ReadOnly: []string{srv.AgentDir()},
		Env: env, PythonPath: robotserver.PythonPath(c.Root, os.Getenv("PYTHONPATH"))})
	if err != nil {
		return spec, opts, fmt.Errorf("seal: %w", err)
	}
	e.served.sb = sb
	info.Info = sb.Info
	opts.IPC = sb.IPC
	opts.Env = c.KernelEnv // bwrap's own environment; the sandbox starts from --clearenv
	return sb.Spec, opts, nil
}

// awaitRobot waits until the robot server has booted (served episodes; before the setup cell).
func (e *Episode) awaitRobot(ctx context.Context) error {
	if e.served == nil {
		return nil
	}
	if err := e.served.srv.WaitReady(ctx); err != nil {
		return fmt.Errorf("robot server: %w", err)
	}
	e.mu.Lock()
	if old := e.res.Seal; old != nil {
		si := *old
		si.RobotStartupS = round3(e.served.srv.StartupDur.Seconds())
		e.res.Seal = &si
	}
	e.mu.Unlock()
	return nil
}

// judgeReport replaces the kernel's cell report with the robot server's (served episodes): success,
// env steps, ledger records, state and the episode's end come from the simulator's process, and the
// cell's flags from the server's static check of code (the source the agent wrote). The kernel's own
// flags are kept beside them: they are the in-kernel checks' record, feedback only.
func (e *Episode) judgeReport(ctx context.Context, code string, kernelReport *cellReport) *cellReport {
	if e.served == nil {
		return kernelReport
	}
	// The cell's flags come from the static check run by the robot server on the source we sent; the
	// kernel's own (its runtime audit) are added after, except what the server already named. A kernel
	// whose cell_report was replaced can hide its own flags, not these.
	var checked struct {
		Flags []string `json:"flags"`
	}
	if code == "" {
		// no agent source to check (a report after a person's cells)
	} else if raw, err := e.served.srv.Call(context.WithoutCancel(ctx), "host.check_source", code); err != nil {
		e.log.Warn("robot server source check", "err", err)
	} else if err := json.Unmarshal(raw, &checked); err != nil {
		e.log.Warn("robot server source check", "err", err)
	}
	raw, err := e.served.srv.Call(context.WithoutCancel(ctx), "host.report")
	if err != nil {
		e.log.Warn("robot server report", "err", err)
		return nil
	}
	var r cellReport
	var extra struct {
		Refused []string `json:"refused"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		e.log.Warn("robot server report", "err", err)
		return nil
	}
	_ = json.Unmarshal(raw, &extra)
	r.SandboxFlags = checked.Flags
	if kernelReport != nil {
		seen := map[string]bool{}
		for _, f := range checked.Flags {
			seen[f] = true
		}
		for _, f := range kernelReport.SandboxFlags {
			if !seen[f] {
				r.SandboxFlags = append(r.SandboxFlags, f)
			}
		}
	}
	if len(extra.Refused) > 0 {
		for _, x := range extra.Refused {
			r.SandboxFlags = append(r.SandboxFlags, "refused-by-robot-server:"+x)
		}
		e.mu.Lock()
		if old := e.res.Seal; old != nil {
			// a fresh copy: saveResult marshals the previous one outside the lock
			si := *old
			si.RefusedTotal += len(extra.Refused)
			si.Refused = append([]string{}, old.Refused...)
			if room := maxRefusedKept - len(si.Refused); room > 0 {
				si.Refused = append(si.Refused, extra.Refused[:min(room, len(extra.Refused))]...)
			}
			e.res.Seal = &si
		}
		e.mu.Unlock()
	}
	return &r
}

const maxRefusedKept = 200

// closeServed stops the robot server and removes the sandbox's runtime folder (after the kernel is down).
func (e *Episode) closeServed() {
	if e.served == nil {
		return
	}
	if err := e.served.srv.Close(); err != nil {
		e.log.Warn("robot server close", "err", err)
	}
	if err := e.served.sb.Close(); err != nil {
		e.log.Warn("seal close", "err", err)
	}
}

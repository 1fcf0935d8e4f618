package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/robotserver"
	"github.com/pyrualean/pyrualean/seal"
	"github.com/pyrualean/pyrualean/spec"
)

// ErrNotSealed means a sealed episode (Sealed "on") was asked for where no OS sandbox is available.
var ErrNotSealed = errors.New("episode: cannot seal the kernel")

// SealInfo is result.json's "seal": where the robot and the judge live, and the kernel's sandbox.
type SealInfo struct {
	Mode           string `json:"mode"`  // off | auto | on
	Robot          string `json:"robot"` // "server" (outside the kernel) | "kernel"
	Judge          string `json:"judge"` // where success, env steps and the ledger are read: "robot_server" | "kernel"
	RobotServerPID int    `json:"robot_server_pid,omitempty"`
	// RobotServerForked says the server was forked from a suite's forker (imports shared), not exec'd.
	RobotServerForked bool    `json:"robot_server_forked,omitempty"`
	RobotStartupS     float64 `json:"robot_startup_s,omitempty"`
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

// serve starts the robot server and wraps the kernelspec in the OS sandbox (Sealed auto|on); with
// Sealed off it returns ks and opts unchanged. The setup cell's make() then returns the proxy
// ($PYRUALEAN_ROBOT_SERVER), so the trace's setup cell is the same in every mode.
func (b booter) serve(ctx context.Context, ks kernel.Spec, opts kernel.LaunchOptions) (kernel.Spec, kernel.LaunchOptions, error) {
	e := b.e
	s := e.spec
	info := SealInfo{Mode: s.Sealed, Robot: "kernel", Judge: "kernel", Info: seal.Info{Reason: "sealed off: the robot runs in the kernel"}}
	defer func() { e.book.update(func(r *Result) { r.Sealed, r.Seal = info.Sealed, &info }) }()
	if s.Sealed == spec.SealOff {
		return ks, opts, nil
	}
	checkErr := seal.Check(ctx)
	if checkErr != nil && s.Sealed == spec.SealOn {
		info.Reason = checkErr.Error()
		return ks, opts, fmt.Errorf("%w: %w", ErrNotSealed, checkErr)
	}
	srvEnv := map[string]string{}
	if s.CUDADevice != "" {
		srvEnv["CUDA_VISIBLE_DEVICES"] = s.CUDADevice
	}
	// The robot boots while the kernel starts; boot waits for it before the setup cell (awaitRobot).
	srv, err := robotserver.Launch(robotserver.Options{
		Root: e.host.Root, Robot: s.Robot, Task: s.Task, Seed: s.Seed, Suite: s.Suite, Images: s.Images,
		Primitives: s.Primitives, MaxEnvSteps: s.MaxEnvSteps, Options: s.RobotOptions,
		Dir: filepath.Join(s.Out, "robot"), Env: srvEnv, Logger: e.log, Forker: e.host.Forker,
	})
	if err != nil {
		return ks, opts, fmt.Errorf("robot server: %w", err)
	}
	e.served = &served{srv: srv}
	info.Robot, info.Judge, info.RobotServerPID = "server", "robot_server", srv.Pid()
	info.RobotServerForked = srv.Forked()
	pythonPath := robotserver.PythonPath(e.host.Root, os.Getenv("PYTHONPATH"))
	if checkErr != nil {
		// Loudly: the robot and the judge are out of the kernel, but the kernel sees this machine.
		info.Reason = checkErr.Error()
		e.log.Warn("EPISODE NOT SEALED: the agent's kernel runs without an OS sandbox (it can read this "+
			"machine's files and environment); result.json records sealed: false", "reason", checkErr)
		env := map[string]string{"PYRUALEAN_ROBOT_SERVER": srv.AgentSocket(), "PYTHONPATH": pythonPath}
		maps.Copy(env, opts.Env)
		opts.Env = env
		return ks, opts, nil
	}
	env := map[string]string{"PYRUALEAN_ROBOT_SERVER": srv.AgentSocket()}
	for k, v := range ks.Env { // the kernelspec's own settings (MUJOCO_GL, PYRUALEAN_ROOT, ...)
		env[k] = os.Expand(v, os.Getenv)
	}
	maps.Copy(env, opts.Env)
	delete(env, "CUDA_VISIBLE_DEVICES") // the kernel renders nothing: the GPU is the robot server's
	sb, err := seal.New(ctx, ks, seal.Options{Workspace: e.files.workspace, ReadOnly: []string{srv.AgentDir()},
		Env: env, PythonPath: pythonPath})
	if err != nil {
		return ks, opts, fmt.Errorf("seal: %w", err)
	}
	e.served.sb = sb
	info.Info = sb.Info
	if sb.Info.HostUIDNote != "" {
		e.log.Warn("the sealed kernel's user is root on the host (an escape from its namespaces would be root); "+
			"result.json seal.host_uid_note says why", "note", sb.Info.HostUIDNote)
	}
	opts.IPC = sb.IPC
	opts.Env = e.host.KernelEnv // bwrap's own environment; the sandbox starts from --clearenv
	return sb.Spec, opts, nil
}

// awaitRobot waits until the robot server has booted (served episodes; before the setup cell).
func (b booter) awaitRobot(ctx context.Context) error {
	e := b.e
	if e.served == nil {
		return nil
	}
	if err := e.served.srv.WaitReady(ctx); err != nil {
		return fmt.Errorf("robot server: %w", err)
	}
	e.book.update(func(r *Result) {
		if r.Seal != nil {
			si := *r.Seal
			si.RobotStartupS = Round(e.served.srv.StartupDur.Seconds(), 3)
			r.Seal = &si
		}
	})
	return nil
}

// noteRefused keeps the agent's raw RPCs the robot server refused in result.json's seal record.
func noteRefused(l *ledger, refused []string) {
	l.update(func(r *Result) {
		if r.Seal == nil {
			return
		}
		si := *r.Seal // a fresh copy: save marshals the previous one outside the lock
		si.RefusedTotal += len(refused)
		si.Refused = append([]string{}, r.Seal.Refused...)
		if room := maxRefusedKept - len(si.Refused); room > 0 {
			si.Refused = append(si.Refused, refused[:min(room, len(refused))]...)
		}
		r.Seal = &si
	})
}

const maxRefusedKept = 200

// watchQuota enforces the workspace's quota while the sealed kernel runs: past it, the sandbox is
// killed (the kernel dies and the episode ends as for any kernel death) and result.json's notes say why.
func (sv *served) watchQuota(e *Episode) {
	if sv == nil || sv.sb == nil {
		return
	}
	sb := sv.sb
	sb.WatchWorkspace(func(u seal.Usage) {
		msg := fmt.Sprintf("the workspace passed its quota (%d bytes in %d entries counted; at most %d bytes, %d entries): "+
			"the sealed kernel was killed", u.Bytes, u.Entries, sb.Info.WorkspaceMax, sb.Info.WorkspaceEntriesMax)
		e.log.Error("seal: " + msg)
		e.book.update(func(r *Result) { r.Notes = append(r.Notes, msg) })
		if err := sb.Kill(); err != nil {
			e.log.Warn("seal: kill", "err", err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = e.kern.Shutdown(ctx)
		}
	})
}

// tellSpan passes the dispatcher's spans to the robot server (host.span, on the host socket the kernel
// never sees). A failure is logged: the calls then keep the previous span, and the server's own total
// still bounds what the ledger counts.
func (sv *served) tellSpan(log *slog.Logger) func(kind string, cell int) {
	return func(kind string, cell int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := sv.srv.Call(ctx, "host.span", kind, cell); err != nil {
			log.Warn("robot server: host.span", "span", kind, "cell", cell, "err", err)
		}
	}
}

// closeServed stops the robot server and removes the sandbox's runtime folder (after the kernel is down).
func (sv *served) close(log *slog.Logger) {
	if sv == nil {
		return
	}
	if err := sv.srv.Close(); err != nil {
		log.Warn("robot server close", "err", err)
	}
	if err := sv.sb.Close(); err != nil {
		log.Warn("seal close", "err", err)
	}
}

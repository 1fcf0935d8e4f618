package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/robotserver"
	"github.com/pyrualean/pyrualean/seal"
)

// servedBench is `bench robot`'s served half: the same primitives in-process and through the robot
// server (pyrualean_robot.served.bench, interleaved in one process), and the start-up of a sealed
// kernel versus today's.
type servedBench struct {
	InProcess map[string]float64 `json:"in_process"`
	Served    map[string]float64 `json:"served"`
	// kernel launch to first answer, no robot: plain (tcp) versus sealed (bwrap, ipc)
	KernelLaunchMS, SealedKernelLaunchMS float64
	// robot ready in a fresh kernel: today's (launch + make() in-process) versus sealed (robot server
	// boot, sealed launch, setup cell connecting the proxy), and the robot server's boot alone
	SealedEpisodeStartMS, RobotServerStartMS float64
	// the same with the robot server forked from a Forker (eval's default)
	ForkedEpisodeStartMS, ForkedServerStartMS float64
}

func measureServed(ctx context.Context, reps int) (*servedBench, error) {
	root, err := robotapi.Root()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pyrualean-bench-served-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	b := &servedBench{}
	srv, err := robotserver.Start(ctx, robotserver.Options{Root: root, Robot: robotapi.DefaultRobot, Task: "stack_blocks",
		Images: "on-demand", Primitives: "full", Dir: dir})
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, robotapi.Python(root), "-m", "pyrualean_robot.served.bench",
		"--socket", srv.AgentSocket(), "--reps", fmt.Sprint(max(3*reps, 9)))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+robotserver.PythonPath(root, os.Getenv("PYTHONPATH")), "MUJOCO_GL=egl")
	out, err := cmd.Output()
	srv.Close()
	if err != nil {
		return nil, fmt.Errorf("served bench: %w", err)
	}
	if err := json.Unmarshal(out, b); err != nil {
		return nil, fmt.Errorf("served bench output: %w", err)
	}
	if err := seal.Check(ctx); err != nil {
		return b, nil // no sandbox here: the start-up comparison is left out (printed as n/a)
	}
	spec, err := kernel.FindSpec("pyrualean")
	if err != nil {
		return nil, err
	}
	pypath := robotserver.PythonPath(root, os.Getenv("PYTHONPATH"))
	forker, err := robotserver.StartForker(ctx, robotserver.ForkerOptions{Root: root})
	if err != nil {
		return nil, err
	}
	defer forker.Close()
	var plain, sealed, episode, server, forkedEpisode, forkedServer []float64
	for range reps {
		ws, err := os.MkdirTemp(dir, "ws-")
		if err != nil {
			return nil, err
		}
		ms, err := timeKernel(ctx, spec, kernel.LaunchOptions{Dir: ws}, "1")
		if err != nil {
			return nil, err
		}
		plain = append(plain, ms)
		sb, err := seal.New(ctx, spec, seal.Options{Workspace: ws, PythonPath: pypath})
		if err != nil {
			return nil, err
		}
		ms, err = timeKernel(ctx, sb.Spec, kernel.LaunchOptions{Dir: ws, IPC: sb.IPC}, "1")
		sb.Close()
		if err != nil {
			return nil, err
		}
		sealed = append(sealed, ms)
		// a whole sealed boot, as an episode does it, with the robot server exec'd and forked (interleaved)
		for _, f := range []*robotserver.Forker{nil, forker} {
			ems, sms, err := sealedBoot(ctx, root, spec, pypath, ws, f)
			if err != nil {
				return nil, err
			}
			if f == nil {
				episode, server = append(episode, ems), append(server, sms)
			} else {
				forkedEpisode, forkedServer = append(forkedEpisode, ems), append(forkedServer, sms)
			}
		}
	}
	b.KernelLaunchMS, b.SealedKernelLaunchMS = median(plain), median(sealed)
	b.SealedEpisodeStartMS, b.RobotServerStartMS = median(episode), median(server)
	b.ForkedEpisodeStartMS, b.ForkedServerStartMS = median(forkedEpisode), median(forkedServer)
	return b, nil
}

// sealedBoot boots as a sealed episode does (the robot server, forked by f when set, boots while the
// sealed kernel starts; then the setup cell): ms to the robot ready in the kernel, and the server's boot.
func sealedBoot(ctx context.Context, root string, spec kernel.Spec, pypath, ws string, f *robotserver.Forker) (float64, float64, error) {
	t0 := time.Now()
	dir, err := os.MkdirTemp(filepath.Dir(ws), "robot-")
	if err != nil {
		return 0, 0, err
	}
	srv, err := robotserver.Launch(robotserver.Options{Root: root, Robot: robotapi.DefaultRobot, Task: "stack_blocks",
		Images: "on-demand", Primitives: "full", Dir: dir, Forker: f})
	if err != nil {
		return 0, 0, err
	}
	defer srv.Close()
	if f != nil && !srv.Forked() {
		return 0, 0, fmt.Errorf("the robot server was not forked")
	}
	sb, err := seal.New(ctx, spec, seal.Options{Workspace: ws, ReadOnly: []string{srv.AgentDir()}, PythonPath: pypath,
		Env: map[string]string{"PYRUALEAN_ROBOT_SERVER": srv.AgentSocket()}})
	if err != nil {
		return 0, 0, err
	}
	defer sb.Close()
	setup := robotapi.SetupCode(robotapi.SetupOptions{Task: "stack_blocks", Workspace: ws, Images: "on-demand"})
	if _, err := timeKernelAfter(ctx, sb.Spec, kernel.LaunchOptions{Dir: ws, IPC: sb.IPC}, setup, srv.WaitReady); err != nil {
		return 0, 0, err
	}
	return float64(time.Since(t0).Microseconds()) / 1000, float64(srv.StartupDur.Microseconds()) / 1000, nil
}

// timeKernel launches a kernel, runs code until it answers ok, shuts it down; ms to the answer.
func timeKernel(ctx context.Context, spec kernel.Spec, opts kernel.LaunchOptions, code string) (float64, error) {
	return timeKernelAfter(ctx, spec, opts, code, nil)
}

// timeKernelAfter is timeKernel with wait (if any) between the launch and the code.
func timeKernelAfter(ctx context.Context, spec kernel.Spec, opts kernel.LaunchOptions, code string, wait func(context.Context) error) (float64, error) {
	t0 := time.Now()
	k, err := kernel.Launch(ctx, spec, opts)
	if err != nil {
		return 0, err
	}
	if wait != nil {
		if err := wait(ctx); err != nil {
			k.Shutdown(context.WithoutCancel(ctx))
			return 0, err
		}
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer cancel()
		k.Shutdown(sctx)
	}()
	res, err := k.Client().Execute(ctx, code, kernel.ExecuteOptions{Timeout: 2 * time.Minute})
	if err != nil {
		return 0, err
	}
	if res.Status != "ok" {
		msg := res.Status
		if res.Error != nil {
			msg += ": " + res.Error.Ename + ": " + res.Error.Evalue
		}
		return 0, fmt.Errorf("bench cell: %s", msg)
	}
	return float64(time.Since(t0).Microseconds()) / 1000, nil
}

// addTo puts the served medians into bench robot's JSON (served_* keys and the ratios).
func (b *servedBench) addTo(res map[string]float64) {
	for k, v := range b.InProcess {
		res["inproc_"+k] = v
	}
	for k, v := range b.Served {
		res["served_"+k] = v
		if base := b.InProcess[k]; base > 0 {
			res["served_ratio_"+k] = v / base
		}
	}
	res["kernel_launch_ms"], res["sealed_kernel_launch_ms"] = b.KernelLaunchMS, b.SealedKernelLaunchMS
	res["sealed_episode_start_ms"], res["robot_server_start_ms"] = b.SealedEpisodeStartMS, b.RobotServerStartMS
	res["forked_episode_start_ms"], res["forked_server_start_ms"] = b.ForkedEpisodeStartMS, b.ForkedServerStartMS
}

func (b *servedBench) print(w io.Writer, coldStartMS float64) {
	fmt.Fprintln(w, "in-process vs served robot (same process, interleaved; medians):")
	for _, k := range []string{"state_ms", "image256_ms", "on_motion_png_per_image_ms", "move_to_20cm_ms", "cell_10_primitives_ms"} {
		in, sv := b.InProcess[k], b.Served[k]
		ratio := 0.0
		if in > 0 {
			ratio = sv / in
		}
		fmt.Fprintf(w, "  %-28s %8.2f ms  served %8.2f ms  (%.2fx, %+.2f ms)\n", k, in, sv, ratio, sv-in)
	}
	if b.SealedKernelLaunchMS == 0 {
		fmt.Fprintln(w, "sealed kernel start: n/a (no OS sandbox on this machine)")
		return
	}
	fmt.Fprintf(w, "kernel launch       %8.1f ms   sealed %8.1f ms (%.2fx)\n", b.KernelLaunchMS, b.SealedKernelLaunchMS, b.SealedKernelLaunchMS/b.KernelLaunchMS)
	fmt.Fprintf(w, "robot ready (cold)  %8.1f ms   sealed %8.1f ms (%.2fx; robot server boot %.0f ms of it)\n",
		coldStartMS, b.SealedEpisodeStartMS, b.SealedEpisodeStartMS/coldStartMS, b.RobotServerStartMS)
	fmt.Fprintf(w, "  robot server forked        sealed %8.1f ms (%.2fx; robot server boot %.0f ms of it, %.2fx of exec'd)\n",
		b.ForkedEpisodeStartMS, b.ForkedEpisodeStartMS/coldStartMS, b.ForkedServerStartMS, b.ForkedServerStartMS/b.RobotServerStartMS)
}

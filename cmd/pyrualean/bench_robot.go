package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/robotapi"
)

// benchRobot measures the robot: in-process medians (physics step, renders, a 20 cm move_to) and, side by
// side, the time until `robo` is ready in a freshly launched kernel (cold) versus one taken warm from a
// kernel.Pool (Take + the setup cell).
func benchRobot(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench robot", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print medians as JSON")
	reps := fs.Int("reps", 3, "kernel start-ups per arm")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *reps < 1 {
		fmt.Fprintln(stderr, "pyrualean bench robot: usage: pyrualean bench robot [--json] [--reps N]")
		return 2
	}
	in, err := robotapi.MeasureInProcess(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench robot: %v\n", err)
		return 1
	}
	cold, pool, err := kernelStarts(ctx, *reps)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench robot: %v\n", err)
		return 1
	}
	res := map[string]float64{
		"step_ms": in.StepMS, "control_step_ms": in.ControlStepMS, "render256_ms": in.Render256MS,
		"render128_ms": in.Render128MS, "move_to_20cm_ms": in.MoveTo20cmMS, "cold_start_ms": median(cold),
		"pool_take_ms": median(pool),
	}
	sv, err := measureServed(ctx, *reps) // bench_served.go: the same, through the robot server
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench robot: served: %v\n", err)
		return 1
	}
	sv.addTo(res)
	if *asJSON {
		json.NewEncoder(stdout).Encode(res)
		return 0
	}
	fmt.Fprintf(stdout, "physics step       %8.3f ms   (one 2 ms mj_step)\n", in.StepMS)
	fmt.Fprintf(stdout, "control step       %8.3f ms   (50 ms of sim: %.0fx faster than real time)\n", in.ControlStepMS, 50/in.ControlStepMS)
	fmt.Fprintf(stdout, "render 256x256     %8.2f ms   (target 50 ms: %.2fx of budget)\n", in.Render256MS, in.Render256MS/50)
	fmt.Fprintf(stdout, "render 128x128     %8.2f ms\n", in.Render128MS)
	fmt.Fprintf(stdout, "move_to 20 cm      %8.1f ms   (%.0f control steps)\n", in.MoveTo20cmMS, in.MoveTo20cmSteps)
	fmt.Fprintf(stdout, "make() warm proc   %8.1f ms\n", in.MakeMS)
	fmt.Fprintf(stdout, "kernel cold start  %8.1f ms   (launch + setup cell, robot ready; n=%d)\n", median(cold), len(cold))
	fmt.Fprintf(stdout, "pool take + setup  %8.1f ms   (%.1fx faster than cold)\n", median(pool), median(cold)/median(pool))
	sv.print(stdout, median(cold))
	return 0
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// kernelStarts times `reps` cold starts (launch + setup cell) and `reps` pooled starts (Take of a warmed
// kernel + setup cell), in milliseconds.
func kernelStarts(ctx context.Context, reps int) (cold, pool []float64, err error) {
	spec, err := kernel.FindSpec("pyrualean")
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "pyrualean-bench-robot-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	setup := robotapi.SetupCode(robotapi.SetupOptions{Task: "stack_blocks", Workspace: dir, Images: "on-demand"})
	opts := kernel.LaunchOptions{Dir: dir}
	ready := func(k *kernel.Kernel) error {
		res, err := k.Client().Execute(ctx, setup, kernel.ExecuteOptions{Timeout: 2 * time.Minute})
		if err != nil {
			return err
		}
		if res.Status != "ok" {
			return fmt.Errorf("setup cell: %s", res.Status)
		}
		return nil
	}
	stop := func(k *kernel.Kernel) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer cancel()
		k.Shutdown(sctx)
	}
	for range reps {
		t0 := time.Now()
		k, err := kernel.Launch(ctx, spec, opts)
		if err != nil {
			return nil, nil, err
		}
		err = ready(k)
		cold = append(cold, float64(time.Since(t0).Microseconds())/1000)
		stop(k)
		if err != nil {
			return nil, nil, err
		}
	}
	p, err := kernel.NewPool(ctx, spec, 1, robotapi.WarmCode, opts)
	if err != nil {
		return nil, nil, err
	}
	defer p.Close()
	settle := time.Duration(median(cold)*2) * time.Millisecond
	for i := range reps + 1 {
		if i > 0 {
			// let the pool finish warming its replacement, so Take measures a ready kernel
			select {
			case <-time.After(settle):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		t0 := time.Now()
		k, err := p.Take(ctx)
		if err != nil {
			return nil, nil, err
		}
		err = ready(k)
		if i > 0 { // the first Take waits for the pool's first warm-up
			pool = append(pool, float64(time.Since(t0).Microseconds())/1000)
		}
		stop(k)
		if err != nil {
			return nil, nil, err
		}
	}
	return cold, pool, nil
}

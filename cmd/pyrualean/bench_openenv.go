package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/gorilla/websocket"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/openenv"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// openenvBench is `bench openenv`: the same cell as a step of an OpenEnv session (a WebSocket client
// on loopback, the server's JSON frames, the observation back) and as a direct call of a play
// episode's toolkit (what play's runtimes do), interleaved in one run on two episodes of the same
// task and seed.
type openenvBench struct {
	Cell      string    `json:"cell"`
	Reps      int       `json:"reps"`
	DirectMS  []float64 `json:"direct_ms"`
	OpenEnvMS []float64 `json:"openenv_ms"`
	DirectMed float64   `json:"direct_median_ms"`
	OpenMed   float64   `json:"openenv_median_ms"`
	Ratio     float64   `json:"ratio"` // openenv / direct medians
}

func benchOpenEnv(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench openenv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	reps := fs.Int("reps", 30, "cells per side")
	cell := fs.String("cell", "robo.state()", "the cell both sides run")
	images := fs.String("images", spec.ImagesOnMotion, "the episodes' --images")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	b, err := measureOpenEnv(ctx, *reps, *cell, *images)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean bench openenv: %v\n", err)
		return 1
	}
	if *asJSON {
		return printJSON(stdout, b)
	}
	fmt.Fprintf(stdout, "cell %q, %d reps each, interleaved, same task and seed (put_block_in_bowl/0), sealed where available\n", b.Cell, b.Reps)
	fmt.Fprintf(stdout, "  direct (play's toolkit call):     median %.2f ms\n", b.DirectMed)
	fmt.Fprintf(stdout, "  OpenEnv step (WebSocket, JSON):   median %.2f ms\n", b.OpenMed)
	fmt.Fprintf(stdout, "  ratio OpenEnv / direct:           %.3fx\n", b.Ratio)
	return 0
}

func measureOpenEnv(ctx context.Context, reps int, cell, images string) (*openenvBench, error) {
	dir, err := os.MkdirTemp("", "pyrualean-bench-openenv-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	base := spec.New()
	base.Sealed, base.Images, base.BudgetS, base.MaxCalls = spec.SealAuto, images, 0, 0
	reg := &robotapi.Registry{}

	// the anchor: a play episode driven directly
	direct := base
	direct.Task, direct.Seed, direct.Out, direct.Policy = "put_block_in_bowl", 0, filepath.Join(dir, "direct"), spec.Policy{Runtime: openenv.Runtime}
	if err := direct.Validate(ctx, reg); err != nil {
		return nil, err
	}
	ep, err := agent.StartEpisode(ctx, direct, agent.Host{Logger: log})
	if err != nil {
		return nil, err
	}
	defer ep.Finish(context.WithoutCancel(ctx), "", nil)

	// the measured side: the same episode through an OpenEnv session
	srv, err := openenv.New(openenv.Config{Base: base, Out: filepath.Join(dir, "openenv"), Robots: reg, Host: agent.Host{Logger: log}, Logger: log})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	defer func() { srv.Close(); hs.Close() }()
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+ln.Addr().String()+"/ws", nil)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	roundTrip := func(msg any) (map[string]any, error) {
		if err := conn.WriteJSON(msg); err != nil {
			return nil, err
		}
		var f map[string]any
		if err := conn.ReadJSON(&f); err != nil {
			return nil, err
		}
		if f["type"] == "error" {
			return nil, fmt.Errorf("openenv: %v", f["data"])
		}
		return f, nil
	}
	if _, err := roundTrip(map[string]any{"type": "reset", "data": map[string]any{"task": "put_block_in_bowl", "seed": 0}}); err != nil {
		return nil, err
	}
	args, _ := json.Marshal(map[string]string{"code": cell})
	step := map[string]any{"type": "step", "data": map[string]any{"code": cell}}
	b := &openenvBench{Cell: cell, Reps: reps}
	for i := range reps + 2 { // the first two of each are warm-up
		var d, o float64
		runDirect := func() error {
			t := time.Now()
			_, err := ep.Toolkit().Call(ctx, "python", args)
			d = float64(time.Since(t).Microseconds()) / 1000
			return err
		}
		runOpen := func() error {
			t := time.Now()
			_, err := roundTrip(step)
			o = float64(time.Since(t).Microseconds()) / 1000
			return err
		}
		first, second := runDirect, runOpen
		if i%2 == 1 { // alternate the order: neither side always runs on a warmer machine
			first, second = runOpen, runDirect
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
		if i >= 2 {
			b.DirectMS, b.OpenEnvMS = append(b.DirectMS, d), append(b.OpenEnvMS, o)
		}
	}
	b.DirectMed, b.OpenMed = median(b.DirectMS), median(b.OpenEnvMS)
	b.Ratio = b.OpenMed / b.DirectMed
	return b, nil
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/eval/rayjob"
	"github.com/pyrualean/pyrualean/eval/rayservice"
)

// rayFlags are eval's engine flags: where a suite's episodes run, and what each asks a Ray
// cluster for.
type rayFlags struct {
	engine, address, bin, python string
	servicePort                  int
	cpus, memoryGB, gpus         float64
}

func (f *rayFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.engine, "engine", "local", "local (this machine, --jobs workers) or ray (a Ray cluster at --ray-address)")
	fs.StringVar(&f.address, "ray-address", os.Getenv("RAY_ADDRESS"), "the Ray dashboard, http://HEAD:8265 (default $RAY_ADDRESS)")
	fs.StringVar(&f.bin, "ray-pyrualean", "pyrualean", "the pyrualean binary on the nodes (a name on their PATH, or a path)")
	fs.StringVar(&f.python, "ray-python", "python", "the nodes' python with ray, for pyrualean's service job (started once per cluster)")
	fs.IntVar(&f.servicePort, "ray-service-port", 8275, "where pyrualean's service job listens on the head node, when eval starts it (0: any free port; eval reads it from the job's log)")
	fs.Float64Var(&f.cpus, "ray-cpus", 1, "CPUs each episode's task asks for")
	fs.Float64Var(&f.memoryGB, "ray-memory-gb", 1, "memory (GiB) each episode's task asks for (0: none)")
	fs.Float64Var(&f.gpus, "ray-gpus", 0, "GPUs each episode's task asks for (an episode with a cuda-device setting asks for 1 unless set; Ray sets CUDA_VISIBLE_DEVICES)")
}

func (f *rayFlags) validate(set map[string]bool) error {
	switch f.engine {
	case "local":
		for _, n := range []string{"ray-address", "ray-pyrualean", "ray-python", "ray-service-port", "ray-cpus", "ray-memory-gb", "ray-gpus"} {
			if set[n] {
				return fmt.Errorf("--%s is for --engine ray", n)
			}
		}
		return nil
	case "ray":
	default:
		return fmt.Errorf("--engine %q: want local or ray", f.engine)
	}
	switch {
	case f.address == "":
		return fmt.Errorf("--engine ray needs --ray-address http://HEAD:8265 (or $RAY_ADDRESS)")
	case set["jobs"] || set["boot-ahead"]:
		return fmt.Errorf("--jobs, --boot-ahead: with --engine ray the cluster decides how many episodes run at once (--ray-cpus, --ray-memory-gb, --ray-gpus each)")
	case f.cpus <= 0 || f.memoryGB < 0 || f.gpus < 0:
		return fmt.Errorf("--ray-cpus must be > 0, --ray-memory-gb and --ray-gpus >= 0")
	case f.servicePort < 0 || f.servicePort > 65535:
		return fmt.Errorf("--ray-service-port %d: want 0-65535", f.servicePort)
	}
	_, err := rayjob.New(f.address)
	return err
}

// rayEnvNames are this machine's environment variables that pick an episode's settings (play
// reads them as defaults); they travel with the job so nodes run what this machine would. Never a
// secret: an API key stays in the nodes' environment, named by api-key-env.
var rayEnvNames = []string{"OPENAI_BASE_URL", "PYRUALEAN_MODEL", "PYRUALEAN_PRIMITIVES", "PYRUALEAN_VLA_ENDPOINT",
	"PYRUALEAN_ENV_SERVER", "PYRUALEAN_CODEX_RETRIES"}

// engineFor checks the cluster answers and returns the Ray engine for the eval folder dir.
func (f *rayFlags) engineFor(ctx context.Context, dir string, maxConns int, logger *slog.Logger, stderr io.Writer) (*eval.Ray, error) {
	client, err := rayjob.New(f.address)
	if err != nil {
		return nil, err
	}
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := client.Version(vctx)
	if err != nil {
		return nil, fmt.Errorf("--ray-address %s: the Ray dashboard does not answer: %w", f.address, err)
	}
	env := map[string]string{}
	for _, n := range rayEnvNames {
		if val := os.Getenv(n); val != "" {
			env[n] = val
		}
	}
	return &eval.Ray{
		Client:  client,
		Command: []string{f.bin, "episode", "--max-connections", strconv.Itoa(maxConns)},
		Service: rayservice.Options{Python: f.python, Port: f.servicePort, Pyrualean: f.bin, Logger: logger},
		Owner:   owner(dir),
		Prepare: rayPrepare(f.cpus, f.memoryGB, f.gpus),
		Env:     env,
		Logger:  logger,
		OnSubmit: func(suite string, svc *rayservice.Service) {
			fmt.Fprintf(stderr, "ray suite %s on %s (Ray %s, service job %s)\n", suite, strings.TrimRight(f.address, "/"), v.RayVersion, svc.Job)
		},
	}, nil
}

// owner names an eval folder on this machine for the service: running the same eval again
// (after a kill -9) cancels what the service still runs of the killed one.
func owner(dir string) string {
	host, _ := os.Hostname()
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	sum := sha256.Sum256([]byte(host + "\x00" + abs))
	return hex.EncodeToString(sum[:12])
}

// rayPrepare gives each task its resources. A GPU episode asks Ray for the GPU instead of naming
// one: its cuda-device setting is dropped on the node (Ray sets CUDA_VISIBLE_DEVICES for the task,
// and the kernel inherits it); its id keeps the setting, so it is the same episode as a local run.
func rayPrepare(cpus, memoryGB, gpus float64) func(eval.Job) (eval.Episode, eval.RayResources) {
	return func(j eval.Job) (eval.Episode, eval.RayResources) {
		ep := j.Episode
		res := eval.RayResources{CPUs: cpus, MemoryBytes: int64(memoryGB * (1 << 30)), GPUs: gpus}
		if _, ok := ep.Settings["cuda-device"]; ok {
			ep.Settings = maps.Clone(ep.Settings)
			delete(ep.Settings, "cuda-device")
			if res.GPUs == 0 {
				res.GPUs = 1
			}
		}
		return ep, res
	}
}

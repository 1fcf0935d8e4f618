package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/pyrualean/pyrualean/llm"
	"github.com/pyrualean/pyrualean/robotapi"
)

// cmdModels lists the embedded local models, installs one, or verifies one.
//
//	pyrualean models [--json] [--dir D]
//	pyrualean models install [--dir D] NAME
//	pyrualean models verify [--dir D] NAME
//	pyrualean models serve [--port P] [--threads T] [--ctx-size C] [NAME]
func cmdModels(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "serve" {
		return cmdModelsServe(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && (args[0] == "install" || args[0] == "verify") {
		return cmdModelsInstall(ctx, args[0], args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("models", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON objects {name, installed, path, sha256, ...}")
	dir := fs.String("dir", "", "weights cache (default $PYRUALEAN_MODELS or <repo>/models)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if err == nil {
			err = fmt.Errorf("unexpected argument %q (subcommands: install NAME, verify NAME)", fs.Arg(0))
		}
		fmt.Fprintf(stderr, "pyrualean models: %v\n", err)
		return 2
	}
	d, err := modelsDir(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean models: %v\n", err)
		return 1
	}
	type row struct {
		Name      string `json:"name"`
		Installed bool   `json:"installed"`
		Path      string `json:"path"`
		SHA256    string `json:"sha256"`
		Size      int64  `json:"size"`
		Title     string `json:"title"`
		Licence   string `json:"licence"`
		Chat      bool   `json:"chat"`
		Default   bool   `json:"default"`
		Packages  int    `json:"packages"`
		Note      string `json:"note"`
	}
	var rows []row
	for _, m := range llm.Models() {
		rows = append(rows, row{Name: m.Name, Installed: llm.Installed(d, m), Path: llm.Path(d, m), SHA256: m.SHA256,
			Size: m.Size, Title: m.Title, Licence: m.Licence, Chat: m.Chat, Default: m.Name == llm.DefaultModel,
			Packages: len(m.Packages), Note: m.Note})
	}
	if *asJSON {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tINSTALLED\tSIZE\tLICENCE\tPATH")
	for _, r := range rows {
		name := r.Name
		if r.Default {
			name += " (default)"
		}
		if !r.Chat {
			name += " (not a chat model)"
		}
		fmt.Fprintf(tw, "%s\t%v\t%d MiB\t%s\t%s\n", name, r.Installed, r.Size>>20, r.Licence, r.Path)
	}
	tw.Flush()
	return 0
}

func cmdModelsInstall(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("models "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "", "weights cache (default $PYRUALEAN_MODELS or <repo>/models)")
	quiet := fs.Bool("quiet", false, "no progress bar")
	// Accept NAME before or after the flags.
	var name string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "pyrualean models %s: %v\n", verb, err)
		return 2
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 || name == "" {
		fmt.Fprintf(stderr, "pyrualean models %s: want exactly one model NAME (known: %v)\n", verb, llm.Names())
		return 2
	}
	m, err := llm.Lookup(name)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean models %s: %v\n", verb, err)
		return 2
	}
	d, err := modelsDir(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean models %s: %v\n", verb, err)
		return 1
	}
	if verb == "verify" {
		if err := llm.Verify(d, m); err != nil {
			fmt.Fprintf(stderr, "pyrualean models verify: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s ok: sha256 %s %s\n", m.Name, m.SHA256, llm.Path(d, m))
		return 0
	}
	root, err := robotapi.Root()
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean models install: %v\n", err)
		return 1
	}
	var progress io.Writer = stderr
	if *quiet {
		progress = nil
	}
	path, err := llm.Install(ctx, m, llm.InstallOptions{Dir: d, Python: robotapi.Python(root), Progress: progress})
	if err != nil {
		if errors.Is(err, llm.ErrChecksum) {
			fmt.Fprintf(stderr, "pyrualean models install: %v (nothing was installed)\n", err)
		} else {
			fmt.Fprintf(stderr, "pyrualean models install: %v\n", err)
		}
		return 1
	}
	fmt.Fprintf(stdout, "%s installed: %s (sha256 %s)\n", m.Name, path, m.SHA256)
	return 0
}

func modelsDir(flagDir string) (string, error) {
	if flagDir != "" {
		return filepath.Abs(flagDir)
	}
	root, err := robotapi.Root()
	if err != nil {
		return "", err
	}
	return llm.DefaultDir(root), nil
}

// cmdModelsServe runs the local model server in the foreground (installing the model if needed) and
// prints one JSON line {"base_url", "model", "reused"}; it stops what it started on SIGINT/SIGTERM.
func cmdModelsServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("models serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "", "weights cache (default $PYRUALEAN_MODELS or <repo>/models)")
	port := fs.Int("port", 0, fmt.Sprintf("port on 127.0.0.1 (0: %d, or a free one if that is busy)", llm.DefaultPort))
	threads := fs.Int("threads", 0, "CPU threads (0: all cores)")
	ctxSize := fs.Int("ctx-size", 16384, "context window in tokens")
	verbose := fs.Bool("v", false, "show llama.cpp's log")
	var name string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 1 || (name != "" && fs.NArg() > 0) {
		if err == nil {
			err = fmt.Errorf("want at most one model NAME (known: %v)", llm.Names())
		}
		fmt.Fprintf(stderr, "pyrualean models serve: %v\n", err)
		return 2
	}
	if name == "" {
		name = fs.Arg(0)
	}
	if _, err := llm.Lookup(name); err != nil {
		fmt.Fprintf(stderr, "pyrualean models serve: %v\n", err)
		return 2
	}
	if *port < 0 || *port > 65535 || *threads < 0 || *ctxSize < 256 {
		fmt.Fprintln(stderr, "pyrualean models serve: --port 0..65535, --threads >= 0, --ctx-size >= 256")
		return 2
	}
	o := llm.Options{Model: name, Port: *port, Threads: *threads, CtxSize: *ctxSize, Install: true, Progress: stderr}
	if *dir != "" {
		d, err := filepath.Abs(*dir)
		if err != nil {
			fmt.Fprintf(stderr, "pyrualean models serve: %v\n", err)
			return 2
		}
		o.Dir = d
	}
	if *verbose {
		o.Log = stderr
	}
	s, err := llm.Start(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean models serve: %v\n", err)
		return 1
	}
	b, _ := json.Marshal(map[string]any{"base_url": s.BaseURL, "model": s.Model, "reused": s.Reused, "pid": s.PID})
	fmt.Fprintln(stdout, string(b))
	if s.Reused {
		return 0
	}
	select {
	case <-ctx.Done():
	case <-s.Done():
		fmt.Fprintln(stderr, "pyrualean models serve: the server exited")
		return 1
	}
	if err := s.Stop(); err != nil {
		fmt.Fprintf(stderr, "pyrualean models serve: %v\n", err)
		return 1
	}
	return 0
}

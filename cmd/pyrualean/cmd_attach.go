package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/gateway"
)

// cmdAttach opens a live episode's kernel in the user's JupyterLab. With pyrualean's server extension
// and jupyter-collaboration on the Jupyter Server (scripts/setup.sh installs both in the venv), the
// notebook is the episode's live document: the agent's cells appear in it as they run (the server
// extension follows the kernel and writes them into the shared document). Without them it falls back
// to uploading the episode's trace and creating a session on the live kernel (a snapshot). Either way
// it prints the URL to open. The Jupyter Server must run with --gateway-url pointing at the gateway.
func cmdAttach(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	gw := fs.String("gateway", "http://127.0.0.1:8890", "the pyrualean gateway serving the episode (play --serve ADDR)")
	gwToken := fs.String("gateway-token", "", "gateway token (default $PYRUALEAN_TOKEN)")
	episode := fs.String("episode", "", "episode id (default: the only live episode)")
	kernelID := fs.String("kernel", "", "gateway kernel id to attach instead of an episode's")
	server := fs.String("server", "http://127.0.0.1:8888", "your Jupyter Server / JupyterLab, started with --gateway-url=<gateway>")
	serverToken := fs.String("server-token", "", "Jupyter Server token (default $JUPYTER_TOKEN)")
	trace := fs.String("trace", "", "notebook to upload (default: the episode's trace)")
	path := fs.String("path", "", "notebook path on the Jupyter Server (default pyrualean-episodes/<episode>.ipynb)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pyrualean attach: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *gwToken == "" {
		*gwToken = os.Getenv("PYRUALEAN_TOKEN")
	}
	if *serverToken == "" {
		*serverToken = os.Getenv("JUPYTER_TOKEN")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	name := *kernelID
	if *kernelID == "" {
		ep, err := gateway.FindEpisode(ctx, *gw, *gwToken, *episode)
		if err != nil {
			fmt.Fprintf(stderr, "pyrualean attach: %v\n", err)
			return 1
		}
		*kernelID, name = ep.KernelID, ep.ID
		if *trace == "" {
			*trace = ep.Trace
		}
		if *kernelID == "" {
			fmt.Fprintf(stderr, "pyrualean attach: episode %s lists no kernel_id\n", ep.ID)
			return 1
		}
	}
	if *path == "" {
		*path = "pyrualean-episodes/" + safeName(name) + ".ipynb"
	}
	if *episode != "" || name != *kernelID {
		live, err := gateway.AttachLive(ctx, gateway.AttachOptions{ServerURL: *server, ServerToken: *serverToken, Path: *path}, name)
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "attached %s (kernel %s) as %s, live\nopen: %s\n", name, live.KernelID, live.Path, live.URL)
			return 0
		case errors.Is(err, gateway.ErrNoLiveDocuments):
			fmt.Fprintf(stderr, "pyrualean attach: %v; uploading a snapshot of the trace instead (new agent cells will not appear in it)\n", err)
		default:
			fmt.Fprintf(stderr, "pyrualean attach: %v\n", err)
			return 1
		}
	}
	var nb []byte
	if *trace != "" {
		var err error
		if nb, err = os.ReadFile(*trace); err != nil {
			fmt.Fprintf(stderr, "pyrualean attach: reading the trace: %v\n", err)
			return 1
		}
	}
	res, err := gateway.Attach(ctx, gateway.AttachOptions{ServerURL: *server, ServerToken: *serverToken, KernelID: *kernelID, Path: *path, Notebook: nb})
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean attach: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "attached %s (kernel %s) as %s\nopen: %s\n", name, res.KernelID, res.Path, res.URL)
	return 0
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, s)
}

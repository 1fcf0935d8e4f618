package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runtimes"
)

// cmdPrompt prints the prompt the agent would read for the episode play's flags describe (prompt.txt),
// booting the robot to read its task card but asking no model. It takes play's flags.
func cmdPrompt(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return preview(ctx, "prompt", args, stdout, stderr, func(ep *agent.Episode) ([]byte, error) {
		return []byte(ep.Prompt().Text), nil
	})
}

// cmdCard prints the episode's task card (card.json, as the run folder keeps it) for play's flags.
func cmdCard(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return preview(ctx, "card", args, stdout, stderr, func(ep *agent.Episode) ([]byte, error) {
		return os.ReadFile(filepath.Join(ep.Dir(), "card.json"))
	})
}

// preview boots the episode the flags describe in a scratch run folder, prints what show returns
// and ends the episode without any action. Exit 64 for bad flags (play's), 2 when the episode cannot
// boot.
func preview(ctx context.Context, name string, args []string, stdout, stderr io.Writer, show func(*agent.Episode) ([]byte, error)) int {
	// play's whole flag set, so a play command line previews as it is; only the episode's settings
	// matter (the prompt and card do not depend on the model; the runtime only picks the default
	// prompt profile).
	fs, pf := newPlayFlagSet(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	err := pf.spec.ApplyFlags()
	switch {
	case err != nil:
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case pf.spec.Out != "":
		err = errors.New("--out: the preview's run folder is a scratch one, removed afterwards")
	}
	dir := ""
	if err == nil {
		dir, err = os.MkdirTemp("", "pyrualean-"+name+"-")
	}
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean %s: %v\n", name, err)
		return exitUsage
	}
	defer os.RemoveAll(dir)
	pf.spec.Out = filepath.Join(dir, "run")
	if p := pf.spec.Policy; p.Runtime == "" {
		// No model is asked: the runtime play would choose only picks the prompt profile.
		pf.spec.Policy.Runtime = "none"
		if runtimes.Resolve(&p) == nil {
			pf.spec.Policy.Runtime = p.Runtime
		}
	}
	pf.policy = pf.spec.Policy.Runtime
	cfg, err := pf.finish(ctx, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean %s: %v\n", name, err)
		return exitUsage
	}
	cfg.Policy.Model = "none"
	ep, err := agent.StartEpisode(ctx, cfg, agent.Host{Logger: cmdLogger(stderr, pf.verbose)})
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean %s: %v\n", name, err)
		return exitEpisodeError
	}
	out, serr := show(ep)
	if _, err := ep.Finish(context.WithoutCancel(ctx), agent.StatusInterrupted, nil); err != nil {
		fmt.Fprintf(stderr, "pyrualean %s: %v\n", name, err)
	}
	if serr != nil {
		fmt.Fprintf(stderr, "pyrualean %s: %v\n", name, serr)
		return exitFailed
	}
	stdout.Write(out)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		fmt.Fprintln(stdout)
	}
	return 0
}

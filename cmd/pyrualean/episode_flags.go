package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// episodeFlags binds a command's flags to an episode spec: every setting of spec.Settings (one home
// for each flag's name, help and default) except those the command skips. cmd (play, mcp, prompt,
// card, run, generate) names the default run folder.
type episodeFlags struct {
	cmd  string
	spec spec.Episode
	// policy names what drives a command's episodes when it is not a runtime of the table (mcp: the
	// client; run: the program given), recorded as result.json's runtime.
	policy string
}

func newEpisodeFlags(cmd string, fs *flag.FlagSet, skip ...string) *episodeFlags {
	f := &episodeFlags{cmd: cmd, spec: spec.New()}
	f.spec.Flags(fs, skip...)
	return f
}

// finish completes the spec the flags gave: the runtime chosen (runtimes.Resolve), the spec validated
// against the robot registry, and the run folder named when --out did not name one
// (runs/<time>-<robot>-<task>-<arm>). The error is one line for the user, naming the fix.
func (f *episodeFlags) finish(ctx context.Context, now time.Time) (spec.Episode, error) {
	if err := f.spec.ApplyFlags(); err != nil {
		return f.spec, err
	}
	s := f.spec
	if f.policy != "" {
		s.Policy.Runtime = f.policy
	} else if err := runtimes.Resolve(&s.Policy); err != nil {
		return s, err
	}
	if err := s.Validate(ctx, &robotapi.Registry{}); err != nil {
		return s, err
	}
	if s.Out == "" {
		task := s.Task
		if task == "" {
			task = "default"
		}
		name := fmt.Sprintf("%s-%s-%s-%s", now.UTC().Format("20060102T150405"), s.Robot, task, s.Arm)
		if f.cmd == "mcp" {
			name = fmt.Sprintf("%s-mcp-%s-%s-%s", now.Format("20060102-150405"), s.Robot, task, s.Arm)
		}
		abs, err := filepath.Abs(filepath.Join("runs", strings.ReplaceAll(name, "/", "_")))
		if err != nil {
			return s, err
		}
		s.Out = abs
	}
	return s, nil
}

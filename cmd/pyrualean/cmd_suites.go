package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pyrualean/pyrualean/robotapi"
)

// suiteRow is one line of `pyrualean suites`: a robot's suite, its task count, and whether it runs here.
type suiteRow struct {
	Robot    string   `json:"robot"`
	Suite    string   `json:"suite"`
	Tasks    int      `json:"tasks"`
	Runnable bool     `json:"runnable"`
	Missing  []string `json:"missing"`
}

// cmdSuites lists robots, suites and task counts, and for each whether it can run on this machine.
func cmdSuites(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("suites", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	robot := fs.String("robot", "", "only this robot (see `pyrualean suites`)")
	asJSON := fs.Bool("json", false, "print a JSON list of {robot, suite, tasks, runnable, missing}")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "pyrualean suites: %v (usage: pyrualean suites [--robot NAME] [--json])\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pyrualean suites: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	robots, err := robotapi.Robots(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean suites: %v\n", err)
		return 1
	}
	names := robotapi.RobotNames(robots)
	if *robot != "" && !slices.Contains(names, *robot) {
		fmt.Fprintf(stderr, "pyrualean suites: unknown robot %q (robots: %s)\n", *robot, strings.Join(names, ", "))
		return 2
	}
	// Every robot's rows come from the registry (pyrualean_robot.robots.suites): a robot's suites, or the
	// embedded robot's task families.
	rows, err := suiteRows(ctx, *robot)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean suites: %v\n", err)
		return 1
	}
	if *asJSON {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROBOT\tSUITE\tTASKS\tRUNS HERE")
	for _, r := range rows {
		status := "yes"
		if !r.Runnable {
			status = "no: needs " + strings.Join(r.Missing, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.Robot, r.Suite, r.Tasks, status)
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

// suiteRows asks pyrualean_robot.robots.suites (no simulator boot) about one robot, or ("") every one.
func suiteRows(ctx context.Context, robot string) ([]suiteRow, error) {
	root, err := robotapi.Root()
	if err != nil {
		return nil, err
	}
	args := []string{"-m", "pyrualean_robot.robots.suites", "--json"}
	if robot != "" {
		args = append(args, "--robot", robot)
	}
	cmd := exec.CommandContext(ctx, robotapi.Python(root), args...)
	cmd.WaitDelay = time.Second
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PYRUALEAN_ROOT="+root, "PYTHONDONTWRITEBYTECODE=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("pyrualean_robot.robots.suites: %s (%w)", msg, err)
		}
		return nil, fmt.Errorf("running %s: %w", robotapi.Python(root), err)
	}
	var rows []suiteRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		return nil, fmt.Errorf("pyrualean_robot.robots.suites: bad JSON: %w", err)
	}
	for i := range rows {
		if rows[i].Missing == nil {
			rows[i].Missing = []string{}
		}
	}
	return rows, nil
}

package robotapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Registry answers questions about robots from the robot package's registry, which it asks once (the
// list: names, suites, default seeds, options) and keeps. Its zero value is ready to use; it is safe
// for concurrent use. A failed listing is not kept.
type Registry struct {
	mu     sync.Mutex
	robots []RobotInfo
}

func (r *Registry) list(ctx context.Context) ([]RobotInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.robots == nil {
		robots, err := Robots(ctx)
		if err != nil {
			return nil, err
		}
		r.robots = robots
	}
	return r.robots, nil
}

// Robots lists the registered robots.
func (r *Registry) Robots(ctx context.Context) ([]RobotInfo, error) { return r.list(ctx) }

// Lookup is one robot's entry; an unknown name is an ErrBadArgument naming the known ones.
func (r *Registry) Lookup(ctx context.Context, name string) (RobotInfo, error) {
	robots, err := r.list(ctx)
	if err != nil {
		return RobotInfo{}, err
	}
	return FindRobot(robots, name)
}

// RobotForSuite is the robot a benchmark suite belongs to; an unknown suite is an ErrBadArgument naming
// the known ones.
func (r *Registry) RobotForSuite(ctx context.Context, suite string) (string, error) {
	robots, err := r.list(ctx)
	if err != nil {
		return "", err
	}
	var known []string
	for _, ri := range robots {
		if slices.Contains(ri.Suites, suite) {
			return ri.Name, nil
		}
		known = append(known, ri.Suites...)
	}
	return "", fmt.Errorf("%w: unknown suite %q (suites: %s)", ErrBadArgument, suite, strings.Join(known, ", "))
}

// CheckOptions asks the robot package whether the robot's make() takes these options with these values
// (each turned into its kind there, the one place that does it); the error names the option and the
// robot's options.
func (r *Registry) CheckOptions(ctx context.Context, robot string, opts map[string]string) error {
	if len(opts) == 0 {
		return nil
	}
	if err := checkName("robot", robot); err != nil {
		return err
	}
	args := []string{"--check-options", robot}
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		args = append(args, k+"="+opts[k])
	}
	_, err := runPython(ctx, "pyrualean_robot.robots", args...)
	var pe *PythonError
	if errors.As(err, &pe) && errors.Is(err, ErrBadArgument) {
		return fmt.Errorf("%w: %s", ErrBadArgument, strings.TrimPrefix(strings.TrimSpace(pe.Stderr), "error: "))
	}
	return err
}

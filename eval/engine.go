package eval

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Job is one episode the engine must run, with the run folder it writes.
type Job struct {
	Episode
	Dir string // absolute run folder
	// After names an episode (by id) that must end before this one starts: a replayed tools episode
	// replays the primitive calls its cells twin made.
	After string
}

// TwinDir is the run folder of the same episode in the other arm.
func (j Job) TwinDir() string {
	return strings.TrimSuffix(j.Dir, filepath.FromSlash(j.ID)) + filepath.FromSlash(j.Twin())
}

// Engine schedules a suite's jobs: it calls run once per job, concurrently as it sees fit, starting
// a job only after the job it names in After has ended, and starts no new job once ctx is done. run
// does the whole episode (retries included) and records it; the engine only decides where and when.
// Local runs jobs in this process; a cluster engine would place each call on a node.
type Engine interface {
	Name() string
	Run(ctx context.Context, jobs []Job, run func(ctx context.Context, j Job)) error
}

// Local runs jobs on Jobs workers in this process. A free worker takes the first job in plan order
// whose After has ended (or is not in this run), so a job waiting for its twin never holds a worker
// that another job could use; it waits only when every job left is waiting.
type Local struct{ Jobs int }

func (l Local) Name() string { return "local" }

func (l Local) Run(ctx context.Context, jobs []Job, run func(ctx context.Context, j Job)) error {
	inRun := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		inRun[j.ID] = true
	}
	var mu sync.Mutex
	changed := sync.NewCond(&mu) // a job ended, or ctx is done
	ended := make(map[string]bool, len(jobs))
	left := slices.Clone(jobs)
	take := func() (Job, bool) {
		mu.Lock()
		defer mu.Unlock()
		for ctx.Err() == nil && len(left) > 0 {
			for i, j := range left {
				if j.After == "" || !inRun[j.After] || ended[j.After] {
					left = slices.Delete(left, i, i+1)
					return j, true
				}
			}
			changed.Wait()
		}
		return Job{}, false
	}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		changed.Broadcast()
		mu.Unlock()
	})
	defer stop()
	var wg sync.WaitGroup
	for range max(l.Jobs, 1) {
		wg.Go(func() {
			for j, ok := take(); ok; j, ok = take() {
				run(ctx, j)
				mu.Lock()
				ended[j.ID] = true
				changed.Broadcast()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

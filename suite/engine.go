package suite

import (
	"context"
	"path/filepath"
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

// Local runs jobs on Jobs workers in this process, in plan order.
type Local struct{ Jobs int }

func (l Local) Name() string { return "local" }

func (l Local) Run(ctx context.Context, jobs []Job, run func(ctx context.Context, j Job)) error {
	done := make(map[string]chan struct{}, len(jobs))
	for _, j := range jobs {
		done[j.ID] = make(chan struct{})
	}
	queue := make(chan Job)
	var wg sync.WaitGroup
	for range max(l.Jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range queue {
				// Plan order puts a job's After first, so it is running or done by now: no deadlock.
				if ch, ok := done[j.After]; ok && j.After != "" {
					select {
					case <-ch:
					case <-ctx.Done():
					}
				}
				if ctx.Err() == nil {
					run(ctx, j)
				}
				close(done[j.ID])
			}
		}()
	}
	for _, j := range jobs {
		select {
		case queue <- j:
			continue
		case <-ctx.Done():
		}
		break
	}
	close(queue)
	wg.Wait()
	return ctx.Err()
}

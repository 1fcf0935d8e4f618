package inproc

import (
	"context"
	"log/slog"
	"sync"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/robotserver"
)

// lazyForker starts a robot-server forker at the first sealed episode (a suite of unsealed ones needs
// none), or uses the running one at sock. One that fails to start is logged once; its episodes'
// servers are exec'd.
type lazyForker struct {
	log  *slog.Logger
	sock string
	once sync.Once
	f    *robotserver.Forker
}

func (l *lazyForker) get(ctx context.Context) *robotserver.Forker {
	l.once.Do(func() {
		root, err := robotapi.Root()
		switch {
		case err == nil && l.sock != "":
			l.f, err = robotserver.DialForker(robotserver.ForkerOptions{Root: root, Logger: l.log}, l.sock)
		case err == nil:
			l.f, err = robotserver.StartForker(ctx, robotserver.ForkerOptions{Root: root, Logger: l.log})
		}
		if err != nil {
			l.log.Warn("robot servers will be exec'd, not forked", "err", err)
		}
	})
	return l.f
}

func (l *lazyForker) close() {
	l.once.Do(func() {}) // a get racing close starts nothing
	if l.f != nil {
		l.f.Close()
	}
}

// warmKernels hands out tabletop kernels from a kernel.Pool (robot package imported, model
// compiled), started at the first episode. The pool warms a replacement at each take; once every
// expected take is done it is closed, so no kernel warms for nobody (a warm-up costs a core for
// seconds, taken from the episodes still running). A take past that (a retry) launches a kernel.
type warmKernels struct {
	spec kernel.Spec
	opts kernel.LaunchOptions
	jobs int

	mu     sync.Mutex
	left   int // takes still expected
	pool   *kernel.Pool
	closed bool
}

// expect sets how many takes are coming (the episodes the runner will run).
func (w *warmKernels) expect(n int) {
	w.mu.Lock()
	w.left = n
	w.mu.Unlock()
}

func (w *warmKernels) Take(ctx context.Context) (*kernel.Kernel, error) {
	w.mu.Lock()
	if w.closed || w.left <= 0 {
		w.mu.Unlock()
		return kernel.Launch(ctx, w.spec, w.opts)
	}
	if w.pool == nil {
		p, err := kernel.NewPool(ctx, w.spec, max(1, min(w.jobs, w.left)), robotapi.WarmCode, w.opts)
		if err != nil {
			w.closed = true
			w.mu.Unlock()
			return kernel.Launch(ctx, w.spec, w.opts)
		}
		w.pool = p
	}
	p := w.pool
	w.left--
	last := w.left <= 0
	if last {
		w.closed = true
	}
	w.mu.Unlock()
	k, err := p.Take(ctx)
	if last {
		go p.Close()
	}
	return k, err
}

func (w *warmKernels) close() {
	w.mu.Lock()
	p := w.pool
	w.closed = true
	w.mu.Unlock()
	if p != nil {
		p.Close()
	}
}

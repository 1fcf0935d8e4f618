package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrPoolClosed is returned by Take after Close.
var ErrPoolClosed = errors.New("kernel: pool closed")

// Pool keeps size kernels launched and warmed (warmCode already executed, e.g. imports), so Take
// costs milliseconds. A kernel handed out is the caller's: it is never handed out again, and the
// pool starts a replacement at once.
type Pool struct {
	spec     Spec
	warmCode string
	opts     LaunchOptions

	ctx    context.Context // cancelled by Close; bounds background launches
	cancel context.CancelFunc
	ready  chan poolItem
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
}

type poolItem struct {
	k   *Kernel
	err error
}

// NewPool starts size kernels in the background and returns at once.
func NewPool(ctx context.Context, spec Spec, size int, warmCode string, opts LaunchOptions) (*Pool, error) {
	if size < 1 {
		return nil, fmt.Errorf("kernel: pool size %d < 1", size)
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &Pool{spec: spec, warmCode: warmCode, opts: opts, ctx: pctx, cancel: cancel, ready: make(chan poolItem, size)}
	for range size {
		p.refill()
	}
	return p, nil
}

// refill launches and warms one kernel in the background.
func (p *Pool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		k, err := p.launch()
		if err != nil && p.ctx.Err() != nil {
			return
		}
		p.ready <- poolItem{k, err} // capacity is size and at most size launches are in flight
	}()
}

func (p *Pool) launch() (*Kernel, error) {
	k, err := Launch(p.ctx, p.spec, p.opts)
	if err != nil {
		return nil, err
	}
	if p.warmCode != "" {
		res, err := k.Client().Execute(p.ctx, p.warmCode, ExecuteOptions{NoHistory: true})
		if err == nil && res.Status != "ok" {
			err = fmt.Errorf("kernel: pool warm-up code failed: %s: %s", res.Error.Ename, res.Error.Evalue)
		}
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			k.Shutdown(sctx)
			cancel()
			return nil, err
		}
	}
	return k, nil
}

// Ready returns how many launched kernels are waiting to be taken.
func (p *Pool) Ready() int { return len(p.ready) }

// Take returns a ready, warmed kernel, waiting for one if none is ready yet. A kernel that died
// while waiting in the pool is discarded.
func (p *Pool) Take(ctx context.Context) (*Kernel, error) {
	for {
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return nil, ErrPoolClosed
		}
		select {
		case it := <-p.ready:
			p.refill()
			if it.err != nil {
				return nil, it.err
			}
			if it.k.Err() != nil {
				continue
			}
			return it.k, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-p.ctx.Done():
			return nil, ErrPoolClosed
		}
	}
}

// Close stops launching and shuts down every kernel not taken.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	var wg sync.WaitGroup
	shut := func(it poolItem) {
		if it.k == nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			it.k.Shutdown(ctx)
		}()
	}
	// Shut what is ready while the starters finish, then what they left.
	for starting := true; starting; {
		select {
		case it := <-p.ready:
			shut(it)
		case <-done:
			starting = false
		}
	}
	for drained := false; !drained; {
		select {
		case it := <-p.ready:
			shut(it)
		default:
			drained = true
		}
	}
	wg.Wait()
	return nil
}

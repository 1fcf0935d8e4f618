package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
)

var errEOF = io.EOF

// send forwards a client's message to k unchanged (its client re-signs it), through k itself when it
// is a Forwarder.
func send(k Kernel, m *wireMsg) error {
	km := &kernel.Message{
		Channel: kernel.Channel(m.Channel), Header: m.Header, ParentHeader: m.ParentHeader, Metadata: m.Metadata,
		Content: m.Content, Buffers: m.Buffers, MsgID: m.MsgID, MsgType: m.MsgType, Session: m.Session,
		ParentMsgID: m.ParentMsgID,
	}
	if f, ok := k.(Forwarder); ok {
		return f.Forward(km.Channel, km)
	}
	return k.Client().Send(km.Channel, km)
}

// subscribe converts the kernel client's subscription; the output channel closes with it.
func subscribe(k Kernel, buffer int) (<-chan *wireMsg, func()) {
	in, cancel := k.Client().Subscribe(buffer)
	out := make(chan *wireMsg, 64)
	go func() {
		defer close(out)
		for m := range in {
			out <- fromKernelMessage(m)
		}
	}()
	return out, cancel
}

func fromKernelMessage(m *kernel.Message) *wireMsg {
	w := &wireMsg{Channel: string(m.Channel), Header: m.Header, ParentHeader: m.ParentHeader, Metadata: m.Metadata,
		Content: m.Content, Buffers: m.Buffers, MsgID: m.MsgID, MsgType: m.MsgType, Session: m.Session, ParentMsgID: m.ParentMsgID}
	if len(m.ParentHeader) > 2 {
		var p headerView
		if json.Unmarshal(m.ParentHeader, &p) == nil {
			w.ParentSession, w.ParentMsgType = p.Session, p.MsgType
		}
	}
	return w
}

// kernelSession asks k for a kernel_info reply and returns its header.session.
func kernelSession(ctx context.Context, k Kernel) (string, error) {
	req, err := kernel.NewMessage("kernel_info_request", nil)
	if err != nil {
		return "", err
	}
	r, err := k.Client().Request(ctx, kernel.Shell, req)
	if err != nil {
		return "", err
	}
	return r.Session, nil
}

// launchKernel is the default launchFunc: kernel.Launch with the client's filtered environment.
func launchKernel(ctx context.Context, spec specInfo, env map[string]string, dir string) (Kernel, error) {
	ks := kernel.Spec{Name: spec.Name, ResourceDir: spec.ResourceDir, DisplayName: spec.DisplayName, Language: spec.Language,
		InterruptMode: spec.InterruptMode, Argv: spec.Argv, Env: spec.Env, Metadata: spec.Metadata}
	k, err := kernel.Launch(ctx, ks, kernel.LaunchOptions{Env: env, Dir: dir, ReadyTimeout: 45 * time.Second})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// findSpecs is the default spec lister: the kernelspecs jupyter_client would find.
func findSpecs() ([]specInfo, error) {
	specs, err := kernel.FindSpecs()
	if err != nil {
		return nil, err
	}
	out := make([]specInfo, len(specs))
	for i, s := range specs {
		out[i] = specInfo{Name: s.Name, ResourceDir: s.ResourceDir, DisplayName: s.DisplayName, Language: s.Language,
			InterruptMode: s.InterruptMode, Argv: s.Argv, Env: s.Env, Metadata: s.Metadata}
	}
	return out, nil
}

// prespawnPool keeps kernels of the default spec started ahead of requests, refilling in the background.
type prespawnPool struct {
	spec   string
	want   int
	launch func(ctx context.Context) (Kernel, error)
	ctx    context.Context

	mu      sync.Mutex
	ready   []Kernel
	filling int
	closed  bool
}

// Prespawn starts n kernels of the default kernelspec now and keeps n ready for POST /api/kernels
// requests that need nothing special (no environment beyond KERNEL_USERNAME/KERNEL_LAUNCH_TIMEOUT).
func (s *Server) Prespawn(n int) error {
	if n <= 0 {
		return nil
	}
	specs, err := s.cfg.specs()
	if err != nil {
		return fmt.Errorf("prespawn: %w", err)
	}
	name := s.defaultSpec(specs)
	var spec specInfo
	for _, sp := range specs {
		if sp.Name == name {
			spec = sp
		}
	}
	if spec.Name == "" {
		return fmt.Errorf("prespawn: %w: %q", ErrNoSuchSpec, name)
	}
	p := &prespawnPool{spec: spec.Name, want: n, ctx: s.ctx, launch: func(ctx context.Context) (Kernel, error) {
		return s.cfg.launch(ctx, spec, nil, "")
	}}
	s.mu.Lock()
	s.pool = p
	s.mu.Unlock()
	p.refill(s.log)
	return nil
}

func (p *prespawnPool) refill(log interface{ Warn(string, ...any) }) {
	p.mu.Lock()
	need := p.want - len(p.ready) - p.filling
	if p.closed || need <= 0 {
		p.mu.Unlock()
		return
	}
	p.filling += need
	p.mu.Unlock()
	for range need {
		go func() {
			ctx, cancel := context.WithTimeout(p.ctx, 90*time.Second)
			h, err := p.launch(ctx)
			cancel()
			p.mu.Lock()
			p.filling--
			if err == nil && p.closed {
				p.mu.Unlock()
				_ = h.Shutdown(context.Background())
				return
			}
			if err == nil {
				p.ready = append(p.ready, h)
			}
			p.mu.Unlock()
			if err != nil && !errors.Is(err, context.Canceled) {
				log.Warn("prespawning a kernel failed", "err", err)
			}
		}()
	}
}

// take returns a ready kernel (nil if none is ready) and starts a replacement.
func (p *prespawnPool) take() Kernel {
	p.mu.Lock()
	var h Kernel
	for len(p.ready) > 0 && h == nil {
		h = p.ready[0]
		p.ready = p.ready[1:]
		if h.Err() != nil { // died while waiting
			h = nil
		}
	}
	p.mu.Unlock()
	p.refill(discardWarn{})
	return h
}

type discardWarn struct{}

func (discardWarn) Warn(string, ...any) {}

func (p *prespawnPool) close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range ready {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.Shutdown(context.Background())
		}()
	}
	wg.Wait()
}

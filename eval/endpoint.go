package eval

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Endpoints is an http.RoundTripper shared by every episode of a suite: at most Max requests in
// flight per endpoint (host), and when an endpoint answers 429 or 503 with Retry-After, every
// episode holds its next request to that endpoint until then, instead of each one hammering it.
// The OpenAI runtime's own retries then resend the refused request.
type Endpoints struct {
	Max  int               // per endpoint; <= 0: no limit
	Base http.RoundTripper // default http.DefaultTransport

	mu sync.Mutex
	m  map[string]*endpoint
}

type endpoint struct {
	slots chan struct{} // nil: unlimited
	mu    sync.Mutex
	until time.Time // no request before this
}

// Client returns an http.Client going through e.
func (e *Endpoints) Client() *http.Client { return &http.Client{Transport: e} }

func (e *Endpoints) get(host string) *endpoint {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]*endpoint{}
	}
	ep, ok := e.m[host]
	if !ok {
		ep = &endpoint{}
		if e.Max > 0 {
			ep.slots = make(chan struct{}, e.Max)
		}
		e.m[host] = ep
	}
	return ep
}

// RoundTrip waits for the endpoint's cool-down and a free slot, then sends the request. The slot is
// held until the response body is closed.
func (e *Endpoints) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	ep := e.get(req.URL.Host)
	if err := ep.coolDown(ctx); err != nil {
		return nil, err
	}
	release := func() {}
	if ep.slots != nil {
		select {
		case ep.slots <- struct{}{}:
			var once sync.Once
			release = func() { once.Do(func() { <-ep.slots }) }
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	base := e.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		release()
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		ep.hold(retryAfter(resp.Header.Get("Retry-After"), time.Now()))
	}
	resp.Body = &releaseBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

func (ep *endpoint) coolDown(ctx context.Context) error {
	for {
		ep.mu.Lock()
		d := time.Until(ep.until)
		ep.mu.Unlock()
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
	}
}

func (ep *endpoint) hold(d time.Duration) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if u := time.Now().Add(d); u.After(ep.until) {
		ep.until = u
	}
}

// retryAfter reads Retry-After (seconds or an HTTP date); 1 s when absent or unreadable, at most 5 min.
func retryAfter(v string, now time.Time) time.Duration {
	d := time.Second
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), 5*time.Minute)
}

type releaseBody struct {
	io.ReadCloser
	release func()
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestServeCommand(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"--token", "x", "--no-auth"}, {"--port", "-1"}, {"extra"}} {
		var stderr bytes.Buffer
		if code := cmdServe(context.Background(), args, io.Discard, &stderr); code != 2 || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("serve %v: exit %d, stderr %q (want 2 and one line)", args, code, stderr.String())
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- cmdServe(ctx, []string{"--port", "0", "--base-url", "/gw/"}, &out, io.Discard) }()
	re := regexp.MustCompile(`serving on (http://\S+)\ntoken: (\S+)`)
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m = re.FindStringSubmatch(out.String())
	}
	if m == nil {
		cancel()
		t.Fatalf("no URL and token printed: %q", out.String())
	}
	base, token := m[1], m[2]
	if !strings.HasSuffix(base, "/gw") || len(token) < 32 {
		t.Fatalf("url %q token %q", base, token)
	}
	for _, tc := range []struct {
		auth string
		want int
	}{{"", 401}, {"token " + token, 200}} {
		req, _ := http.NewRequest("GET", base+"/api/kernels", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("auth %q: %d, want %d", tc.auth, resp.StatusCode, tc.want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exit %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on cancel")
	}
}

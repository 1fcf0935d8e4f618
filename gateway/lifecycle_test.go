package gateway

import (
	"testing"
	"time"
)

// TestPrespawnAndCull: a POST takes a pre-started kernel (and the pool refills); a kernel nobody is
// connected to is culled after --cull-idle.
func TestPrespawnAndCull(t *testing.T) {
	srv, hs := startGateway(t, Config{Token: "t", CullIdle: 2 * time.Second, CullInterval: 250 * time.Millisecond})
	if err := srv.Prespawn(1); err != nil {
		t.Fatal(err)
	}
	ready := func() int {
		srv.pool.mu.Lock()
		defer srv.pool.mu.Unlock()
		return len(srv.pool.ready)
	}
	waitFor(t, 60*time.Second, "a prespawned kernel", func() bool { return ready() == 1 })

	t0 := time.Now()
	var m kernelModel
	mustStatus(t, api(t, hs, "t", "POST", "/api/kernels", map[string]any{"env": map[string]any{"KERNEL_USERNAME": "ann"}}, &m), 201, "start")
	if took := time.Since(t0); took > 5*time.Second {
		t.Errorf("start from the pool took %v", took)
	}
	checkModel(t, m, "pyrualean")
	if ready() != 0 {
		t.Fatal("the POST did not take the prespawned kernel")
	}
	waitFor(t, 60*time.Second, "the pool to refill", func() bool { return ready() == 1 })

	// Nobody connects: culled once idle for CullIdle.
	waitFor(t, 30*time.Second, "the idle kernel to be culled", func() bool {
		return api(t, hs, "t", "GET", "/api/kernels/"+m.ID, nil, nil) == 404
	})
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

package kernel

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

var testLogLevel = slog.LevelWarn

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: testLogLevel}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// launchTest starts the real `pyrualean` kernelspec and shuts it down when the test ends.
func launchTest(t testing.TB) *Kernel {
	t.Helper()
	return launchSpec(t, testSpec(t))
}

// testSpec is the real `pyrualean` kernelspec. A test that asks for it launches a kernel: heavy, so it is
// skipped under -short.
func testSpec(t testing.TB) Spec {
	t.Helper()
	nbtest.Heavy(t, "a real IPython kernel")
	spec, err := FindSpec("pyrualean")
	if err != nil {
		t.Fatalf("the pyrualean kernelspec must be installed by make setup: %v", err)
	}
	return spec
}

func launchSpec(t testing.TB, spec Spec) *Kernel {
	t.Helper()
	nbtest.Heavy(t, "a real IPython kernel")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	k, err := Launch(ctx, spec, LaunchOptions{Logger: testLogger(t), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		k.Shutdown(ctx)
	})
	return k
}

func execOK(t testing.TB, c *Client, code string) *ExecuteResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := c.Execute(ctx, code, ExecuteOptions{})
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	return r
}

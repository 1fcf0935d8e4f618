package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waitBusy returns once the kernel has started running something (execute_input on iopub).
func startedRunning(c *Client) (wait func(t *testing.T), stop func()) {
	sub, cancel := c.Subscribe(1024)
	return func(t *testing.T) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case m, ok := <-sub:
				if !ok {
					t.Fatal("client ended before the cell started")
				}
				if m.MsgType == "execute_input" {
					return
				}
			case <-deadline:
				t.Fatal("cell did not start")
			}
		}
	}, cancel
}

func TestInterruptSleep(t *testing.T) {
	for _, mode := range []string{"signal", "message"} {
		t.Run(mode, func(t *testing.T) { testInterrupt(t, mode) })
	}
}

func testInterrupt(t *testing.T, mode string) {
	spec := testSpec(t)
	spec.InterruptMode = mode
	k := launchSpec(t, spec)
	c := k.Client()
	wait, stop := startedRunning(c)
	defer stop()
	type out struct {
		r   *ExecuteResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		r, err := c.Execute(context.Background(), "import time\ntime.sleep(60)", ExecuteOptions{})
		done <- out{r, err}
	}()
	wait(t)
	time.Sleep(100 * time.Millisecond) // inside time.sleep, not before it
	start := time.Now()
	if err := k.Interrupt(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatal(o.err)
		}
		if o.r.Status != "error" || o.r.Error.Ename != "KeyboardInterrupt" {
			t.Fatalf("status %q error %+v", o.r.Status, o.r.Error)
		}
		t.Logf("interrupted after %v", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("the interrupted cell did not return within 2 s")
	}
	if r := execOK(t, c, "6*7"); r.Outputs[0].Data["text/plain"] != "42" {
		t.Fatalf("kernel not usable after interrupt: %+v", r.Outputs)
	}
}

func TestRestartKeepsClient(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	execOK(t, c, "x = 1")
	oldPid := k.Pid()
	// A cell pending at the restart fails clearly.
	wait, stop := startedRunning(c)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Execute(context.Background(), "import time; time.sleep(60)", ExecuteOptions{})
		errc <- err
	}()
	wait(t)
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := k.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrRestarted) {
		t.Fatalf("pending execute: err = %v, want ErrRestarted", err)
	}
	if k.Pid() == oldPid {
		t.Fatal("pid unchanged after restart")
	}
	// Cells sent while another restart is under way wait for the new process (or fail clearly if
	// they were already pending); none is lost in the sockets of the old one.
	restarted := make(chan error, 1)
	go func() { restarted <- k.Restart(ctx) }()
	for i := 0; ; i++ {
		r, err := c.Execute(ctx, "print('during')", ExecuteOptions{})
		if err == nil && r.Outputs[0].Text == "during\n" {
			break
		}
		if !errors.Is(err, ErrRestarted) {
			t.Fatalf("execute during restart: %v", err)
		}
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	r := execOK(t, c, "x")
	if r.Status != "error" || r.Error.Ename != "NameError" {
		t.Fatalf("after restart x should be gone: %+v", r.Error)
	}
	if r := execOK(t, c, "print('alive')"); r.Outputs[0].Text != "alive\n" {
		t.Fatalf("outputs after restart: %+v", r.Outputs)
	}
}

func TestTimeout(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	ctx := context.Background()
	r, err := c.Execute(ctx, "import time; time.sleep(30)", ExecuteOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || !r.Interrupted || r.Restarted || r.Status != "timeout" {
		t.Fatalf("interruptible cell: %+v", r)
	}
	execOK(t, c, "y = 2")
	// A cell that swallows KeyboardInterrupt is not idle after the grace period: the client reports it
	// stuck and restarts nothing; the kernel's owner does (Recover).
	code := "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass"
	r, err = c.Execute(ctx, code, ExecuteOptions{Timeout: time.Second, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || !r.Stuck || r.Restarted || r.Status != "timeout" || c.Stats().Restarts != 0 {
		t.Fatalf("stubborn cell: %+v, restarts %d", r, c.Stats().Restarts)
	}
	if err := k.Recover(ctx, r); err != nil || !r.Restarted {
		t.Fatalf("recover: %v, %+v", err, r)
	}
	if r := execOK(t, c, "y"); r.Error == nil || r.Error.Ename != "NameError" {
		t.Fatalf("kernel was not restarted: %+v", r)
	}
}

func TestDeathMidCell(t *testing.T) {
	cases := []struct {
		name, code string
		kill       bool
		want       string
	}{
		{"os._exit", "import os, time\ntime.sleep(0.2)\nos._exit(3)", false, "exited with code 3"},
		{"SIGKILL", "import time\ntime.sleep(60)", true, "SIGKILL"},
		{"segfault", "import ctypes, time\ntime.sleep(0.2)\nctypes.string_at(0)", false, "segmentation fault"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := launchTest(t)
			c := k.Client()
			wait, stop := startedRunning(c)
			defer stop()
			errc := make(chan error, 1)
			go func() {
				_, err := c.Execute(context.Background(), tc.code, ExecuteOptions{})
				errc <- err
			}()
			wait(t)
			start := time.Now()
			if tc.kill {
				syscall.Kill(k.Pid(), syscall.SIGKILL)
			}
			select {
			case err := <-errc:
				if !errors.Is(err, ErrKernelDied) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want ErrKernelDied with %q", err, tc.want)
				}
				t.Logf("detected in %v: %v", time.Since(start), err)
			case <-time.After(5 * time.Second):
				t.Fatal("death not detected")
			}
			if time.Since(start) > 3*time.Second+300*time.Millisecond { // os._exit sleeps 0.2 s first
				t.Fatalf("death detected after %v, want ≤ 3 s", time.Since(start))
			}
			<-k.Done()
			if !errors.Is(k.Err(), ErrKernelDied) {
				t.Fatalf("k.Err() = %v", k.Err())
			}
			if _, err := c.Execute(context.Background(), "1", ExecuteOptions{}); !errors.Is(err, ErrKernelDied) {
				t.Fatalf("execute on a dead kernel: %v", err)
			}
		})
	}
}

func TestInput(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cases := []struct {
		name      string
		opts      ExecuteOptions
		wantEname string
		wantOut   string
	}{
		{"stdin not allowed", ExecuteOptions{}, "StdinNotImplementedError", ""},
		{"allowed, nobody answers", ExecuteOptions{AllowStdin: true}, "EOFError", ""},
		{"answered", ExecuteOptions{AllowStdin: true, Input: func(ctx context.Context, prompt string, pw bool) (string, error) {
			return "bob:" + prompt, nil
		}}, "", "hello bob:name? \n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Execute(ctx, "print('hello', input('name? '))", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantEname != "" {
				if r.Error == nil || r.Error.Ename != tc.wantEname {
					t.Fatalf("error = %+v, want %s", r.Error, tc.wantEname)
				}
				return
			}
			if r.Status != "ok" || len(r.Outputs) == 0 || r.Outputs[len(r.Outputs)-1].Text != tc.wantOut {
				t.Fatalf("result %+v", r.Outputs)
			}
		})
	}
}

func TestThousandSequentialCells(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	execOK(t, c, "n = 0")
	start := time.Now()
	for i := range 1000 {
		r := execOK(t, c, "n += 1\nn")
		want := strconv.Itoa(i + 1)
		if len(r.Outputs) != 1 || r.Outputs[0].Data["text/plain"] != want {
			t.Fatalf("cell %d: outputs %+v", i, r.Outputs)
		}
	}
	t.Logf("1000 cells in %v", time.Since(start))
	if s := c.Stats(); s.BadSignatures+s.Malformed != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRequestRightAfterIdle sends each request as soon as the previous one's idle status arrives,
// before its execute_reply has been read, as JupyterLab and the gateway do. ipykernel 7.3 could leave
// such a request unread in its shell socket until some later message woke it (ipython/ipykernel#1554,
// fixed in 7.4): the kernel then looks idle forever.
func TestRequestRightAfterIdle(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	sub, cancel := c.Subscribe(4096)
	defer cancel()
	for i := range 300 {
		m, err := NewMessage("execute_request", map[string]any{"code": fmt.Sprintf("print(%d)", i), "silent": false,
			"store_history": true, "user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send(Shell, m); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(20 * time.Second)
		for idle := false; !idle; {
			select {
			case r := <-sub:
				idle = r.ParentMsgID == m.MsgID && r.MsgType == "status" && strings.Contains(string(r.Content), `"idle"`)
			case <-deadline:
				t.Fatalf("request %d was never run: the kernel sits idle with it unread", i)
			}
		}
	}
}

func TestParallelKernels(t *testing.T) {
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := launchTest(t)
			for j := range 5 {
				r, err := k.Client().Execute(context.Background(), fmt.Sprintf("print(%d*%d)", i, j), ExecuteOptions{})
				if err != nil {
					errs <- err
					return
				}
				if got, want := r.Outputs[0].Text, fmt.Sprintf("%d\n", i*j); got != want {
					errs <- fmt.Errorf("kernel %d cell %d: %q, want %q", i, j, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// childPids lists our child processes (from /proc).
func childPids(t *testing.T) []int {
	me := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(me) {
			kids = append(kids, pid)
		}
	}
	return kids
}

func TestShutdownLeavesNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	kidsBefore := len(childPids(t))
	fdsBefore := openFDs()
	spec := testSpec(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k, err := Launch(ctx, spec, LaunchOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// a child of the kernel in its process group must go too
	execOK(t, k.Client(), "import subprocess; p = subprocess.Popen(['sleep', '60'])")
	execOK(t, k.Client(), "print('x')")
	// and so must what a restart, an attached client, a subscription and a pool leave behind
	if err := k.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := Attach(ctx, k.ConnectionFile(), ClientOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, unsub := a.Subscribe(8)
	execOK(t, a, "print('attached')")
	unsub()
	a.Close()
	p, err := NewPool(ctx, spec, 1, "", LaunchOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	pk, err := p.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	pk.Shutdown(ctx)
	pid, connFile := k.Pid(), k.ConnectionFile()
	if err := k.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(k.Err(), ErrShutdown) {
		t.Fatalf("Err after shutdown = %v", k.Err())
	}
	if _, err := os.Stat(connFile); !os.IsNotExist(err) {
		t.Fatalf("connection file left behind: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		groupGone := syscall.Kill(-pid, 0) == syscall.ESRCH
		g := runtime.NumGoroutine()
		kids := len(childPids(t))
		fds := openFDs()
		if groupGone && g <= before && kids <= kidsBefore && fds <= fdsBefore {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("leak: process group alive %v, goroutines %d (before %d), children %d (before %d), fds %d (before %d)\n%s",
				!groupGone, g, before, kids, kidsBefore, fds, fdsBefore, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAttachedDeathByHeartbeat: a client attached by connection file has no process to wait for; it
// notices a killed kernel by its heartbeat within time_to_dead.
func TestAttachedDeathByHeartbeat(t *testing.T) {
	k := launchTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := Attach(ctx, k.ConnectionFile(), ClientOptions{Logger: testLogger(t), TimeToDead: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	execOK(t, a, "1")
	start := time.Now()
	syscall.Kill(k.Pid(), syscall.SIGKILL)
	select {
	case <-a.Done():
		t.Logf("attached client saw the death after %v: %v", time.Since(start), a.Err())
	case <-time.After(5 * time.Second):
		t.Fatal("attached client did not notice the dead kernel")
	}
	if !errors.Is(a.Err(), ErrKernelDied) {
		t.Fatalf("Err = %v", a.Err())
	}
	if _, err := a.Execute(ctx, "1", ExecuteOptions{}); !errors.Is(err, ErrKernelDied) {
		t.Fatalf("execute: %v", err)
	}
}

// openFDs counts our open file descriptors (sockets included).
func openFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

// TestLaunchRetriesTakenPorts: a kernel that cannot bind its ports (another process took one between
// our check and its bind) is started again on fresh ports. The first start of this wrapper spec fails
// exactly as ipykernel does then.
func TestLaunchRetriesTakenPorts(t *testing.T) {
	spec := testSpec(t)
	mark := filepath.Join(t.TempDir(), "failed-once")
	script := `if [ ! -e "$0" ]; then touch "$0"; echo "zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:1')" >&2; exit 1; fi; exec "$@"`
	spec.Argv = append([]string{"/bin/sh", "-c", script, mark}, spec.Argv...)
	k := launchSpec(t, spec)
	if _, err := os.Stat(mark); err != nil {
		t.Fatal("the first start did not fail as planned")
	}
	if r := execOK(t, k.Client(), "print('second start')"); r.Outputs[0].Text != "second start\n" {
		t.Fatalf("outputs %+v", r.Outputs)
	}
	// a kernel that always fails reports why
	spec.Argv = []string{"/bin/sh", "-c", "echo 'ModuleNotFoundError: No module named ipykernel' >&2; exit 1"}
	_, err := Launch(context.Background(), spec, LaunchOptions{Logger: testLogger(t)})
	if !errors.Is(err, ErrKernelDied) || !strings.Contains(err.Error(), "No module named ipykernel") || !strings.Contains(err.Error(), "code 1") {
		t.Fatalf("err = %v", err)
	}
}

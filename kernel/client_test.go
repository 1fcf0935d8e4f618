package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// TestForgedIOPubDropped connects the client's iopub SUB to a second publisher we control (a SUB
// may have several) and publishes frames with forged signatures next to correctly signed ones: only
// the signed ones are delivered, the forged ones are counted.
func TestForgedIOPubDropped(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	pub := zmq4.NewPub(context.Background())
	defer pub.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ep := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	if err := pub.Listen(ep); err != nil {
		t.Fatal(err)
	}
	c.mu.RLock()
	sub := c.socks.iopub
	c.mu.RUnlock()
	if err := sub.Dial(ep); err != nil {
		t.Fatal(err)
	}
	msgs, cancel := c.Subscribe(1024)
	defer cancel()

	forger, _ := NewSession("evil", []byte("not the key"), "")
	mk := func(text string) *Message {
		m, _ := newMessage("stream", "evil", map[string]string{"name": "stdout", "text": text})
		return m
	}
	// wait until the subscription reached our publisher: publish signed markers until one arrives
	deadline := time.Now().Add(10 * time.Second)
	for arrived := false; !arrived; {
		if time.Now().After(deadline) {
			t.Fatal("our publisher never reached the client")
		}
		pub.Send(zmq4.NewMsgFrom(c.session.Encode(mk("marker"))...))
		select {
		case m := <-msgs:
			arrived = strings.Contains(string(m.Content), "marker")
		case <-time.After(50 * time.Millisecond):
		}
	}
	before := c.Stats().BadSignatures
	const forged = 20
	for i := range forged {
		f := forger.Encode(mk(fmt.Sprintf("forged %d", i)))
		if i%2 == 1 { // a valid signature over other content
			good := c.session.Encode(mk("innocent"))
			f[2] = good[2]
			f = append(f[:0:0], f[:3]...)
			f = append(f, good[3:]...)
			f[4] = []byte(`{"msg_id":"x","msg_type":"stream","session":"evil"}`)
		}
		pub.Send(zmq4.NewMsgFrom(f...))
	}
	pub.Send(zmq4.NewMsgFrom(c.session.Encode(mk("end"))...))
	for {
		select {
		case m := <-msgs:
			if strings.Contains(string(m.Content), "forged") {
				t.Fatalf("forged message delivered: %s", m.Content)
			}
			if strings.Contains(string(m.Content), "end") {
				if got := c.Stats().BadSignatures - before; got != forged {
					t.Fatalf("bad signatures counted %d, want %d", got, forged)
				}
				// the kernel connection is unaffected
				execOK(t, c, "1")
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("end marker not delivered")
		}
	}
}

// TestSubscribeSendRequest covers the gateway's surface: a foreign client's message forwarded with
// its own header (Send), replies and iopub with unknown parents reaching subscribers, output from a
// background thread after idle, and Request on control.
func TestSubscribeSendRequest(t *testing.T) {
	k := launchTest(t)
	c := k.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, unsub := c.Subscribe(4096)
	defer unsub()

	foreign, _ := newMessage("execute_request", "browser-session", map[string]any{
		"code": "print('from the browser')", "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
	foreign.Metadata = json.RawMessage(`{"cellId":"abc","unknown":{"kept":1}}`)
	if err := c.Send(Shell, foreign); err != nil {
		t.Fatal(err)
	}
	var sawReply, sawStream bool
	for !(sawReply && sawStream) {
		select {
		case m := <-msgs:
			if m.ParentMsgID != foreign.MsgID {
				continue
			}
			var ph map[string]any
			json.Unmarshal(m.ParentHeader, &ph)
			if ph["session"] != "browser-session" {
				t.Fatalf("parent header session rewritten: %s", m.ParentHeader)
			}
			sawReply = sawReply || m.MsgType == "execute_reply"
			sawStream = sawStream || (m.MsgType == "stream" && strings.Contains(string(m.Content), "from the browser"))
		case <-ctx.Done():
			t.Fatalf("reply %v stream %v", sawReply, sawStream)
		}
	}

	// output from a thread after the cell finished still reaches subscribers
	execOK(t, c, "import threading, time\nthreading.Timer(0.3, lambda: print('late', flush=True)).start()")
	for got := false; !got; {
		select {
		case m := <-msgs:
			got = m.MsgType == "stream" && strings.Contains(string(m.Content), "late")
		case <-ctx.Done():
			t.Fatal("thread output after idle not delivered")
		}
	}

	m, _ := NewMessage("kernel_info_request", nil)
	r, err := c.Request(ctx, Control, m)
	if err != nil {
		t.Fatal(err)
	}
	if r.MsgType != "kernel_info_reply" || r.Channel != Control || r.ParentMsgID != m.MsgID {
		t.Fatalf("reply %s on %s", r.MsgType, r.Channel)
	}
	info, err := c.KernelInfo(ctx)
	if err != nil || !strings.Contains(string(info), `"language_info"`) {
		t.Fatalf("kernel info %s %v", info, err)
	}
}

// TestAttachSecondClient attaches by connection file and runs cells beside the owner's client.
func TestAttachSecondClient(t *testing.T) {
	k := launchTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := Attach(ctx, k.ConnectionFile(), ClientOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Session() == k.Client().Session() {
		t.Fatal("attached client shares the owner's session")
	}
	execOK(t, k.Client(), "shared = 5")
	if r := execOK(t, a, "shared * 2"); r.Outputs[0].Data["text/plain"] != "10" {
		t.Fatalf("attached: %+v", r.Outputs)
	}
	if r := execOK(t, a, "print(input('?'))"); r.Error == nil {
		t.Fatal("input without stdin should fail")
	}
	a.Close()
	if _, err := a.Execute(ctx, "1", ExecuteOptions{}); err == nil {
		t.Fatal("execute after Close succeeded")
	}
	execOK(t, k.Client(), "1") // the owner is unaffected
}

func TestPool(t *testing.T) {
	spec := testSpec(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := NewPool(ctx, spec, 2, "import numpy as np\nwarm = 1", LaunchOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var taken []*Kernel
	defer func() {
		for _, k := range taken {
			k.Shutdown(context.Background())
		}
	}()
	seen := map[*Kernel]bool{}
	for i := range 3 {
		start := time.Now()
		k, err := p.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("take %d: %v", i, time.Since(start))
		if seen[k] {
			t.Fatal("a kernel was handed out twice")
		}
		seen[k] = true
		taken = append(taken, k)
		if r := execOK(t, k.Client(), "warm + np.int64(1)"); r.Outputs[0].Data["text/plain"] != "np.int64(2)" {
			t.Fatalf("not warmed: %+v", r.Outputs)
		}
		execOK(t, k.Client(), "warm = 99") // dirty it; the pool must never return it
	}
}

// TestReadyByNudging takes the readiness path of kernels without iopub_welcome (ipykernel < 7.2):
// kernel_info_request is repeated until its reply and an iopub message (its busy/idle) both arrive,
// and the first cell's output is not lost.
func TestReadyByNudging(t *testing.T) {
	k := launchTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := attach(ctx, k.ConnectionFile(), ClientOptions{Logger: testLogger(t)}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if r := execOK(t, a, "print('first')"); len(r.Outputs) != 1 || r.Outputs[0].Text != "first\n" {
		t.Fatalf("first output lost: %+v", r.Outputs)
	}
}

// TestPortCollisionDetected points a client with another key at a busy kernel's ports, as happens
// when a freshly picked port is taken by another kernel before ours binds it: the client must say
// the ports reach another kernel (ErrPortCollision, which Launch answers by relaunching on fresh
// ports) well before its ready timeout, instead of timing out with no clue.
func TestPortCollisionDetected(t *testing.T) {
	k := launchTest(t)
	busy := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, err := k.Client().Execute(ctx, "import time\nfor i in range(160):\n    print(i, flush=True)\n    time.sleep(0.05)", ExecuteOptions{})
		busy <- err
	}()
	ci := k.Client().ConnectionInfo()
	ci.Key = "someone else's key"
	path, err := writeConnectionFile(ci)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	start := time.Now()
	c, err := Attach(context.Background(), path, ClientOptions{ReadyTimeout: 40 * time.Second, Logger: testLogger(t)})
	if err == nil {
		c.Close()
		t.Fatal("a client with the wrong key became ready")
	}
	if !errors.Is(err, ErrPortCollision) {
		t.Fatalf("err = %v, want ErrPortCollision", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("collision reported after %v, want it soon after the %v grace", d, portCollisionGrace)
	}
	if err := <-busy; err != nil {
		t.Fatalf("the other kernel's cell: %v", err)
	}
}

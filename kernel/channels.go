package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// sockets is one connected set of the five kernel sockets. A restart replaces the whole set (the
// kernel's new process listens on the same ports) while the Client on top stays the same.
type sockets struct {
	shell, control, stdin, iopub, hb zmq4.Socket
	wg                               sync.WaitGroup // reader goroutines
	closeOnce                        sync.Once
	closed                           chan struct{}
}

// frameSink receives every multipart message read from a socket of a set.
type frameSink func(ch Channel, frames [][]byte)

// dialSockets connects shell, control and stdin DEALERs (one identity, so the kernel routes
// input_request to the shell's owner), an iopub SUB subscribed to everything and a heartbeat DEALER
// (wire-compatible with REQ, but a missed reply cannot wedge it). zmq4 gives up dialing after 2.5 s
// by default; a starting kernel may need longer, so we retry until ctx is done.
func dialSockets(ctx context.Context, ci ConnectionInfo, identity string, sink frameSink, hbSink func([]byte)) (*sockets, error) {
	quiet := zmq4.WithLogger(log.New(io.Discard, "", 0))
	common := []zmq4.Option{quiet, zmq4.WithDialerRetry(50 * time.Millisecond), zmq4.WithDialerMaxRetries(-1),
		zmq4.WithDialerTimeout(2 * time.Second), zmq4.WithTimeout(30 * time.Second)}
	withID := append([]zmq4.Option{zmq4.WithID(zmq4.SocketIdentity(identity))}, common...)
	bg := context.Background() // socket lifetime is the set's, ended by close()
	s := &sockets{
		shell:   zmq4.NewDealer(bg, withID...),
		control: zmq4.NewDealer(bg, withID...),
		stdin:   zmq4.NewDealer(bg, withID...),
		iopub:   zmq4.NewSub(bg, common...),
		hb:      zmq4.NewDealer(bg, common...),
		closed:  make(chan struct{}),
	}
	if err := s.iopub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		s.close()
		return nil, fmt.Errorf("kernel: subscribe iopub: %w", err)
	}
	if err := s.dialAll(ctx, ci); err != nil {
		s.close()
		return nil, err
	}
	for _, r := range []struct {
		ch   Channel
		sock zmq4.Socket
	}{{Shell, s.shell}, {Control, s.control}, {Stdin, s.stdin}, {IOPub, s.iopub}} {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.read(r.sock, func(frames [][]byte) { sink(r.ch, frames) })
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.read(s.hb, func(frames [][]byte) {
			if len(frames) > 0 {
				hbSink(frames[len(frames)-1])
			}
		})
	}()
	return s, nil
}

// dialAll connects every socket of the set; the first failure is the error.
func (s *sockets) dialAll(ctx context.Context, ci ConnectionInfo) error {
	type dial struct {
		name string
		sock zmq4.Socket
		port int
	}
	dials := []dial{{"shell", s.shell, ci.ShellPort}, {"control", s.control, ci.ControlPort},
		{"stdin", s.stdin, ci.StdinPort}, {"iopub", s.iopub, ci.IOPubPort}, {"hb", s.hb, ci.HBPort}}
	errc := make(chan error, len(dials))
	for _, d := range dials {
		go func() {
			// zmq4 retries a refused connect, but not a connection reset during the ZMTP greeting, which
			// happens while a starting kernel is still binding its sockets: retry that until ctx ends.
			for {
				err := d.sock.Dial(ci.endpoint(d.port))
				if err == nil {
					errc <- nil
					return
				}
				select {
				case <-ctx.Done():
				case <-s.closed:
				case <-time.After(50 * time.Millisecond):
					continue
				}
				errc <- fmt.Errorf("kernel: dial %s %s: %w", d.name, ci.endpoint(d.port), err)
				return
			}
		}()
	}
	var firstErr error
	for range dials {
		select {
		case err := <-errc:
			if err != nil && firstErr == nil {
				firstErr = err
			}
		case <-ctx.Done():
			s.close() // stops the dial loops; they report into the buffered errc
			return fmt.Errorf("kernel: connect: %w", context.Cause(ctx))
		}
	}
	return firstErr
}

// read delivers messages until the set is closed. A read error from one connection (the kernel went
// away) is not fatal: zmq4 keeps the socket, and a restarted kernel is reached through a new set.
func (s *sockets) read(sock zmq4.Socket, deliver func([][]byte)) {
	for {
		msg, err := sock.Recv()
		select {
		case <-s.closed:
			return
		default:
		}
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return
			}
			time.Sleep(10 * time.Millisecond) // the connection is gone; do not spin
			continue
		}
		deliver(msg.Frames)
	}
}

func (s *sockets) socket(ch Channel) (zmq4.Socket, error) {
	switch ch {
	case Shell:
		return s.shell, nil
	case Control:
		return s.control, nil
	case Stdin:
		return s.stdin, nil
	}
	return nil, fmt.Errorf("kernel: cannot send on channel %q", ch)
}

func (s *sockets) close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		for _, sock := range []zmq4.Socket{s.shell, s.control, s.stdin, s.iopub, s.hb} {
			sock.Close()
		}
	})
	s.wg.Wait()
}

package gateway

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// relayHold is how far back a relay's acknowledgements are taken when it leaves.
//
// The resume rule: a reconnecting session gets every kept message after the last one the gateway knows
// its reader has surely seen; a frame written is never taken as delivered. For a client whose WebSocket
// layer is also its reader (the Go client, Python's websocket-client, in a plain recv loop or a
// WebSocketApp), the pong that answers the sequence ping after a frame says that frame was read: resume
// is at least once, and what comes twice is the tail read after the last answered ping (the last frame
// or two before a close). A relay (jupyter_server in
// gateway mode, seen by its Tornado User-Agent) answers the ping itself and then forwards the frame to
// a client that may already be gone ("message dropped" in its log): its pongs say only that the relay
// read the frame. So a relay's acknowledgements count only once they are relayHold old; a session that
// comes back through a relay gets again what it was sent in its last relayHold (at least once, nothing
// lost) and a client there may see those outputs twice. A browser answers pings in its network layer
// as well, and a page whose thread is busy while frames arrive drops those it had not read when its
// socket closes (TestReconnectBrowser: 370 of 3,000 lines after 200 ms busy): a browser's
// acknowledgements count browserHold late, so a page that comes back gets again what it was sent in its
// last browserHold, and loses nothing unless its thread stalled longer than that.
const (
	relayHold   = time.Second
	browserHold = 5 * time.Second
)

// ackHold is how late a WebSocket client's acknowledgements count: 0 for a client whose pongs come from
// its reader, relayHold for a relay (it answers pings on behalf of another reader), browserHold for a
// browser (its network layer answers them, before the page reads).
func ackHold(r *http.Request) time.Duration {
	switch ua := r.Header.Get("User-Agent"); {
	case strings.HasPrefix(ua, "Tornado/"):
		return relayHold
	case strings.HasPrefix(ua, "Mozilla/"):
		return browserHold
	}
	return 0
}

// ackTrail remembers when a client acknowledged what, so its acknowledgements can be taken hold late.
type ackTrail struct {
	hold    time.Duration
	mu      sync.Mutex
	base    uint64      // acknowledged (or where the socket started) before every kept sample
	samples []ackSample // oldest first, at most one per ackGrain
}

type ackSample struct {
	at  time.Time
	seq uint64
}

// ackGrain bounds the trail: samples closer together than this are merged (the later seq wins).
const ackGrain = 10 * time.Millisecond

func (a *ackTrail) reset(seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.base, a.samples = seq, nil
}

// record notes an acknowledgement of seq at now, folding samples older than hold into base.
func (a *ackTrail) record(now time.Time, seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.samples); n > 0 && now.Sub(a.samples[n-1].at) < ackGrain {
		a.samples[n-1].seq = max(a.samples[n-1].seq, seq)
	} else {
		a.samples = append(a.samples, ackSample{now, seq})
	}
	cut := now.Add(-a.hold)
	i := 0
	for i < len(a.samples) && !a.samples[i].at.After(cut) {
		a.base = max(a.base, a.samples[i].seq)
		i++
	}
	if i > 0 {
		a.samples = append(a.samples[:0], a.samples[i:]...)
	}
}

// asOf is the newest acknowledgement made at or before t.
func (a *ackTrail) asOf(t time.Time) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	seq := a.base
	for _, s := range a.samples {
		if s.at.After(t) {
			break
		}
		seq = max(seq, s.seq)
	}
	return seq
}

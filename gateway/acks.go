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
// WebSocketApp), the pong that answers a frame's sequence ping says that frame was read: resume is
// exactly once after a clean close, at least once after an abrupt one. A relay (jupyter_server in
// gateway mode, seen by its Tornado User-Agent) answers the ping itself and then forwards the frame to
// a client that may already be gone ("message dropped" in its log): its pongs say only that the relay
// read the frame. So a relay's acknowledgements count only once they are relayHold old; a session that
// comes back through a relay gets again what it was sent in its last relayHold (at least once, nothing
// lost) and a client there may see those outputs twice. Browsers answer pings in their network layer
// too; JupyterLab straight on the gateway is not treated as a relay (see docs/architecture.md).
const relayHold = time.Second

// isRelay says whether a WebSocket client answers pings on behalf of another reader.
func isRelay(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("User-Agent"), "Tornado/")
}

// ackTrail remembers when a relay acknowledged what, so its acknowledgements can be taken relayHold late.
type ackTrail struct {
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

// record notes an acknowledgement of seq at now, folding samples older than relayHold into base.
func (a *ackTrail) record(now time.Time, seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.samples); n > 0 && now.Sub(a.samples[n-1].at) < ackGrain {
		a.samples[n-1].seq = max(a.samples[n-1].seq, seq)
	} else {
		a.samples = append(a.samples, ackSample{now, seq})
	}
	cut := now.Add(-relayHold)
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

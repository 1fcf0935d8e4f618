package gateway

// backlog keeps the messages a kernel sent towards its sockets that some client may still need, each
// with a sequence number and the client session it was meant for ("" = every client: IOPub). A client
// that reconnects with the same session_id gets every kept message after the last one it acknowledged
// (ws.go). Bounded by count and bytes; the oldest go first. (Not notebook replay, which re-executes
// a trace, nor the replay runtime.)
type backlog struct {
	maxCount, maxBytes int

	entries []backlogEntry // oldest first
	bytes   int
	nextSeq uint64
}

type backlogEntry struct {
	seq    uint64
	target string // client session id, "" for all
	msg    *outMsg
}

func newBacklog(maxCount, maxBytes int) *backlog {
	if maxCount <= 0 {
		maxCount = 1
	}
	return &backlog{maxCount: maxCount, maxBytes: maxBytes, nextSeq: 1}
}

// add records a message and returns its sequence number.
func (r *backlog) add(target string, m *outMsg) uint64 {
	seq := r.nextSeq
	r.nextSeq++
	r.entries = append(r.entries, backlogEntry{seq: seq, target: target, msg: m})
	r.bytes += m.size
	for len(r.entries) > r.maxCount || (r.maxBytes > 0 && r.bytes > r.maxBytes && len(r.entries) > 1) {
		r.bytes -= r.entries[0].msg.size
		r.entries[0] = backlogEntry{}
		r.entries = r.entries[1:]
	}
	// Re-slice into a fresh array now and then so the dropped prefix can be collected.
	if cap(r.entries) > 4*r.maxCount && len(r.entries) < cap(r.entries)/2 {
		r.entries = append([]backlogEntry(nil), r.entries...)
	}
	return seq
}

// since returns the messages for session after seq, and whether some were already dropped (a gap).
func (r *backlog) since(session string, seq uint64) (msgs []backlogEntry, gap bool) {
	if len(r.entries) > 0 && r.entries[0].seq > seq+1 {
		gap = true
	}
	for _, e := range r.entries {
		if e.seq > seq && (e.target == "" || e.target == session) {
			msgs = append(msgs, e)
		}
	}
	return msgs, gap
}

// dropThrough forgets every message up to and including seq (all readers have them).
func (r *backlog) dropThrough(seq uint64) {
	i := 0
	for i < len(r.entries) && r.entries[i].seq <= seq {
		r.bytes -= r.entries[i].msg.size
		r.entries[i] = backlogEntry{}
		i++
	}
	if i > 0 {
		r.entries = append(r.entries[:0:0], r.entries[i:]...)
	}
}

// last is the sequence number of the newest message (0 if none yet).
func (r *backlog) last() uint64 { return r.nextSeq - 1 }

package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/pyrualean/pyrualean/notebooks"
)

// OutputLimits bound what one cell's outputs keep, so that a flood costs memory and trace space in
// proportion to the limits, not to the output. Each limit keeps the beginning and the end: its first
// half fills as outputs come, its second half holds the latest; what falls between is dropped,
// counted (OutputOmission) and marked where it was ("... [N bytes omitted] ..."). Zero means the
// default, a negative value no limit. Memory is the limits plus the messages in flight: one iopub
// message is read whole (a single 150 MB print is one 150 MB message while it is decoded).
type OutputLimits struct {
	// StreamBytes bounds stream text (stdout and stderr together), in bytes.
	StreamBytes int
	// RichBytes bounds display_data, execute_result and error outputs by the size of their message
	// content. One output larger than half of it is replaced by a marker output of the same type.
	RichBytes int
	// Outputs bounds the number of outputs.
	Outputs int
}

// Defaults for OutputLimits: far more than a model reads (the feedback keeps 8,000 characters), enough
// for a person reading the trace, and a flood stays a few megabytes.
const (
	DefaultStreamBytes = 2 << 20
	DefaultRichBytes   = 16 << 20
	DefaultOutputs     = 1000
)

// OutputOmission says what OutputLimits dropped from a cell's outputs; each drop is also marked in
// the outputs where it happened.
type OutputOmission struct {
	StreamBytes    int64 `json:"stream_bytes,omitempty"`    // stream text dropped
	Outputs        int   `json:"outputs,omitempty"`         // outputs dropped whole or replaced by a marker
	RichBytes      int64 `json:"rich_bytes,omitempty"`      // message bytes of the rich outputs among them
	DisplayUpdates int   `json:"display_updates,omitempty"` // updates for other cells' displays dropped or replaced by a marker
}

// Any says whether anything was omitted.
func (o OutputOmission) Any() bool { return o != OutputOmission{} }

// OutputBuilder assembles one cell's IOPub messages into nbformat outputs, as nbclient and JupyterLab
// do: consecutive streams of one name merge, clear_output(wait=True) waits for the next output,
// update_display_data replaces the data of every output with its display_id (as does a display_data
// or execute_result carrying one), transient is dropped, and Final applies \b and \r. Numbers in data
// and metadata stay exact (json.Number). Time and memory are linear in the output and bounded by the
// limits: stream text is never re-copied as it grows.
//
// Execute uses one per cell; a caller that follows a cell through Subscribe (a person's cell run from
// JupyterLab) feeds it that cell's iopub messages and calls Final at its status idle. Not safe for
// concurrent use.
type OutputBuilder struct {
	text, rich, count window
	first, last       *outNode
	seq               uint64
	textQ, richQ      nodeQueue // outputs outside the heads, oldest first: what a limit drops next
	displays          map[string]*display
	foreign           []notebooks.Output // latest update per display id this cell does not show
	foreignCost       []int
	foreignAt         map[string]int
	foreignBytes      int
	clearPending      bool
	omitted           OutputOmission
	pool              [][]byte // spare text chunks
}

// NewOutputBuilder returns an empty builder bounded by lim.
func NewOutputBuilder(lim OutputLimits) *OutputBuilder {
	b := &OutputBuilder{
		text: newWindow(lim.StreamBytes, DefaultStreamBytes), rich: newWindow(lim.RichBytes, DefaultRichBytes),
		count: newWindow(lim.Outputs, DefaultOutputs), displays: map[string]*display{}, foreignAt: map[string]int{},
	}
	return b
}

// window is one limit: a head that fills once, a tail whose oldest part is dropped.
type window struct {
	headCap, tailCap, head, tail int
	open                         bool // the head still takes what comes
}

func newWindow(limit, def int) window {
	switch {
	case limit == 0:
		limit = def
	case limit < 0:
		return window{headCap: math.MaxInt / 4, tailCap: math.MaxInt / 4, open: true}
	}
	return window{headCap: limit / 2, tailCap: limit - limit/2, open: true}
}

// take puts n into the head if it fits; once something does not, the head is closed for good.
func (w *window) take(n int) bool {
	if w.open && n <= w.headCap-w.head {
		w.head += n
		return true
	}
	w.open = false
	return false
}

type nodeKind uint8

const (
	streamNode nodeKind = iota
	richNode
	gapNode // what limits dropped between its neighbours
)

// outNode is one output in the cell's list.
type outNode struct {
	prev, next *outNode
	seq        uint64
	kind       nodeKind
	pinned     bool // in the heads: never dropped
	queued     bool // in textQ or richQ
	// stream: head (in the text head) + marker for cut + tail (in the text tail)
	name string
	head []byte
	tail chunkText
	cut  int
	// rich: Data and Metadata live in displays when out.DisplayID is set
	out  notebooks.Output
	cost int
	// gap
	gap gapInfo
}

// display is the data shared by every output of this cell with one display id: a display_data or
// execute_result with the id and every update_display_data for it replace it for all of them.
type display struct {
	data           notebooks.MimeBundle
	meta           map[string]any
	cost           int
	pinned, inTail int // this cell's outputs showing it, by where they are counted
}

// gapInfo is what was dropped at one place.
type gapInfo struct {
	bytes   int
	outputs int
	name    string   // the stream the first dropped text belonged to
	mimes   []string // kinds of rich outputs dropped (a few)
}

// Add applies one IOPub message of the cell; messages that carry no output are ignored. A malformed
// output is an error wrapping ErrMalformed and changes nothing, except that a stream message may leave
// the text before its fault.
func (b *OutputBuilder) Add(m *Message) error {
	_, err := b.add(m, false)
	return err
}

// AddLive is Add that also returns the output as a live view shows it on arrival: a stream chunk as
// its own stream output, an update_display_data as a display_data carrying DisplayID; nil for a
// message without one. The live output is whole (the limits bound what the builder keeps).
func (b *OutputBuilder) AddLive(m *Message) (*notebooks.Output, error) {
	return b.add(m, true)
}

func (b *OutputBuilder) add(m *Message, live bool) (*notebooks.Output, error) {
	switch m.MsgType {
	case "clear_output":
		var c struct{ Wait bool }
		_ = json.Unmarshal(m.Content, &c)
		b.clearPending = c.Wait
		if !c.Wait {
			b.reset()
		}
		return nil, nil
	case "stream", "display_data", "update_display_data", "execute_result", "error":
	default:
		return nil, nil
	}
	f, err := objectFields(m.Content)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.MsgType, err)
	}
	var o *notebooks.Output
	if live && m.MsgType != "stream" {
		lo, err := outputFromFields(m.MsgType, f)
		if err != nil {
			return nil, err
		}
		o = &lo
	}
	if m.MsgType == "update_display_data" {
		return o, b.updateDisplay(len(m.Content), f, o)
	}
	if b.clearPending {
		b.reset()
	}
	if m.MsgType == "stream" {
		return b.addStream(f, live)
	}
	return o, b.addRich(m.MsgType, len(m.Content), f, o)
}

// reset empties the outputs (clear_output). Omissions go with them; updates for other cells stay.
func (b *OutputBuilder) reset() {
	for n := b.first; n != nil; n = n.next {
		n.tail.trimFront(n.tail.len(), &b.pool)
	}
	b.first, b.last, b.clearPending = nil, nil, false
	b.textQ, b.richQ = nodeQueue{}, nodeQueue{}
	for _, w := range []*window{&b.text, &b.rich, &b.count} {
		w.head, w.tail, w.open = 0, 0, true
	}
	clear(b.displays)
	b.omitted = OutputOmission{DisplayUpdates: b.omitted.DisplayUpdates}
}

// addStream appends a stream message's text to the last output if it is the same stream.
func (b *OutputBuilder) addStream(f map[string][]byte, live bool) (*notebooks.Output, error) {
	name, err := stringField(f, "name")
	if err != nil {
		return nil, err
	}
	n := b.last
	if n == nil || n.kind != streamNode || n.name != name {
		n = &outNode{kind: streamNode, name: name}
		n.pinned = b.text.open && b.text.head < b.text.headCap && b.count.take(1)
		b.link(n)
	}
	var lt strings.Builder
	if raw, ok := f["text"]; ok && len(raw) > 0 && raw[0] == '"' {
		err = eachStringPart(raw, func(p []byte) {
			if live {
				lt.Write(p)
			}
			b.appendText(n, p)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("stream text: %w", err)
	}
	if !live {
		return nil, nil
	}
	return &notebooks.Output{OutputType: notebooks.OutputStream, Name: name, Text: lt.String()}, nil
}

// appendText adds text to a stream output: into the text head while it has room (cut between runes),
// then into the tail, dropping the tail's oldest text past its limit.
func (b *OutputBuilder) appendText(n *outNode, p []byte) {
	if n.pinned && b.text.open {
		k := runeCut(p, b.text.headCap-b.text.head)
		n.head = append(n.head, p[:k]...)
		b.text.head += k
		if k == len(p) {
			return
		}
		b.text.open = false
		p = p[k:]
	}
	for len(p) > 0 { // a chunk at a time, so a huge message never sits in the tail whole
		k := min(len(p), textChunk)
		n.tail.write(p[:k], &b.pool)
		b.text.tail += k
		p = p[k:]
		if !n.queued {
			n.queued = true
			b.textQ.push(n)
		}
		b.dropText()
	}
}

// dropText drops the oldest tail text while the tail is over its limit.
func (b *OutputBuilder) dropText() {
	for b.text.tail > b.text.tailCap && b.textQ.len() > 0 {
		n := b.textQ.at(0)
		d := n.tail.trimFront(b.text.tail-b.text.tailCap, &b.pool)
		b.text.tail -= d
		n.cut += d
		b.omitted.StreamBytes += int64(d)
		if n.tail.len() > 0 {
			continue
		}
		if n == b.last && !n.pinned {
			break // it stays queued, so that a limit can still drop it once it is not the last
		}
		b.textQ.remove(0)
		n.queued = false
		if !n.pinned {
			b.drop(n)
		}
	}
}

// link appends n to the list; an output outside the heads joins its queue and may push older ones out.
func (b *OutputBuilder) link(n *outNode) {
	b.seq++
	n.seq = b.seq
	n.prev = b.last
	if b.last != nil {
		b.last.next = n
	} else {
		b.first = n
	}
	b.last = n
	if n.pinned {
		return
	}
	b.count.tail++
	n.queued = true
	if n.kind == streamNode {
		b.textQ.push(n)
	} else {
		b.richQ.push(n)
	}
	b.dropOldest()
}

// dropOldest drops the oldest outputs outside the heads while there are too many.
func (b *OutputBuilder) dropOldest() {
	for b.count.tail > b.count.tailCap {
		ti := 0
		if ti < b.textQ.len() && b.textQ.at(ti).pinned {
			ti++ // the stream the text head ended in
		}
		var n *outNode
		if ti < b.textQ.len() {
			n = b.textQ.at(ti)
		}
		if b.richQ.len() > 0 && (n == nil || b.richQ.at(0).seq < n.seq) {
			n = b.richQ.at(0)
			b.richQ.remove(0)
		} else if n != nil && n != b.last {
			b.textQ.remove(ti)
		} else {
			return
		}
		n.queued = false
		b.drop(n)
	}
}

// drop removes an output outside the heads and leaves a gap that says what it held; gaps next to each
// other merge, so there are never more gaps than outputs kept.
func (b *OutputBuilder) drop(n *outNode) {
	g := gapInfo{outputs: 1}
	switch n.kind {
	case streamNode:
		rest := n.tail.trimFront(n.tail.len(), &b.pool)
		b.text.tail -= rest
		b.omitted.StreamBytes += int64(rest)
		g.bytes, g.name = n.cut+rest, n.name
	case richNode:
		b.rich.tail -= b.costOf(n)
		b.omitted.RichBytes += int64(b.costOf(n))
		if d := b.displays[n.out.DisplayID]; n.out.DisplayID != "" && d != nil {
			d.inTail--
		}
		g.mimes = mimeKinds(n.out)
	}
	b.count.tail--
	b.omitted.Outputs++
	*n = outNode{prev: n.prev, next: n.next, seq: n.seq, kind: gapNode, gap: g}
	if p := n.prev; p != nil && p.kind == gapNode {
		p.gap.merge(n.gap)
		b.unlink(n)
		n = p
	}
	if nx := n.next; nx != nil && nx.kind == gapNode {
		n.gap.merge(nx.gap)
		b.unlink(nx)
	}
}

func (b *OutputBuilder) unlink(n *outNode) {
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		b.first = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		b.last = n.prev
	}
}

func (g *gapInfo) merge(o gapInfo) {
	g.bytes += o.bytes
	g.outputs += o.outputs
	if g.name == "" {
		g.name = o.name
	}
	for _, m := range o.mimes {
		if len(g.mimes) < 3 && !slices.Contains(g.mimes, m) {
			g.mimes = append(g.mimes, m)
		}
	}
}

func (b *OutputBuilder) costOf(n *outNode) int {
	if d := b.displays[n.out.DisplayID]; n.out.DisplayID != "" && d != nil {
		return d.cost
	}
	return n.cost
}

// Omitted says what the limits dropped from the outputs Final returns.
func (b *OutputBuilder) Omitted() OutputOmission { return b.omitted }

// DisplayUpdates returns the latest update_display_data for each display id this cell did not show
// (displays of earlier cells), as display_data outputs carrying DisplayID.
func (b *OutputBuilder) DisplayUpdates() []notebooks.Output { return slices.Clone(b.foreign) }

// Final returns the cell's outputs: gaps become markers in the stream text, consecutive streams of
// one name are one output, and \b and \r are applied. It may be called again after more Adds.
func (b *OutputBuilder) Final() []notebooks.Output {
	outs := []notebooks.Output{}
	var run []string // stream text of the output being assembled
	var runName string
	flush := func() {
		if run != nil {
			outs = append(outs, notebooks.Output{OutputType: notebooks.OutputStream, Name: runName, Text: applyOverwrites(strings.Join(run, ""))})
			run = nil
		}
	}
	for n := b.first; n != nil; n = n.next {
		var name, text string
		switch n.kind {
		case streamNode:
			name, text = n.name, n.text()
		case gapNode:
			name, text = b.gapName(n), n.gap.marker()
		default:
			flush()
			o := n.out
			if d := b.displays[o.DisplayID]; o.DisplayID != "" && d != nil {
				o.Data, o.Metadata = d.data, d.meta
			}
			outs = append(outs, o)
			continue
		}
		if run != nil && name != runName {
			flush()
		}
		run, runName = append(run, text), name
	}
	flush()
	return outs
}

// text is a stream output's text with a marker where its middle was dropped.
func (n *outNode) text() string {
	var s strings.Builder
	s.Grow(len(n.head) + n.tail.len() + 64)
	s.Write(n.head)
	if n.cut > 0 {
		s.WriteString(omittedMarker(n.cut, 0, nil))
	}
	n.tail.appendTo(&s)
	return s.String()
}

// gapName is the stream a gap's marker is written to: the one whose text was dropped, else a
// neighbour's, so the marker joins the text around it.
func (b *OutputBuilder) gapName(n *outNode) string {
	switch {
	case n.gap.name != "":
		return n.gap.name
	case n.prev != nil && n.prev.kind == streamNode:
		return n.prev.name
	case n.next != nil && n.next.kind == streamNode:
		return n.next.name
	}
	return "stdout"
}

func (g gapInfo) marker() string { return omittedMarker(g.bytes, g.outputs, g.mimes) }

// omittedMarker is the line that stands where outputs were dropped.
func omittedMarker(nbytes, outputs int, mimes []string) string {
	var what []string
	if nbytes > 0 {
		what = append(what, fmt.Sprintf("%d bytes", nbytes))
	}
	if outputs > 0 {
		o := fmt.Sprintf("%d outputs", outputs)
		if outputs == 1 {
			o = "1 output"
		}
		if len(mimes) > 0 {
			o += " (" + strings.Join(mimes, ", ") + ")"
		}
		what = append(what, o)
	}
	return "\n... [" + strings.Join(what, " and ") + " omitted] ...\n"
}

// mimeKinds names what a rich output held, for a marker.
func mimeKinds(o notebooks.Output) []string {
	if o.OutputType == notebooks.OutputError {
		return []string{"error"}
	}
	var ks []string
	for k := range o.Data {
		if k != "text/plain" || len(o.Data) == 1 {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks[:min(len(ks), 3)]
}

// nodeQueue is a FIFO of outputs outside the heads.
type nodeQueue struct {
	q   []*outNode
	off int
}

func (q *nodeQueue) len() int          { return len(q.q) - q.off }
func (q *nodeQueue) at(i int) *outNode { return q.q[q.off+i] }
func (q *nodeQueue) push(n *outNode)   { q.q = append(q.q, n) }
func (q *nodeQueue) remove(i int) {
	copy(q.q[q.off+1:q.off+i+1], q.q[q.off:q.off+i])
	q.q[q.off] = nil
	q.off++
	if q.off > 64 && q.off*2 > len(q.q) {
		q.q = append(q.q[:0], q.q[q.off:]...)
		q.off = 0
	}
}

// decodeTree decodes JSON into generic values with json.Number leaves, so numbers survive unchanged.
func decodeTree(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

package kernel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pyrualean/pyrualean/notebooks"
)

// addRich adds a display_data, execute_result or error output. cost is its message content's size;
// decoded is the output already decoded for a live view, if any.
func (b *OutputBuilder) addRich(msgType string, cost int, f map[string][]byte, decoded *notebooks.Output) error {
	var o notebooks.Output
	switch {
	case cost > b.rich.tailCap: // could never be kept: a marker takes its place
		b.omitted.Outputs++
		b.omitted.RichBytes += int64(cost)
		o, cost = b.richMarker(msgType, cost, f), 0
	case decoded != nil:
		o = *decoded
	default:
		var err error
		if o, err = outputFromFields(msgType, f); err != nil {
			return err
		}
	}
	n := &outNode{kind: richNode, out: o, cost: cost}
	if o.DisplayID == "" || o.OutputType == notebooks.OutputError {
		n.out.DisplayID = ""
		if n.pinned = b.pinRich(cost); !n.pinned {
			b.rich.tail += cost
		}
	} else {
		d := b.displays[o.DisplayID]
		if d == nil {
			d = &display{}
			b.displays[o.DisplayID] = d
		}
		n.pinned = b.setDisplay(d, o.Data, o.Metadata, cost, true)
		n.out.Data, n.out.Metadata, n.cost = nil, nil, 0
	}
	b.link(n)
	b.dropRich()
	return nil
}

// pinRich puts a new rich output of the given cost in the heads if both have room.
func (b *OutputBuilder) pinRich(cost int) bool {
	if !b.count.take(1) {
		return false
	}
	if b.rich.take(cost) {
		return true
	}
	b.count.head--
	return false
}

// setDisplay gives every output of d (and a new one, when adding) data of the given cost, as nbclient
// does for a display id shown again or updated. Data the limits cannot hold for all of them becomes
// a marker for all of them. It returns whether the new output is in the heads.
func (b *OutputBuilder) setDisplay(d *display, data notebooks.MimeBundle, meta map[string]any, cost int, adding bool) bool {
	tails := d.inTail
	if adding {
		tails++ // at worst the new one is outside the heads
	}
	if b.rich.head+d.pinned*(cost-d.cost) > b.rich.headCap || tails*cost > b.rich.tailCap {
		b.omitted.Outputs++
		b.omitted.RichBytes += int64(cost)
		data, meta, cost = markerBundle(mimesOf(data), cost), map[string]any{}, 0
	}
	b.rich.head += d.pinned * (cost - d.cost)
	b.rich.tail += d.inTail * (cost - d.cost)
	d.data, d.meta, d.cost = data, meta, cost
	if !adding {
		return false
	}
	if b.pinRich(cost) {
		d.pinned++
		return true
	}
	b.rich.tail += cost
	d.inTail++
	return false
}

// dropRich drops the oldest rich outputs outside the heads while they are over the limit (never the
// newest, which fits alone).
func (b *OutputBuilder) dropRich() {
	for b.rich.tail > b.rich.tailCap && b.richQ.len() > 1 {
		n := b.richQ.at(0)
		b.richQ.remove(0)
		n.queued = false
		b.drop(n)
	}
}

// updateDisplay applies update_display_data: to this cell's outputs with its display id, or else it is
// kept (the latest per id) for the caller to apply to earlier cells.
func (b *OutputBuilder) updateDisplay(cost int, f map[string][]byte, decoded *notebooks.Output) error {
	id := transientDisplayID(f)
	if id == "" {
		return fmt.Errorf("%w: update_display_data without a display_id", ErrMalformed)
	}
	var o notebooks.Output
	big := cost > b.rich.tailCap // too large to keep anywhere: a marker takes its place
	switch {
	case big:
		o = b.richMarker("update_display_data", cost, f)
	case decoded != nil:
		o = *decoded
	default:
		var err error
		if o, err = outputFromFields("update_display_data", f); err != nil {
			return err
		}
	}
	if d := b.displays[id]; d != nil && d.pinned+d.inTail > 0 {
		if big {
			b.omitted.Outputs++
			b.omitted.RichBytes += int64(cost)
			cost = 0
		}
		b.setDisplay(d, o.Data, o.Metadata, cost, false)
		b.dropRich()
		return nil
	}
	if big {
		b.omitted.DisplayUpdates++
		cost = 0
	}
	b.foreignUpdate(id, o, cost)
	return nil
}

// foreignUpdate keeps the latest update for a display this cell does not show; together they hold at
// most RichBytes.
func (b *OutputBuilder) foreignUpdate(id string, o notebooks.Output, cost int) {
	at, seen := b.foreignAt[id]
	old := 0
	if seen {
		old = b.foreignCost[at]
	}
	if b.foreignBytes-old+cost > b.rich.headCap+b.rich.tailCap {
		b.omitted.DisplayUpdates++
		o.Data, o.Metadata, cost = markerBundle(mimesOf(o.Data), cost), map[string]any{}, 0
	}
	o.OutputType, o.ExecutionCount, o.DisplayID = notebooks.OutputDisplayData, nil, id
	b.foreignBytes += cost - old
	if seen {
		b.foreign[at], b.foreignCost[at] = o, cost
		return
	}
	b.foreignAt[id] = len(b.foreign)
	b.foreign = append(b.foreign, o)
	b.foreignCost = append(b.foreignCost, cost)
}

// richMarker stands in for an output too large to keep: same type, display id and execution count,
// and a line saying what it was. An error keeps its name and the start of its value, so the cell
// still reads as raised.
func (b *OutputBuilder) richMarker(msgType string, cost int, f map[string][]byte) notebooks.Output {
	if msgType == "error" {
		ename, _ := stringHead(f["ename"], 200)
		evalue, _ := stringHead(f["evalue"], 2000)
		line := fmt.Sprintf("[error output omitted: %d bytes, over the cell's output limit]", cost)
		return notebooks.Output{OutputType: notebooks.OutputError, Ename: ename, Evalue: evalue + "\n" + line, Traceback: []string{line}}
	}
	var mimes []string
	if df, err := objectFields(f["data"]); err == nil {
		for k := range df {
			mimes = append(mimes, k)
		}
	}
	o := notebooks.Output{OutputType: notebooks.OutputDisplayData, Data: markerBundle(mimes, cost), Metadata: map[string]any{},
		DisplayID: transientDisplayID(f)}
	if msgType == "execute_result" {
		o.OutputType = notebooks.OutputExecuteResult
		o.ExecutionCount = executionCount(f)
	}
	return o
}

func markerBundle(mimes []string, cost int) notebooks.MimeBundle {
	slices.Sort(mimes)
	what := "output"
	if len(mimes) > 0 {
		what = strings.Join(mimes[:min(len(mimes), 4)], ", ") + " output"
	}
	return notebooks.MimeBundle{"text/plain": fmt.Sprintf("[%s omitted: %d bytes, over the cell's output limit]", what, cost)}
}

func mimesOf(data notebooks.MimeBundle) []string {
	var ks []string
	for k := range data {
		ks = append(ks, k)
	}
	return ks
}

// stringHead decodes at most about n bytes of a raw JSON string (whole runes), however long it is.
func stringHead(raw []byte, n int) (string, error) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", nil
	}
	var s strings.Builder
	err := eachStringPart(raw, func(p []byte) {
		if room := n - s.Len(); room > 0 {
			s.Write(p[:runeCut(p, room)])
		}
	})
	return s.String(), err
}

// messageOutput converts one iopub message to an output; ok is false for messages that are not outputs.
func messageOutput(m *Message) (o notebooks.Output, ok bool, err error) {
	switch m.MsgType {
	case "stream", "display_data", "update_display_data", "execute_result", "error":
	default:
		return o, false, nil
	}
	f, err := objectFields(m.Content)
	if err != nil {
		return o, false, fmt.Errorf("%s: %w", m.MsgType, err)
	}
	o, err = outputFromFields(m.MsgType, f)
	return o, err == nil, err
}

// outputFromFields decodes an output message's content fields; an update_display_data becomes a
// display_data carrying its DisplayID.
func outputFromFields(msgType string, f map[string][]byte) (o notebooks.Output, err error) {
	switch msgType {
	case "stream":
		o.OutputType = notebooks.OutputStream
		if o.Name, err = stringField(f, "name"); err == nil {
			o.Text, err = stringField(f, "text")
		}
		return o, err
	case "error":
		o.OutputType = notebooks.OutputError
		if o.Ename, err = stringField(f, "ename"); err == nil {
			o.Evalue, err = stringField(f, "evalue")
		}
		o.Traceback = []string{}
		if raw, ok := f["traceback"]; ok && err == nil {
			if e := json.Unmarshal(raw, &o.Traceback); e != nil || o.Traceback == nil {
				o.Traceback = []string{}
			}
		}
		return o, err
	}
	o = notebooks.Output{OutputType: notebooks.OutputDisplayData, Data: notebooks.MimeBundle{}, Metadata: map[string]any{},
		DisplayID: transientDisplayID(f)}
	if raw, ok := f["data"]; ok {
		df, err := objectFields(raw)
		if err != nil {
			return o, fmt.Errorf("%s data: %w", msgType, err)
		}
		for mime, v := range df {
			if o.Data[mime], err = jsonValue(v); err != nil {
				return o, fmt.Errorf("%s data %s: %w", msgType, mime, err)
			}
		}
	}
	if raw, ok := f["metadata"]; ok {
		if err := decodeTree(raw, &o.Metadata); err != nil {
			return o, fmt.Errorf("%w: %s metadata: %v", ErrMalformed, msgType, err)
		}
		if o.Metadata == nil {
			o.Metadata = map[string]any{}
		}
	}
	if msgType == "execute_result" {
		o.OutputType = notebooks.OutputExecuteResult
		o.ExecutionCount = executionCount(f)
	}
	return o, nil
}

// stringField decodes a string member; a missing or non-string member reads as "".
func stringField(f map[string][]byte, k string) (string, error) {
	if raw, ok := f[k]; ok && len(raw) > 0 && raw[0] == '"' {
		return jsonString(raw)
	}
	return "", nil
}

func transientDisplayID(f map[string][]byte) string {
	var t struct {
		DisplayID string `json:"display_id"`
	}
	if raw, ok := f["transient"]; ok {
		_ = json.Unmarshal(raw, &t)
	}
	return t.DisplayID
}

func executionCount(f map[string][]byte) *int {
	var n *int
	if raw, ok := f["execution_count"]; ok && json.Unmarshal(raw, &n) == nil {
		return n
	}
	return nil
}

package gateway

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"
)

func sampleMsg(buffers ...[]byte) *wireMsg {
	m := &wireMsg{
		Channel:      "shell",
		Header:       json.RawMessage(`{"msg_id":"m1","msg_type":"execute_request","session":"s1","username":"u","version":"5.3","date":"2026-01-02T03:04:05.123456Z"}`),
		ParentHeader: json.RawMessage(`{}`),
		Metadata:     json.RawMessage(`{"x":1}`),
		Content:      json.RawMessage(`{"code":"1+1 <é>","silent":false}`),
		Buffers:      buffers,
	}
	if err := m.parseViews(); err != nil {
		panic(err)
	}
	return m
}

func TestCodecRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		buffers [][]byte
		v1      bool
	}{
		{"legacy text", nil, false},
		{"legacy binary", [][]byte{[]byte("abc"), {}, {0, 1, 2, 255}}, false},
		{"v1 no buffers", nil, true},
		{"v1 buffers", [][]byte{[]byte("xyz"), {7}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := sampleMsg(tt.buffers...)
			var got *wireMsg
			var err error
			if tt.v1 {
				got, err = decodeV1(encodeV1(in))
			} else {
				frame, bin, eerr := encodeLegacy(in)
				if eerr != nil {
					t.Fatal(eerr)
				}
				if bin != (len(tt.buffers) > 0) {
					t.Fatalf("binary=%v with %d buffers", bin, len(tt.buffers))
				}
				if bin {
					got, err = decodeLegacyBinary(frame)
				} else {
					if !bytes.Contains(frame, []byte(`"msg_type":"execute_request"`)) || !bytes.Contains(frame, []byte(`<é>`)) {
						t.Fatalf("legacy frame lacks top-level msg_type or escapes text: %s", frame)
					}
					got, err = decodeLegacyText(frame)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Channel != "shell" || got.MsgID != "m1" || got.MsgType != "execute_request" || got.Session != "s1" {
				t.Fatalf("views: %+v", got)
			}
			for i, pair := range [][2]json.RawMessage{{in.Header, got.Header}, {in.Metadata, got.Metadata}, {in.Content, got.Content}} {
				if !bytes.Equal(pair[0], pair[1]) {
					t.Errorf("dict %d changed: %s -> %s", i, pair[0], pair[1])
				}
			}
			if len(got.Buffers) != len(tt.buffers) {
				t.Fatalf("buffers: got %d want %d", len(got.Buffers), len(tt.buffers))
			}
			for i := range tt.buffers {
				if !bytes.Equal(got.Buffers[i], tt.buffers[i]) {
					t.Errorf("buffer %d: %v != %v", i, got.Buffers[i], tt.buffers[i])
				}
			}
		})
	}
}

// TestV1MatchesJupyterServer checks our v1 layout against the bytes jupyter_server's
// serialize_msg_to_ws_v1 produces for the same parts (offset_number = parts + 1, offsets[0] = 8·(1+n)).
func TestV1MatchesJupyterServer(t *testing.T) {
	m := &wireMsg{Channel: "iopub", Header: json.RawMessage(`{"a":1}`), ParentHeader: json.RawMessage(`{}`),
		Metadata: json.RawMessage(`{}`), Content: json.RawMessage(`{"b":2}`), Buffers: [][]byte{[]byte("zz")}}
	got := encodeV1(m)
	parts := [][]byte{[]byte("iopub"), []byte(`{"a":1}`), []byte(`{}`), []byte(`{}`), []byte(`{"b":2}`), []byte("zz")}
	n := len(parts) + 1
	var want bytes.Buffer
	_ = binary.Write(&want, binary.LittleEndian, uint64(n))
	off := uint64(8 * (1 + n))
	_ = binary.Write(&want, binary.LittleEndian, off)
	for _, p := range parts {
		off += uint64(len(p))
		_ = binary.Write(&want, binary.LittleEndian, off)
	}
	for _, p := range parts {
		want.Write(p)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("v1 frame differs:\n got %v\nwant %v", got, want.Bytes())
	}
}

func TestDecodeAcceptsClientQuirks(t *testing.T) {
	// Kernel Gateway's own tests: no date, empty session, fake msg id, buffers as {}, no channel.
	frame := `{"header":{"username":"","version":"5.0","session":"","msg_id":"fake-msg-id","msg_type":"execute_request"},
		"parent_header":{},"content":{"code":"print(1)"},"metadata":{},"buffers":{}}`
	m, err := decodeLegacyText([]byte(frame))
	if err != nil {
		t.Fatal(err)
	}
	if m.Channel != "shell" || m.MsgID != "fake-msg-id" || m.Session != "" {
		t.Fatalf("got %+v", m)
	}
	// Missing metadata/parent_header become {}.
	m, err = decodeLegacyText([]byte(`{"channel":"control","header":{"msg_id":"x","msg_type":"interrupt_request"},"content":{}}`))
	if err != nil || string(m.Metadata) != "{}" || string(m.ParentHeader) != "{}" {
		t.Fatalf("got %+v, %v", m, err)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
		dec   func([]byte) (*wireMsg, error)
	}{
		{"not json", []byte("hello"), decodeLegacyText},
		{"array", []byte("[1,2]"), decodeLegacyText},
		{"no header", []byte(`{"channel":"shell","content":{}}`), decodeLegacyText},
		{"header not object", []byte(`{"header":"x","content":{}}`), decodeLegacyText},
		{"no msg_type", []byte(`{"header":{"msg_id":"a"},"content":{}}`), decodeLegacyText},
		{"msg_id number", []byte(`{"header":{"msg_id":5,"msg_type":"a"},"content":{}}`), decodeLegacyText},
		{"content array", []byte(`{"header":{"msg_id":"a","msg_type":"b"},"content":[]}`), decodeLegacyText},
		{"binary empty", []byte{}, decodeLegacyBinary},
		{"binary huge count", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, decodeLegacyBinary},
		{"binary bad first offset", []byte{0, 0, 0, 1, 0, 0, 0, 3, '{', '}'}, decodeLegacyBinary},
		{"binary offset past end", []byte{0, 0, 0, 2, 0, 0, 0, 12, 0, 0, 0, 200, '{', '}'}, decodeLegacyBinary},
		{"v1 short", []byte{1, 2, 3}, decodeV1},
		{"v1 too few parts", encodeV1Parts([][]byte{[]byte("shell"), []byte("{}")}), decodeV1},
		{"v1 bad header", encodeV1Parts([][]byte{[]byte("shell"), []byte("nope"), []byte("{}"), []byte("{}"), []byte("{}")}), decodeV1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.dec(tt.frame); !errors.Is(err, ErrBadFrame) {
				t.Fatalf("want ErrBadFrame, got %v", err)
			}
		})
	}
}

func encodeV1Parts(parts [][]byte) []byte {
	n := len(parts) + 1
	head := make([]byte, 8*(n+1))
	binary.LittleEndian.PutUint64(head, uint64(n))
	off := uint64(len(head))
	binary.LittleEndian.PutUint64(head[8:], off)
	for i, p := range parts {
		off += uint64(len(p))
		binary.LittleEndian.PutUint64(head[8*(i+2):], off)
	}
	return joinParts(head, parts)
}

// FuzzDecode: no frame may panic a decoder, and whatever decodes re-encodes and decodes the same.
func FuzzDecode(f *testing.F) {
	m := sampleMsg([]byte("buf"))
	legacyBin, _, _ := encodeLegacy(m)
	m2 := sampleMsg()
	legacyText, _, _ := encodeLegacy(m2)
	f.Add(legacyText)
	f.Add(legacyBin)
	f.Add(encodeV1(m))
	f.Add([]byte(`{"header":{"msg_id":"","msg_type":"x"},"buffers":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dec := range []func([]byte) (*wireMsg, error){decodeLegacyText, decodeLegacyBinary, decodeV1} {
			got, err := dec(data)
			if err != nil {
				if !errors.Is(err, ErrBadFrame) {
					t.Fatalf("error not wrapping ErrBadFrame: %v", err)
				}
				continue
			}
			again, err := decodeV1(encodeV1(got))
			if err != nil {
				t.Fatalf("re-decode: %v", err)
			}
			if again.MsgType != got.MsgType || again.MsgID != got.MsgID || len(again.Buffers) != len(got.Buffers) {
				t.Fatalf("round trip changed views")
			}
		}
	})
}

func TestBacklogRing(t *testing.T) {
	r := newBacklog(3, 0)
	mk := func() *outMsg { return &outMsg{size: 10} }
	r.add("", mk())  // 1
	r.add("a", mk()) // 2
	r.add("b", mk()) // 3
	r.add("", mk())  // 4: drops 1
	got, gap := r.since("a", 0)
	if !gap || len(got) != 2 || got[0].seq != 2 || got[1].seq != 4 {
		t.Fatalf("since(a,0) = %v gap=%v", got, gap)
	}
	got, gap = r.since("b", 3)
	if gap || len(got) != 1 || got[0].seq != 4 {
		t.Fatalf("since(b,3) = %v gap=%v", got, gap)
	}
	r.dropThrough(3)
	if len(r.entries) != 1 || r.entries[0].seq != 4 || r.bytes != 10 {
		t.Fatalf("dropThrough(3): %d entries, %d bytes", len(r.entries), r.bytes)
	}
	r.dropThrough(10)
	if len(r.entries) != 0 || r.bytes != 0 || r.last() != 4 {
		t.Fatalf("dropThrough(10): %d entries, %d bytes, last %d", len(r.entries), r.bytes, r.last())
	}
	rb := newBacklog(100, 25)
	for range 5 {
		rb.add("", mk())
	}
	if len(rb.entries) != 2 || rb.bytes != 20 {
		t.Fatalf("byte bound: %d entries, %d bytes", len(rb.entries), rb.bytes)
	}
}

func TestExecState(t *testing.T) {
	type ev struct{ state, parentID, parentType string }
	tests := []struct {
		name   string
		events []ev
		want   string
	}{
		{"starting shows idle", nil, StateIdle},
		{"execute busy", []ev{{"busy", "e1", "execute_request"}}, StateBusy},
		{"execute done", []ev{{"busy", "e1", "execute_request"}, {"idle", "e1", "execute_request"}}, StateIdle},
		{"nudge never busy", []ev{{"idle", "", ""}, {"busy", "k", "kernel_info_request"}}, StateIdle},
		{"debug idle during execute", []ev{{"busy", "e1", "execute_request"}, {"busy", "d", "debug_request"}, {"idle", "d", "debug_request"}}, StateBusy},
		{"overlapping tracked", []ev{{"busy", "e1", "execute_request"}, {"busy", "c1", "complete_request"}, {"idle", "c1", "complete_request"}}, StateBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newExecState()
			for _, e := range tt.events {
				s.observeStatus(e.state, e.parentID, e.parentType)
			}
			if s.modelState() != tt.want {
				t.Fatalf("state %s, want %s", s.modelState(), tt.want)
			}
		})
	}
	s := newExecState()
	s.set(StateDead)
	s.observeStatus("busy", "e", "execute_request")
	if s.modelState() != StateDead {
		t.Fatal("a dead kernel came back on a stray status")
	}
}

func TestEnvPolicy(t *testing.T) {
	p := newEnvPolicy([]string{"OPENAI_BASE_URL"})
	got, dropped, err := p.filter(map[string]any{
		"KERNEL_USERNAME": "ann\x00\n\x1b[31m", "OPENAI_BASE_URL": "http://x", "PATH": "/evil", "KERNEL_bad name": "x", "KERNEL_N": 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got["KERNEL_USERNAME"] != "ann[31m" || got["OPENAI_BASE_URL"] != "http://x" || got["KERNEL_N"] != "3" || len(got) != 3 {
		t.Fatalf("got %q", got)
	}
	if len(dropped) != 2 {
		t.Fatalf("dropped %v", dropped)
	}
	if _, _, err := p.filter(map[string]any{"KERNEL_X": string(make([]byte, maxEnvValue+1))}); err == nil {
		t.Fatal("oversize value accepted")
	}
}

package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	s, err := NewSession("sess", []byte("secret"), "hmac-sha256")
	if err != nil {
		t.Fatal(err)
	}
	m := &Message{
		Identities:   [][]byte{[]byte("id1")},
		Header:       json.RawMessage(`{"msg_id":"a","msg_type":"comm_msg","session":"s","date":"2026-01-01T00:00:00.000000Z","version":"5.4","subshell_id":null,"x-extra":[1,2]}`),
		ParentHeader: json.RawMessage(`{"msg_id":"p"}`), Metadata: json.RawMessage(`{"k":{"deep":true}}`),
		Content: json.RawMessage(`{"data":{"ünï":"\u2603"},"unknown_field":1e400}`),
		Buffers: [][]byte{{0, 1, 2}, {}},
	}
	frames := s.Encode(m)
	got, err := s.Decode(Shell, frames)
	if err != nil {
		t.Fatal(err)
	}
	for i, pair := range [][2][]byte{{got.Header, m.Header}, {got.ParentHeader, m.ParentHeader}, {got.Metadata, m.Metadata}, {got.Content, m.Content}} {
		if !bytes.Equal(pair[0], pair[1]) {
			t.Errorf("dict %d changed: %s != %s", i, pair[0], pair[1])
		}
	}
	if got.MsgID != "a" || got.MsgType != "comm_msg" || got.ParentMsgID != "p" || got.Session != "s" {
		t.Errorf("views %+v", got)
	}
	if len(got.Buffers) != 2 || !bytes.Equal(got.Buffers[0], []byte{0, 1, 2}) || string(got.Identities[0]) != "id1" {
		t.Errorf("buffers/ids %q %q", got.Buffers, got.Identities)
	}
}

func TestDecodeRejects(t *testing.T) {
	s, _ := NewSession("sess", []byte("secret"), "")
	other, _ := NewSession("x", []byte("other key"), "")
	m, _ := NewMessage("status", map[string]string{"execution_state": "idle"})
	good := s.Encode(m)
	tamper := func(i int, b []byte) [][]byte {
		f := append([][]byte(nil), good...)
		f[i] = b
		return f
	}
	cases := []struct {
		name   string
		frames [][]byte
		want   error
	}{
		{"other key", other.Encode(m), ErrBadSignature},
		{"no signature", tamper(1, nil), ErrBadSignature},
		{"content changed", tamper(5, []byte(`{"execution_state":"busy"}`)), ErrBadSignature},
		{"truncated signature", tamper(1, good[1][:10]), ErrBadSignature},
		{"no delimiter", good[1:], ErrMalformed},
		{"too few frames", good[:4], ErrMalformed},
		{"empty", nil, ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Decode(IOPub, tc.frames); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// Unsigned sessions accept anything well-formed but still reject non-objects.
	open, _ := NewSession("o", nil, "")
	if _, err := open.Decode(IOPub, tamper(2, []byte(`[1]`))); !errors.Is(err, ErrMalformed) {
		t.Fatalf("non-object header: %v", err)
	}
}

func TestNewMessageFreshIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		m, err := NewMessage("kernel_info_request", nil)
		if err != nil {
			t.Fatal(err)
		}
		if seen[m.MsgID] {
			t.Fatal("msg_id reused")
		}
		seen[m.MsgID] = true
	}
	m, _ := NewMessage("x", map[string]string{"a": "<b>&"})
	if !bytes.Contains(m.Content, []byte("<b>&")) {
		t.Fatalf("HTML escaped: %s", m.Content)
	}
	if d := m.Date(); d.IsZero() {
		t.Fatalf("no date in %s", m.Header)
	}
}

// FuzzDecode feeds arbitrary frames (split at 0xff) to the wire parser: it must not panic, and
// what it accepts must survive a re-encode.
func FuzzDecode(f *testing.F) {
	s, _ := NewSession("sess", nil, "")
	m, _ := NewMessage("execute_request", map[string]any{"code": "1"})
	f.Add(bytes.Join(s.Encode(m), []byte{0xff}))
	f.Add([]byte("<IDS|MSG>\xff\xff{}\xff{}\xff{}\xff{}"))
	f.Add([]byte("topic\xff<IDS|MSG>\xffsig\xff{\"msg_id\":1}\xff{}\xff{}\xff{}\xffbuf"))
	f.Fuzz(func(t *testing.T, data []byte) {
		frames := bytes.Split(data, []byte{0xff})
		got, err := s.Decode(IOPub, frames)
		if err != nil {
			return
		}
		again, err := s.Decode(IOPub, s.Encode(got))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !bytes.Equal(again.Content, got.Content) || again.MsgID != got.MsgID {
			t.Fatal("round trip changed the message")
		}
	})
}

// FuzzJSONString checks the fast string decoder against encoding/json.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\nb\"c\\"`, `"\u00e9\ud83d\ude00"`, `"x\/y\tz"`, `"bad\q"`, `"\"`, `"ü"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
			return // the scanner hands over exact string tokens only
		}
		got, err := jsonString(raw)
		var want string
		werr := json.Unmarshal(raw, &want)
		if werr != nil {
			if err == nil && json.Valid(raw) {
				t.Fatalf("accepted %q", raw)
			}
			return
		}
		if err != nil || got != want {
			t.Fatalf("jsonString(%q) = %q, %v; encoding/json says %q", raw, got, err, want)
		}
	})
}

// FuzzObjectFields checks the one-pass object splitter against encoding/json on valid objects.
func FuzzObjectFields(f *testing.F) {
	f.Add([]byte(`{"data":{"image/png":"iVBOR","text/plain":"a\"}b"},"metadata":{},"n":[1,{"x":"]"}]}`))
	f.Add([]byte(` { } `))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := objectFields(raw)
		var want map[string]json.RawMessage
		if json.Unmarshal(raw, &want) != nil {
			return // invalid input: objectFields may or may not notice, but must not panic
		}
		if err != nil {
			t.Fatalf("objectFields(%q): %v", raw, err)
		}
		if len(got) != len(want) {
			t.Fatalf("fields %d vs %d", len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(bytes.TrimSpace(got[k]), bytes.TrimSpace(v)) {
				t.Fatalf("field %q: %q vs %q", k, got[k], v)
			}
		}
	})
}

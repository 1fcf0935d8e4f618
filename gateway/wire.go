package gateway

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The WebSocket framings of /api/kernels/{id}/channels (jupyter_server docs, websocket-protocols.rst):
//
//   - legacy text: one JSON object {channel, header, parent_header, metadata, content, buffers: []}
//   - legacy binary (messages with buffers): uint32be n, n × uint32be offsets, JSON, buffers
//   - v1 (subprotocol v1.kernel.websocket.jupyter.org): uint64le count, count × uint64le offsets,
//     then channel, header, parent_header, metadata, content, buffers.

// ProtocolV1 is the subprotocol name JupyterLab offers when it talks to a server directly.
const ProtocolV1 = "v1.kernel.websocket.jupyter.org"

// maxFrameParts bounds the offset table of a binary frame so a hostile count cannot make us allocate.
const maxFrameParts = 1 << 12

// ErrBadFrame is wrapped by every decoding error: the frame was not a Jupyter message.
var ErrBadFrame = errors.New("malformed kernel message frame")

// wireMsg is one Jupyter message as it crosses the WebSocket. The four dicts stay raw so fields we do not
// know survive byte for byte; the parsed views are for routing only.
type wireMsg struct {
	Channel                                 string
	Header, ParentHeader, Metadata, Content json.RawMessage
	Buffers                                 [][]byte

	MsgID, MsgType, Session    string // from Header
	ParentMsgID, ParentSession string // from ParentHeader
	ParentMsgType              string
}

// headerView holds the routing fields of a header or parent header. Clients in the wild send empty
// sessions, repeated msg ids ("fake-msg-id") and no date; all of that is accepted.
type headerView struct {
	MsgID   string `json:"msg_id"`
	MsgType string `json:"msg_type"`
	Session string `json:"session"`
}

var emptyDict = json.RawMessage("{}")

// parseViews fills the routing fields from the raw dicts and checks that the dicts are JSON objects.
func (m *wireMsg) parseViews() error {
	var h headerView
	if err := decodeDict(m.Header, &h, "header"); err != nil {
		return err
	}
	if h.MsgType == "" {
		return fmt.Errorf("%w: header has no msg_type", ErrBadFrame)
	}
	m.MsgID, m.MsgType, m.Session = h.MsgID, h.MsgType, h.Session
	if len(m.ParentHeader) == 0 {
		m.ParentHeader = emptyDict
	}
	var p headerView
	if err := decodeDict(m.ParentHeader, &p, "parent_header"); err != nil {
		return err
	}
	m.ParentMsgID, m.ParentSession, m.ParentMsgType = p.MsgID, p.Session, p.MsgType
	for _, d := range []*json.RawMessage{&m.Metadata, &m.Content} {
		if len(*d) == 0 || bytes.Equal(bytes.TrimSpace(*d), []byte("null")) {
			*d = emptyDict
		}
		if !isJSONObject(*d) {
			return fmt.Errorf("%w: metadata and content must be JSON objects", ErrBadFrame)
		}
	}
	return nil
}

func decodeDict(raw json.RawMessage, into *headerView, what string) error {
	if !isJSONObject(raw) {
		return fmt.Errorf("%w: %s must be a JSON object", ErrBadFrame, what)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadFrame, what, err)
	}
	return nil
}

func isJSONObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) >= 2 && t[0] == '{' && t[len(t)-1] == '}' && json.Valid(t)
}

// legacyJSON is the legacy text frame. Buffers is raw because clients send [] or {} (KG's tests).
type legacyJSON struct {
	Channel      string          `json:"channel"`
	Header       json.RawMessage `json:"header"`
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
	Buffers      json.RawMessage `json:"buffers,omitempty"`
}

// decodeLegacyText parses a legacy JSON text frame.
func decodeLegacyText(data []byte) (*wireMsg, error) {
	var l legacyJSON
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	m := &wireMsg{Channel: l.Channel, Header: l.Header, ParentHeader: l.ParentHeader, Metadata: l.Metadata, Content: l.Content}
	if m.Channel == "" {
		m.Channel = "shell" // jupyter_server's default for a missing channel
	}
	if err := m.parseViews(); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeLegacyBinary parses a legacy binary frame (JSON part plus buffers).
func decodeLegacyBinary(data []byte) (*wireMsg, error) {
	parts, err := splitOffsets(data, 4)
	if err != nil {
		return nil, err
	}
	m, err := decodeLegacyText(parts[0])
	if err != nil {
		return nil, err
	}
	m.Buffers = parts[1:]
	return m, nil
}

// decodeV1 parses a v1.kernel.websocket.jupyter.org frame.
func decodeV1(data []byte) (*wireMsg, error) {
	parts, err := splitOffsets(data, 8)
	if err != nil {
		return nil, err
	}
	if len(parts) < 5 {
		return nil, fmt.Errorf("%w: v1 frame has %d parts, want channel and four dicts", ErrBadFrame, len(parts))
	}
	m := &wireMsg{Channel: string(parts[0]), Header: parts[1], ParentHeader: parts[2], Metadata: parts[3], Content: parts[4]}
	if len(parts) > 5 {
		m.Buffers = parts[5:]
	}
	if m.Channel == "" {
		m.Channel = "shell"
	}
	if err := m.parseViews(); err != nil {
		return nil, err
	}
	return m, nil
}

// splitOffsets reads a count and an offset table of word-size integers (4 big-endian for legacy,
// 8 little-endian for v1) and returns the parts. Legacy counts n parts with n offsets (each a start);
// v1 counts n offsets whose consecutive pairs bound n-1 parts, the last offset being the end.
func splitOffsets(data []byte, word int) ([][]byte, error) {
	read := func(i int) uint64 {
		b := data[i*word : (i+1)*word]
		if word == 4 {
			return uint64(binary.BigEndian.Uint32(b))
		}
		return binary.LittleEndian.Uint64(b)
	}
	if len(data) < word {
		return nil, fmt.Errorf("%w: binary frame of %d bytes has no offset table", ErrBadFrame, len(data))
	}
	n := read(0)
	if n == 0 || n > maxFrameParts || uint64(len(data)) < uint64(word)*(n+1) {
		return nil, fmt.Errorf("%w: binary frame declares %d offsets in %d bytes", ErrBadFrame, n, len(data))
	}
	offs := make([]uint64, 0, n+1)
	for i := 1; i <= int(n); i++ {
		offs = append(offs, read(i))
	}
	if word == 4 {
		offs = append(offs, uint64(len(data))) // legacy: the last part runs to the end
	}
	if offs[0] != uint64(word)*(n+1) {
		return nil, fmt.Errorf("%w: first offset %d, want %d", ErrBadFrame, offs[0], uint64(word)*(n+1))
	}
	parts := make([][]byte, 0, len(offs)-1)
	for i := 0; i+1 < len(offs); i++ {
		if offs[i] > offs[i+1] || offs[i+1] > uint64(len(data)) {
			return nil, fmt.Errorf("%w: offsets out of order or past the end", ErrBadFrame)
		}
		parts = append(parts, data[offs[i]:offs[i+1]])
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: binary frame has no parts", ErrBadFrame)
	}
	return parts, nil
}

// legacyOut is the legacy JSON we send: the message plus top-level msg_id/msg_type, which jupyter_server's
// gateway proxy reads for its logs.
type legacyOut struct {
	Channel      string          `json:"channel"`
	Header       json.RawMessage `json:"header"`
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
	Buffers      []struct{}      `json:"buffers"`
	MsgID        string          `json:"msg_id"`
	MsgType      string          `json:"msg_type"`
}

// encodeLegacy returns the frame and whether it is binary (only when the message carries buffers).
func encodeLegacy(m *wireMsg) ([]byte, bool, error) {
	out := legacyOut{Channel: m.Channel, Header: orEmpty(m.Header), ParentHeader: orEmpty(m.ParentHeader),
		Metadata: orEmpty(m.Metadata), Content: orEmpty(m.Content), Buffers: []struct{}{}, MsgID: m.MsgID, MsgType: m.MsgType}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, false, fmt.Errorf("encode legacy frame: %w", err)
	}
	js := bytes.TrimRight(buf.Bytes(), "\n")
	if len(m.Buffers) == 0 {
		return js, false, nil
	}
	// Binary: the JSON without a buffers list, then the buffers.
	js = bytes.Replace(js, []byte(`"buffers":[],`), nil, 1)
	parts := append([][]byte{js}, m.Buffers...)
	n := len(parts)
	head := make([]byte, 4*(n+1))
	binary.BigEndian.PutUint32(head, uint32(n))
	off := uint32(len(head))
	for i, p := range parts {
		binary.BigEndian.PutUint32(head[4*(i+1):], off)
		off += uint32(len(p))
	}
	return joinParts(head, parts), true, nil
}

// encodeV1 returns a v1 binary frame.
func encodeV1(m *wireMsg) []byte {
	parts := append([][]byte{[]byte(m.Channel), orEmpty(m.Header), orEmpty(m.ParentHeader), orEmpty(m.Metadata), orEmpty(m.Content)}, m.Buffers...)
	count := len(parts) + 1
	head := make([]byte, 8*(count+1))
	binary.LittleEndian.PutUint64(head, uint64(count))
	off := uint64(len(head))
	binary.LittleEndian.PutUint64(head[8:], off)
	for i, p := range parts {
		off += uint64(len(p))
		binary.LittleEndian.PutUint64(head[8*(i+2):], off)
	}
	return joinParts(head, parts)
}

func joinParts(head []byte, parts [][]byte) []byte {
	size := len(head)
	for _, p := range parts {
		size += len(p)
	}
	out := make([]byte, 0, size)
	out = append(out, head...)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return emptyDict
	}
	return raw
}

// validChannel says whether a client may send on a channel (iopub and hb are server-to-client only).
func validChannel(ch string) bool {
	switch ch {
	case "shell", "control", "stdin":
		return true
	}
	return false
}

// cleanReason makes a WebSocket close reason fit the 123-byte limit of a control frame.
func cleanReason(s string) string {
	s = strings.ToValidUTF8(s, "?")
	for len(s) > 120 {
		s = s[:len(s)-1]
		s = strings.ToValidUTF8(s, "")
	}
	return s
}

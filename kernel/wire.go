package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Channel names a kernel socket.
type Channel string

// The four message channels (the heartbeat carries raw bytes, not messages).
const (
	Shell   Channel = "shell"
	IOPub   Channel = "iopub"
	Stdin   Channel = "stdin"
	Control Channel = "control"
)

// ProtocolVersion is what our own headers announce (jupyter_client 8 does the same).
const ProtocolVersion = "5.4"

// delimiter separates routing identities from the signed part of a message.
var delimiter = []byte("<IDS|MSG>")

// Errors of the wire codec. Every message that fails to decode is dropped and counted, never delivered.
var (
	ErrBadSignature = errors.New("kernel: bad message signature")
	ErrMalformed    = errors.New("kernel: malformed message")
)

// Message is one Jupyter message. Header, ParentHeader, Metadata and Content are kept as raw JSON so
// that fields we do not know survive a round trip; MsgID, MsgType, Session and ParentMsgID are parsed
// views of them.
type Message struct {
	Channel                                 Channel
	Identities                              [][]byte
	Header, ParentHeader, Metadata, Content json.RawMessage
	Buffers                                 [][]byte

	MsgID, MsgType, Session, ParentMsgID string
}

// headerView is the part of a header we read; the raw header is what travels.
type headerView struct {
	MsgID   string `json:"msg_id"`
	MsgType string `json:"msg_type"`
	Session string `json:"session"`
	Date    string `json:"date"`
}

// header is what we write for our own messages.
type header struct {
	MsgID    string `json:"msg_id"`
	MsgType  string `json:"msg_type"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	Version  string `json:"version"`
}

// NewMessage builds a message with a fresh uuid4 msg_id (ipykernel silently drops a byte-identical
// resend, so ids are never reused), the date in µs with Z, and version 5.4. The session is left empty;
// a Client fills in its own when it sends the message through Request or Execute.
func NewMessage(msgType string, content any) (*Message, error) {
	return newMessage(msgType, "", content)
}

func newMessage(msgType, session string, content any) (*Message, error) {
	h := header{
		MsgID:    uuid.NewString(),
		MsgType:  msgType,
		Session:  session,
		Username: "pyrualean",
		Date:     FormatDate(time.Now()),
		Version:  ProtocolVersion,
	}
	hb, err := marshalJSON(h)
	if err != nil {
		return nil, err
	}
	var cb json.RawMessage
	switch c := content.(type) {
	case nil:
		cb = json.RawMessage("{}")
	case json.RawMessage:
		cb = c
	default:
		if cb, err = marshalJSON(content); err != nil {
			return nil, fmt.Errorf("kernel: encode %s content: %w", msgType, err)
		}
	}
	return &Message{
		Header: hb, ParentHeader: json.RawMessage("{}"), Metadata: json.RawMessage("{}"), Content: cb,
		MsgID: h.MsgID, MsgType: msgType, Session: session,
	}, nil
}

// withSession returns m with its header's session set, when it had none.
func (m *Message) withSession(session string) error {
	if m.Session != "" {
		return nil
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(m.Header, &h); err != nil {
		return fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	s, _ := json.Marshal(session)
	h["session"] = s
	hb, err := marshalJSON(h)
	if err != nil {
		return err
	}
	m.Header, m.Session = hb, session
	return nil
}

// Date returns the header's date, or the zero time when it is missing or unparsable.
func (m *Message) Date() time.Time {
	var h headerView
	if json.Unmarshal(m.Header, &h) != nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, h.Date)
	if err != nil {
		return time.Time{}
	}
	return t
}

// FormatDate writes t as Jupyter does: ISO 8601, microseconds, Z.
func FormatDate(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

// marshalJSON encodes like Python's json.dumps(ensure_ascii=False): no HTML escaping, no newline.
func marshalJSON(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// parseViews fills the parsed views from the raw dicts; each dict must be a JSON object.
func (m *Message) parseViews() error {
	for i, d := range []json.RawMessage{m.Header, m.ParentHeader, m.Metadata, m.Content} {
		if !isObject(d) {
			return fmt.Errorf("%w: frame %d is not a JSON object", ErrMalformed, i)
		}
	}
	var h, p headerView
	if err := json.Unmarshal(m.Header, &h); err != nil {
		return fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if err := json.Unmarshal(m.ParentHeader, &p); err != nil {
		return fmt.Errorf("%w: parent_header: %v", ErrMalformed, err)
	}
	// Metadata and content are only checked to be objects here; they are parsed where they are used,
	// so a 1 MB output is not scanned twice.
	m.MsgID, m.MsgType, m.Session, m.ParentMsgID = h.MsgID, h.MsgType, h.Session, p.MsgID
	return nil
}

func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

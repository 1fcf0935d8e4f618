package kernel

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
)

// Session signs outgoing and verifies incoming messages with the connection's key (HMAC over the
// four JSON frames exactly as sent). An empty key means no signing, as in jupyter_client.
type Session struct {
	ID     string // our session id; also the DEALER identity, so stdin shares shell's
	key    []byte
	newMAC func() hash.Hash
}

// NewSession makes a session for the given signature scheme ("hmac-sha256" when empty).
func NewSession(id string, key []byte, scheme string) (*Session, error) {
	if scheme == "" {
		scheme = "hmac-sha256"
	}
	var h func() hash.Hash
	switch strings.ToLower(scheme) {
	case "hmac-sha256":
		h = sha256.New
	case "hmac-sha512":
		h = sha512.New
	case "hmac-sha1":
		h = sha1.New
	case "hmac-sha384":
		h = sha512.New384
	default:
		return nil, fmt.Errorf("kernel: unsupported signature scheme %q", scheme)
	}
	return &Session{ID: id, key: append([]byte(nil), key...), newMAC: h}, nil
}

func (s *Session) sign(dicts ...[]byte) []byte {
	if len(s.key) == 0 {
		return nil
	}
	mac := hmac.New(s.newMAC, s.key)
	for _, d := range dicts {
		mac.Write(d)
	}
	sum := mac.Sum(nil)
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum)
	return out
}

// Encode turns m into ZeroMQ frames: identities, delimiter, signature, the four dicts, buffers.
func (s *Session) Encode(m *Message) [][]byte {
	frames := make([][]byte, 0, len(m.Identities)+6+len(m.Buffers))
	frames = append(frames, m.Identities...)
	h, p, md, c := orEmpty(m.Header), orEmpty(m.ParentHeader), orEmpty(m.Metadata), orEmpty(m.Content)
	frames = append(frames, delimiter, s.sign(h, p, md, c))
	frames = append(frames, h, p, md, c)
	frames = append(frames, m.Buffers...)
	return frames
}

// Decode parses frames received on ch. It finds the delimiter (iopub topics and router identities
// come before it), verifies the signature in constant time and checks that the dicts are JSON objects.
// The returned message's slices alias frames.
func (s *Session) Decode(ch Channel, frames [][]byte) (*Message, error) {
	d := -1
	for i, f := range frames {
		if bytes.Equal(f, delimiter) {
			d = i
			break
		}
	}
	if d < 0 {
		return nil, fmt.Errorf("%w: no <IDS|MSG> delimiter in %d frames", ErrMalformed, len(frames))
	}
	rest := frames[d+1:]
	if len(rest) < 5 {
		return nil, fmt.Errorf("%w: %d frames after the delimiter, want at least 5", ErrMalformed, len(rest))
	}
	if len(s.key) > 0 {
		want := s.sign(rest[1], rest[2], rest[3], rest[4])
		// hex is compared lowercase; a signature of another length fails ConstantTimeCompare too.
		if !hmac.Equal(bytes.ToLower(rest[0]), want) {
			return nil, ErrBadSignature
		}
	}
	m := &Message{
		Channel:    ch,
		Identities: frames[:d],
		Header:     rest[1], ParentHeader: rest[2], Metadata: rest[3], Content: rest[4],
	}
	if len(rest) > 5 {
		m.Buffers = rest[5:]
	}
	if err := m.parseViews(); err != nil {
		return nil, err
	}
	return m, nil
}

// orEmpty stands in {} for a dict a forwarded message left out.
func orEmpty(d []byte) []byte {
	if len(d) == 0 {
		return []byte("{}")
	}
	return d
}

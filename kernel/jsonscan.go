package kernel

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Outputs carry megabytes of base64 and text in JSON strings. encoding/json scans such a value
// several times (validate, skip, unquote); these helpers find a string's end with one bytes.IndexByte
// pass and copy it when it has no escapes, which is what makes a 1 MB image cost microseconds.

// objectFields splits a JSON object into its members' raw values (one level, in one pass).
func objectFields(raw []byte) (map[string][]byte, error) {
	s := scanner{b: raw}
	s.space()
	if !s.eat('{') {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	fields := map[string][]byte{}
	s.space()
	if s.eat('}') {
		return fields, nil
	}
	for {
		s.space()
		kraw, err := s.value()
		if err != nil || len(kraw) == 0 || kraw[0] != '"' {
			return nil, fmt.Errorf("%w: bad object key", ErrMalformed)
		}
		key, err := jsonString(kraw)
		if err != nil {
			return nil, err
		}
		s.space()
		if !s.eat(':') {
			return nil, fmt.Errorf("%w: missing ':'", ErrMalformed)
		}
		s.space()
		v, err := s.value()
		if err != nil {
			return nil, err
		}
		fields[key] = v
		s.space()
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			return fields, nil
		}
		return nil, fmt.Errorf("%w: expected ',' or '}' at %d", ErrMalformed, s.i)
	}
}

// jsonString decodes a raw JSON string: a copy of its body when it has no escapes, else its parts.
func jsonString(raw []byte) (string, error) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		if body := raw[1 : len(raw)-1]; bytes.IndexByte(body, '\\') < 0 && !hasControl(body) && utf8.Valid(body) {
			return string(body), nil
		}
	}
	var b strings.Builder
	err := eachStringPart(raw, func(p []byte) { b.Write(p) })
	return b.String(), err
}

// eachStringPart decodes a raw JSON string and hands its text to emit in parts: runs between escapes
// as slices of raw (no copy; emit must not keep them), escapes decoded. It is what lets a cell's
// megabytes of stream text reach a capped buffer without ever being one string. Like encoding/json, it
// rejects control characters, turns each invalid UTF-8 byte and each lone surrogate into U+FFFD.
func eachStringPart(raw []byte, emit func([]byte)) error {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return fmt.Errorf("%w: not a JSON string", ErrMalformed)
	}
	body := raw[1 : len(raw)-1]
	var buf [utf8.UTFMax]byte
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\\')
		run := body
		if i >= 0 {
			run = body[:i]
		}
		if err := emitRun(run, emit); err != nil {
			return err
		}
		if i < 0 {
			return nil
		}
		if i+1 >= len(body) {
			return fmt.Errorf("%w: dangling backslash", ErrMalformed)
		}
		c := body[i+1]
		body = body[i+2:]
		switch c {
		case '"', '\\', '/':
			buf[0] = c
		case 'n':
			buf[0] = '\n'
		case 't':
			buf[0] = '\t'
		case 'r':
			buf[0] = '\r'
		case 'b':
			buf[0] = '\b'
		case 'f':
			buf[0] = '\f'
		case 'u':
			r, n := unicodeEscape(body)
			if n < 0 {
				return fmt.Errorf("%w: bad \\u escape", ErrMalformed)
			}
			body = body[n:]
			emit(buf[:utf8.EncodeRune(buf[:], r)])
			continue
		default:
			return fmt.Errorf("%w: bad escape \\%c", ErrMalformed, c)
		}
		emit(buf[:1])
	}
	return nil
}

// unicodeEscape decodes the XXXX of a \uXXXX at the start of b, joining a surrogate pair written as
// two escapes; it returns the rune and the bytes used (-1 if b does not start with 4 hex digits).
func unicodeEscape(b []byte) (rune, int) {
	r := hex4(b)
	if r < 0 {
		return 0, -1
	}
	if !utf16.IsSurrogate(r) {
		return r, 4
	}
	if len(b) >= 10 && b[4] == '\\' && b[5] == 'u' {
		if r2 := hex4(b[6:]); r2 >= 0 {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				return dec, 10
			}
		}
	}
	return utf8.RuneError, 4
}

func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// emitRun hands an unescaped run to emit, refusing control characters and replacing invalid UTF-8.
func emitRun(run []byte, emit func([]byte)) error {
	if hasControl(run) {
		return fmt.Errorf("%w: control character or quote in a string", ErrMalformed)
	}
	if utf8.Valid(run) {
		if len(run) > 0 {
			emit(run)
		}
		return nil
	}
	start := 0
	for i := 0; i < len(run); {
		r, n := utf8.DecodeRune(run[i:])
		if r == utf8.RuneError && n == 1 {
			if i > start {
				emit(run[start:i])
			}
			emit(replacementChar)
			start = i + 1
		}
		i += n
	}
	if start < len(run) {
		emit(run[start:])
	}
	return nil
}

var replacementChar = []byte(string(utf8.RuneError))

// hasControl reports bytes that cannot stand unescaped in a JSON string: control characters and quotes.
// It tests eight bytes at a time (a cell's megabytes of text pass through here).
func hasControl(b []byte) bool {
	const ones, highs, quotes = 0x0101010101010101, 0x8080808080808080, 0x2222222222222222
	for ; len(b) >= 8; b = b[8:] {
		w := binary.LittleEndian.Uint64(b)
		q := w ^ quotes
		// a byte below 0x20, or a byte equal to '"', sets its high bit here (no false negatives;
		// a false positive is settled byte by byte below)
		if ((w-0x20*ones)&^w|(q-ones)&^q)&highs != 0 {
			break
		}
	}
	for _, c := range b {
		if c < 0x20 || c == '"' {
			return true
		}
	}
	return false
}

// jsonValue decodes a raw value into generic JSON (json.Number leaves); strings take the fast path.
func jsonValue(raw []byte) (any, error) {
	if len(raw) > 0 && raw[0] == '"' {
		return jsonString(raw)
	}
	var v any
	if err := decodeTree(raw, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return v, nil
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// value returns the raw bytes of the next value. Strings are scanned fast; containers by depth.
// Only structure is checked here; whoever decodes a non-string value validates it fully.
func (s *scanner) value() ([]byte, error) {
	start := s.i
	if s.i >= len(s.b) {
		return nil, fmt.Errorf("%w: unexpected end", ErrMalformed)
	}
	switch s.b[s.i] {
	case '"':
		if err := s.str(); err != nil {
			return nil, err
		}
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if err := s.str(); err != nil {
					return nil, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return s.b[start:s.i], nil
			}
		}
		return nil, fmt.Errorf("%w: unterminated container", ErrMalformed)
	default:
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.b[start:s.i], nil
			}
			s.i++
		}
	}
	return s.b[start:s.i], nil
}

// str advances past a string starting at s.i.
func (s *scanner) str() error {
	s.i++ // opening quote
	for {
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			return fmt.Errorf("%w: unterminated string", ErrMalformed)
		}
		end := s.i + j
		// the quote is escaped iff an odd number of backslashes precede it
		n := 0
		for k := end - 1; k >= s.i && s.b[k] == '\\'; k-- {
			n++
		}
		s.i = end + 1
		if n%2 == 0 {
			return nil
		}
	}
}

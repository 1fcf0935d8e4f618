package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// jsonString decodes a raw JSON string. It copies runs between escapes in bulk, so a megabyte of
// text with a few "\n" costs about as much as a copy.
func jsonString(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", fmt.Errorf("%w: not a JSON string", ErrMalformed)
	}
	body := raw[1 : len(raw)-1]
	if hasControl(body) || !utf8.Valid(body) {
		return slowString(raw)
	}
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body), nil
	}
	out := make([]byte, 0, len(body))
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\\')
		if i < 0 {
			out = append(out, body...)
			break
		}
		out = append(out, body[:i]...)
		if i+1 >= len(body) {
			return "", fmt.Errorf("%w: dangling backslash", ErrMalformed)
		}
		c := body[i+1]
		body = body[i+2:]
		switch c {
		case '"', '\\', '/':
			out = append(out, c)
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			// \uXXXX, possibly a surrogate pair: rare enough to hand to encoding/json
			return slowString(raw)
		default:
			return "", fmt.Errorf("%w: bad escape \\%c", ErrMalformed, c)
		}
	}
	return string(out), nil
}

func slowString(raw []byte) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return s, nil
}

func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
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

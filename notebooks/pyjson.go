package notebooks

import (
	"bufio"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrNotJSON reports a value the canonical writer cannot represent (NaN, ±Inf, a channel, ...).
var ErrNotJSON = errors.New("notebooks: value not representable as JSON")

// pyEncoder writes a generic JSON tree exactly as Python's
// json.dumps(v, indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False) does.
type pyEncoder struct {
	w *bufio.Writer
}

func (e *pyEncoder) newline(depth int) {
	e.w.WriteByte('\n')
	for range depth {
		e.w.WriteByte(' ')
	}
}

// encode writes v at nesting depth. v is a generic tree (map[string]any, []any, string, json.Number,
// bool, nil) possibly holding Go numbers or other values, which are normalised on the way.
func (e *pyEncoder) encode(v any, depth int) error {
	switch x := v.(type) {
	case nil:
		e.w.WriteString("null")
	case bool:
		if x {
			e.w.WriteString("true")
		} else {
			e.w.WriteString("false")
		}
	case string:
		writePyString(e.w, x)
	case json.Number:
		e.w.WriteString(pyNumber(x))
	case int:
		e.w.WriteString(strconv.FormatInt(int64(x), 10))
	case int64:
		e.w.WriteString(strconv.FormatInt(x, 10))
	case int32:
		e.w.WriteString(strconv.FormatInt(int64(x), 10))
	case uint64:
		e.w.WriteString(strconv.FormatUint(x, 10))
	case uint:
		e.w.WriteString(strconv.FormatUint(uint64(x), 10))
	case float64:
		s, err := goFloat(x)
		if err != nil {
			return err
		}
		e.w.WriteString(s)
	case float32:
		s, err := goFloat(float64(x))
		if err != nil {
			return err
		}
		e.w.WriteString(s)
	case map[string]any:
		return e.encodeMap(x, depth)
	case MimeBundle:
		return e.encodeMap(map[string]any(x), depth)
	case []any:
		if len(x) == 0 {
			e.w.WriteString("[]")
			return nil
		}
		e.w.WriteByte('[')
		for i, item := range x {
			if i > 0 {
				e.w.WriteByte(',')
			}
			e.newline(depth + 1)
			if err := e.encode(item, depth+1); err != nil {
				return err
			}
		}
		e.newline(depth)
		e.w.WriteByte(']')
	case []string:
		items := make([]any, len(x))
		for i, s := range x {
			items[i] = s
		}
		return e.encode(items, depth)
	case json.RawMessage:
		g, err := decodeGeneric(x)
		if err != nil {
			return err
		}
		return e.encode(g, depth)
	default:
		g, err := toGeneric(v)
		if err != nil {
			return err
		}
		return e.encode(g, depth)
	}
	return nil
}

func (e *pyEncoder) encodeMap(m map[string]any, depth int) error {
	if len(m) == 0 {
		e.w.WriteString("{}")
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Byte order of UTF-8 equals code point order, which is what Python's sort_keys uses.
	sort.Strings(keys)
	e.w.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			e.w.WriteByte(',')
		}
		e.newline(depth + 1)
		writePyString(e.w, k)
		e.w.WriteString(": ")
		if err := e.encode(m[k], depth+1); err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
	}
	e.newline(depth)
	e.w.WriteByte('}')
	return nil
}

// toGeneric turns any Go value (a struct, a typed map or slice) into the generic tree through
// encoding/json, keeping numbers as json.Number.
func toGeneric(v any) (any, error) {
	rv := reflect.ValueOf(v)
	kind := rv.Kind()
	switch v.(type) {
	case json.Marshaler, encoding.TextMarshaler:
		kind = reflect.Struct // their own encoding wins
	}
	switch kind {
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return rv.Uint(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return rv.Elem().Interface(), nil
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return nil, nil
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			break // []byte: base64, as encoding/json does
		}
		items := make([]any, rv.Len())
		for i := range items {
			items[i] = rv.Index(i).Interface()
		}
		return items, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		if rv.IsNil() {
			return nil, nil
		}
		m := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			m[it.Key().String()] = it.Value().Interface()
		}
		return m, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	return decodeGeneric(b)
}

func decodeGeneric(b []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var g any
	if err := dec.Decode(&g); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	return g, nil
}

// goFloat formats a float64 built in Go. Whole numbers are written as integers, as encoding/json (and
// JupyterLab) write them: a Go float64 is often an integer that lost its type in json.Unmarshal (e.g.
// language_info.codemirror_mode.version), and Python reading "3" gets back the int it sent. Other values
// get Python's repr, which any JSON reader parses to the same float.
func goFloat(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", fmt.Errorf("%w: %v", ErrNotJSON, f)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		if f == 0 {
			return "0", nil
		}
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	}
	return pyFloat(f)
}

// pyFloat formats f as Python's float.__repr__ (shortest round-tripping digits; exponent form below
// 1e-4 and from 1e16 up).
func pyFloat(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", fmt.Errorf("%w: %v", ErrNotJSON, f)
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0", nil
		}
		return "0.0", nil
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expS, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expS)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	if exp >= -4 && exp < 16 {
		if exp < 0 {
			b.WriteString("0.")
			b.WriteString(strings.Repeat("0", -exp-1))
			b.WriteString(digits)
		} else if len(digits) <= exp+1 {
			b.WriteString(digits)
			b.WriteString(strings.Repeat("0", exp+1-len(digits)))
			b.WriteString(".0")
		} else {
			b.WriteString(digits[:exp+1])
			b.WriteByte('.')
			b.WriteString(digits[exp+1:])
		}
		return b.String(), nil
	}
	b.WriteString(digits[:1])
	if len(digits) > 1 {
		b.WriteByte('.')
		b.WriteString(digits[1:])
	}
	b.WriteByte('e')
	if exp < 0 {
		b.WriteByte('-')
		exp = -exp
	} else {
		b.WriteByte('+')
	}
	if exp < 10 {
		b.WriteByte('0')
	}
	b.WriteString(strconv.Itoa(exp))
	return b.String(), nil
}

const hexDigits = "0123456789abcdef"

// writePyString quotes s as Python's json with ensure_ascii=False: only '"', '\\' and C0 controls are
// escaped (not '<', '>', '&', U+2028/9 as Go's encoder would). Invalid UTF-8 becomes U+FFFD.
func writePyString(w *bufio.Writer, s string) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	w.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		w.WriteString(s[start:i])
		switch c {
		case '"':
			w.WriteString(`\"`)
		case '\\':
			w.WriteString(`\\`)
		case '\n':
			w.WriteString(`\n`)
		case '\r':
			w.WriteString(`\r`)
		case '\t':
			w.WriteString(`\t`)
		case '\b':
			w.WriteString(`\b`)
		case '\f':
			w.WriteString(`\f`)
		default:
			w.WriteString(`\u00`)
			w.WriteByte(hexDigits[c>>4])
			w.WriteByte(hexDigits[c&0xf])
		}
		start = i + 1
	}
	w.WriteString(s[start:])
	w.WriteByte('"')
}

// splitLines splits s as Python's str.splitlines(keepends=True).
func splitLines(s string) []any {
	lines := []any{}
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		end := -1
		switch r {
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			end = i + size
		case '\r':
			end = i + 1
			if i+1 < len(s) && s[i+1] == '\n' {
				end = i + 2
			}
		}
		if end < 0 {
			i += size
			continue
		}
		lines = append(lines, s[start:end])
		start, i = end, end
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// pyNumber renders a JSON number as Python's json round trip does: integers keep every digit (Python
// ints are unbounded), other numbers go through float and come out as float.__repr__.
func pyNumber(n json.Number) string {
	s := string(n)
	if s == "" {
		return "0"
	}
	if !strings.ContainsAny(s, ".eE") {
		if strings.Trim(s, "-0") == "" {
			return "0"
		}
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s // out of float range: keep the text rather than write Infinity
	}
	r, err := pyFloat(f)
	if err != nil {
		return s
	}
	return r
}

package kernel

import (
	"strings"
	"unicode/utf8"
)

// Stream text is held in fixed-size chunks so that a flood costs one copy per byte: appending never
// re-copies what is held, dropping from the front frees whole chunks, and the string is built once.

const textChunk = 32 << 10

// chunkText is text that grows at the back and is trimmed at the front.
type chunkText struct {
	chunks [][]byte // each has cap textChunk; chunks[0][off:] is the first byte held
	off    int
	n      int // bytes held
}

func (t *chunkText) len() int { return t.n }

// write appends p, taking spare chunks from pool before allocating.
func (t *chunkText) write(p []byte, pool *[][]byte) {
	t.n += len(p)
	for len(p) > 0 {
		if k := len(t.chunks); k == 0 || len(t.chunks[k-1]) == cap(t.chunks[k-1]) {
			var c []byte
			if m := len(*pool); m > 0 {
				c, *pool = (*pool)[m-1][:0], (*pool)[:m-1]
			} else {
				c = make([]byte, 0, textChunk)
			}
			t.chunks = append(t.chunks, c)
		}
		last := &t.chunks[len(t.chunks)-1]
		k := copy((*last)[len(*last):cap(*last)], p)
		*last = (*last)[:len(*last)+k]
		p = p[k:]
	}
}

// trimFront drops at least n bytes from the front (more to reach the start of a UTF-8 sequence, so a
// rune is never split) and returns how many it dropped. Spent chunks go back to pool.
func (t *chunkText) trimFront(n int, pool *[][]byte) int {
	dropped := 0
	for t.n > 0 && (dropped < n || t.chunks[0][t.off]&0xC0 == 0x80) {
		c := t.chunks[0]
		k := min(len(c)-t.off, n-dropped)
		if k <= 0 { // n reached inside a rune: drop its continuation bytes one by one
			k = 1
		}
		t.off += k
		t.n -= k
		dropped += k
		if t.off == len(c) {
			if len(*pool) < 4 {
				*pool = append(*pool, c)
			}
			t.chunks[0] = nil
			t.chunks = t.chunks[1:]
			t.off = 0
		}
	}
	return dropped
}

// appendTo writes the text held to b.
func (t *chunkText) appendTo(b *strings.Builder) {
	for i, c := range t.chunks {
		if i == 0 {
			c = c[t.off:]
		}
		b.Write(c)
	}
}

// runeCut returns the longest prefix length of p, at most n, that does not end inside a UTF-8 sequence.
func runeCut(p []byte, n int) int {
	if n >= len(p) {
		return len(p)
	}
	n = max(n, 0)
	for n > 0 && p[n]&0xC0 == 0x80 {
		n--
	}
	return n
}

// applyOverwrites shows stream text as a notebook does once the cell is done: backspaces erase, then
// carriage returns rewrite their line (nbclient's coalesce_streams and nbconvert's
// CoalesceStreamsPreprocessor), so a progress bar ends as its last state. Both passes are linear.
func applyOverwrites(s string) string {
	if strings.IndexByte(s, '\b') >= 0 {
		s = applyBackspace(s)
	}
	if strings.IndexByte(s, '\r') >= 0 {
		s = applyCR(s)
	}
	return s
}

// applyBackspace cancels each backspace with the character before it on its line (a newline is never
// erased; a backspace with nothing before it on its line stays, and a later one can cancel it). This is
// the rewrite JupyterLab repeats to a fixed point (remove "[^\n]\b"), reduced innermost first with a
// stack, so it is linear where the repeated regexp is quadratic.
func applyBackspace(s string) string {
	out := make([]byte, 0, len(s))
	line := 0 // where the current line starts in out
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\b' && len(out) > line:
			_, n := utf8.DecodeLastRune(out[line:])
			out = out[:len(out)-n]
		case c == '\n':
			out = append(out, c)
			line = len(out)
		default:
			out = append(out, c)
		}
	}
	return string(out)
}

// applyCR removes, on each line, everything up to its last carriage return that is followed by
// another character of the line: nbclient's re.sub(r".*\r(?=[^\n])", "", text). "\r\n" endings stay.
func applyCR(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		line, rest, nl := s, "", false
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, rest, nl = s[:i], s[i+1:], true
		}
		if len(line) > 1 {
			if j := strings.LastIndexByte(line[:len(line)-1], '\r'); j >= 0 {
				line = line[j+1:]
			}
		}
		b.WriteString(line)
		if nl {
			b.WriteByte('\n')
		}
		s = rest
	}
	return b.String()
}

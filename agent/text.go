package agent

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Caps on text the model reads (seed §2): each stream keeps 4000 head + 4000 tail characters; values
// and tracebacks keep 4000 in all.
const (
	StreamCapChars = 8000
	ValueCapChars  = 4000
)

// ansiRE matches CSI escape sequences (colours, cursor moves) that IPython puts in tracebacks.
var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// StripANSI removes terminal escape sequences.
func StripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

// TrimMiddle keeps the head and tail of s (in characters, not bytes) when it is longer than limit,
// with an explicit marker saying how much was cut, so the model knows output is missing.
func TrimMiddle(s string, limit int) string {
	n := utf8.RuneCountInString(s)
	if limit <= 0 || n <= limit {
		return s
	}
	r := []rune(s)
	head := limit / 2
	tail := limit - head
	return string(r[:head]) + fmt.Sprintf("\n... [%d chars omitted] ...\n", n-head-tail) + string(r[n-tail:])
}

// capText caps a whole tool result text the way the seed does (cut, then a marker).
func capText(s string) string {
	if utf8.RuneCountInString(s) <= MaxTextChars {
		return s
	}
	r := []rune(s)
	return string(r[:MaxTextChars]) + "\n[truncated]"
}

// joinTraceback turns an nbformat traceback (list of ANSI-coloured frames) into plain text.
func joinTraceback(tb []string, ename, evalue string) string {
	if len(tb) == 0 {
		if evalue == "" {
			return ename
		}
		return ename + ": " + evalue
	}
	return strings.TrimRight(StripANSI(strings.Join(tb, "\n")), "\n")
}

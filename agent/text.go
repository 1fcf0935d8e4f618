package agent

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Caps on text the model reads (the original's §2): each stream keeps 4000 head + 4000 tail characters; values
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

// capText caps a whole tool result text the way the original does (cut, then a marker).
func capText(s string) string {
	if utf8.RuneCountInString(s) <= MaxTextChars {
		return s
	}
	r := []rune(s)
	return string(r[:MaxTextChars]) + "\n[truncated]"
}

// joinTraceback turns an nbformat traceback (IPython's coloured, verbose frames) into the plain
// "Traceback (most recent call last):" text the original's cells return (traceback.format_exc): one
// location line and the current source line per frame, then the exception. IPython's context lines
// around each frame are left out, so a failing robot call costs a few lines, not a page. Without
// robotFrames the robot package's frames are left out too.
func joinTraceback(tb []string, ename, evalue string, robotFrames bool) string {
	if len(tb) == 0 {
		if evalue == "" {
			return ename
		}
		return ename + ": " + evalue
	}
	var out []string
	for i, el := range tb {
		el = strings.TrimRight(StripANSI(el), "\n")
		first, _, _ := strings.Cut(strings.TrimLeft(el, " \n"), "\n")
		switch {
		case strings.Trim(el, "-\n ") == "" && el != "":
			continue // IPython's rule line
		case tracebackHeaderRE.MatchString(first):
			out = append(out, "Traceback (most recent call last):")
		case !robotFrames && i < len(tb)-1 && robotFrameRE.MatchString(first):
			continue // never the last element, the exception line: its class name is the agent's to choose
		case strings.HasPrefix(first, "File ") || strings.HasPrefix(first, "Cell In["):
			out = append(out, compactFrame(el, first))
		default:
			out = append(out, el)
		}
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n")
}

var (
	tracebackHeaderRE = regexp.MustCompile(`^\S+\s+Traceback \(most recent call last\)$`)
	// robotFrameRE is a frame in the robot package (pyrualean_robot: the sealed kernel's proxy, or the
	// robot itself in an unsealed one): the API's implementation, not the agent's code.
	robotFrameRE = regexp.MustCompile(`^File \S*/pyrualean_robot/\S*:\d+, in `)
	// currentLineRE is IPython's marker of the line a frame is executing: "----> 12 code".
	currentLineRE = regexp.MustCompile(`^\s*-*> ?\d+ ?(.*)$`)
)

// compactFrame keeps a frame's location and its current line; a frame without one (a SyntaxError's
// caret block) stays as IPython wrote it.
func compactFrame(el, location string) string {
	for _, line := range strings.Split(el, "\n") {
		if m := currentLineRE.FindStringSubmatch(line); m != nil {
			return "  " + location + "\n    " + strings.TrimSpace(m[1])
		}
	}
	return el
}

// cellRefRE is IPython's name of a frame in a notebook cell: "Cell In[7], line 3".
var cellRefRE = regexp.MustCompile(`Cell In\[(\d+)\], line (\d+)`)

// relabelCells names the cells a traceback's frames are in as the episode knows them: `File "<cell 3>",
// line 3` (the agent's call 3, as the original's tracebacks read) instead of IPython's execution count
// (which the setup cell and people's cells move on). Counts not in labels stay as they are.
func relabelCells(text string, labels map[int]string) string {
	if len(labels) == 0 {
		return text
	}
	return cellRefRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := cellRefRE.FindStringSubmatch(m)
		n, _ := strconv.Atoi(sub[1])
		if l, ok := labels[n]; ok {
			return fmt.Sprintf("File %q, line %s", l, sub[2])
		}
		return m
	})
}

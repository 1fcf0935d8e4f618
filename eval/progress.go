package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// tally is what the live view shows: counts per arm, tokens, cost.
type tally struct {
	mu      sync.Mutex
	solved  map[string]int
	ended   map[string]int
	inTok   int
	cost    float64
	running int
	done    int
	total   int
}

func (t *tally) add(ev Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running, t.done, t.total = ev.Running, ev.Done, ev.Total
	if ev.Kind != EventFinish && ev.Kind != EventSkip {
		return
	}
	t.ended[ev.Arm]++
	if ev.Success != nil && *ev.Success {
		t.solved[ev.Arm]++
	}
	t.inTok += ev.InTok
	t.cost += ev.CostUSD
}

func (t *tally) line() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var arms []string
	for _, a := range slices.Sorted(maps.Keys(t.ended)) {
		arms = append(arms, fmt.Sprintf("%s %d/%d", a, t.solved[a], t.ended[a]))
	}
	s := fmt.Sprintf("running %d  solved %s  in_tok %d", t.running, strings.Join(arms, " "), t.inTok)
	if t.cost > 0 {
		s += fmt.Sprintf("  $%.4f", t.cost)
	}
	return s
}

// View shows a suite's events: Progress on a terminal, Lines otherwise, JSON for --json.
type View interface {
	Event(ev Event)
	Close()
}

// Lines prints one line per finished episode (and per retry), for logs and pipes.
type Lines struct {
	W io.Writer
	t tally
}

func NewLines(w io.Writer) *Lines {
	return &Lines{W: w, t: tally{solved: map[string]int{}, ended: map[string]int{}}}
}

func (l *Lines) Event(ev Event) {
	l.t.add(ev)
	switch ev.Kind {
	case EventSuiteStart:
		fmt.Fprintf(l.W, "suite: %d episodes, %d to run\n", ev.Total, ev.Total-ev.Done)
	case EventRetry:
		fmt.Fprintf(l.W, "retry   %s attempt %d: %s (%s), again in %.0fs\n", ev.ID, ev.Attempt, ev.Status, ev.Error, ev.Backoff)
	case EventFinish:
		ok := "-"
		if ev.Success != nil {
			ok = map[bool]string{true: "Y", false: "N"}[*ev.Success]
		}
		fmt.Fprintf(l.W, "[%d/%d] %s %s ok=%s wall=%.1fs  (%s)\n", ev.Done, ev.Total, ev.ID, ev.Status, ok, ev.WallS, l.t.line())
	}
}

func (l *Lines) Close() {}

// JSON writes every event as one JSON line.
type JSON struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func NewJSON(w io.Writer) *JSON { return &JSON{enc: json.NewEncoder(w)} }

func (j *JSON) Event(ev Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.enc.Encode(ev)
}

func (j *JSON) Close() {}

// Progress is the terminal view: a bar with done/total and ETA, and a line with the running
// episodes, success so far per arm, tokens and cost.
type Progress struct {
	p   *mpb.Progress
	bar *mpb.Bar
	t   tally
	w   io.Writer
}

func NewProgress(w io.Writer) *Progress {
	return &Progress{w: w, t: tally{solved: map[string]int{}, ended: map[string]int{}}}
}

func (p *Progress) Event(ev Event) {
	p.t.add(ev)
	switch ev.Kind {
	case EventSuiteStart:
		// Auto refresh even where w is no terminal (eval picks this view for terminals; tests use a buffer).
		p.p = mpb.New(mpb.WithOutput(p.w), mpb.WithRefreshRate(200*time.Millisecond), mpb.WithAutoRefresh())
		p.bar = p.p.AddBar(int64(ev.Total),
			mpb.PrependDecorators(decor.Name("eval "), decor.CountersNoUnit("%d/%d")),
			mpb.AppendDecorators(decor.Name(" ETA "), decor.EwmaETA(decor.ET_STYLE_GO, 30),
				decor.Any(func(decor.Statistics) string { return "  " + p.t.line() })))
		p.bar.SetCurrent(int64(ev.Done))
	case EventStart:
		if p.bar != nil {
			p.bar.SetCurrent(int64(ev.Done)) // refresh the running count
		}
	case EventFinish:
		if p.bar != nil {
			p.bar.EwmaIncrement(time.Duration(ev.WallS * float64(time.Second)))
		}
	}
}

func (p *Progress) Close() {
	if p.p == nil {
		return
	}
	if p.bar != nil && !p.bar.Completed() {
		p.bar.Abort(false)
	}
	p.p.Wait()
}

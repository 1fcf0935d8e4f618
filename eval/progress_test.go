package eval

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestViews: each view says what a short suite did: the counts, each arm's solved share, tokens and
// cost, a retry, and (JSON) every event.
func TestViews(t *testing.T) {
	yes, no := true, false
	events := []Event{
		{Kind: EventSuiteStart, Total: 3, Done: 1},
		{Kind: EventStart, ID: "a", Arm: "cells", Attempt: 1, Total: 3, Done: 1, Running: 1},
		{Kind: EventRetry, ID: "a", Arm: "cells", Attempt: 1, Status: "boot_error", Error: "robot server died", Backoff: 2, Total: 3, Done: 1},
		{Kind: EventStart, ID: "a", Arm: "cells", Attempt: 2, Total: 3, Done: 1, Running: 1},
		{Kind: EventFinish, ID: "a", Arm: "cells", Status: "completed", Success: &yes, WallS: 1.5, InTok: 1200, CostUSD: 0.01, Total: 3, Done: 2},
		{Kind: EventStart, ID: "b", Arm: "tools", Attempt: 1, Total: 3, Done: 2, Running: 1},
		{Kind: EventFinish, ID: "b", Arm: "tools", Status: "completed", Success: &no, WallS: 2, InTok: 800, CostUSD: 0.02, Total: 3, Done: 3},
		{Kind: EventSuiteEnd, Total: 3, Done: 3},
	}
	cases := []struct {
		name string
		view func(*bytes.Buffer) View
		want []string
	}{
		{"lines", func(b *bytes.Buffer) View { return NewLines(b) }, []string{
			"suite: 3 episodes, 2 to run\n",
			"retry   a attempt 1: boot_error (robot server died), again in 2s\n",
			"[2/3] a completed ok=Y wall=1.5s  (running 0  solved cells 1/1  in_tok 1200  $0.0100)\n",
			"[3/3] b completed ok=N wall=2.0s  (running 0  solved cells 1/1 tools 0/1  in_tok 2000  $0.0300)\n",
		}},
		{"progress", func(b *bytes.Buffer) View { return NewProgress(b) }, []string{
			"eval 3/3", "solved cells 1/1 tools 0/1  in_tok 2000  $0.0300",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			v := c.view(&b)
			for _, ev := range events {
				v.Event(ev)
			}
			v.Close()
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		var b bytes.Buffer
		v := NewJSON(&b)
		for _, ev := range events {
			v.Event(ev)
		}
		v.Close()
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if len(lines) != len(events) {
			t.Fatalf("%d lines for %d events", len(lines), len(events))
		}
		for i, l := range lines {
			var ev Event
			if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Kind != events[i].Kind || ev.ID != events[i].ID {
				t.Errorf("line %d %s: %+v (%v)", i, l, ev, err)
			}
		}
	})
}

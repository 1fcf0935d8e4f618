package eval

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Status is a eval folder's state for `eval --status`, read from the manifest and the run folders
// (so it is current while another process runs the suite).
type Status struct {
	Runner   RunnerInfo     `json:"runner"`
	Alive    bool           `json:"runner_alive"`
	Total    int            `json:"total"`
	Finished int            `json:"finished"`
	Statuses map[string]int `json:"statuses"`
	Solved   map[string]int `json:"solved_per_arm"`
	Ended    map[string]int `json:"finished_per_arm"`
	Running  []RunningEp    `json:"running"`
	// Nodes counts the finished episodes per Ray node id (--engine ray; empty locally), and Retried
	// names the episodes that took more than one attempt, so a lost worker or node shows.
	Nodes   map[string]int `json:"finished_per_node,omitempty"`
	Retried []RetriedEp    `json:"retried,omitempty"`
}

// RetriedEp is an episode that took more than one attempt.
type RetriedEp struct {
	ID       string `json:"id"`
	Attempts int    `json:"attempts"`
	Status   string `json:"status"`
	Node     string `json:"node,omitempty"`
}

// RunningEp is an episode in flight.
type RunningEp struct {
	ID       string  `json:"id"`
	Attempt  int     `json:"attempt"`
	ElapsedS float64 `json:"elapsed_s"`
	Turns    int     `json:"turns"`
	LLMCalls int     `json:"llm_calls"`
}

// StatusOf summarises a manifest and its records.
func StatusOf(m *Manifest, recs []Record) Status {
	s := Status{Runner: m.Runner, Total: len(recs), Statuses: map[string]int{}, Solved: map[string]int{}, Ended: map[string]int{}}
	s.Alive = m.Runner.EndedAt == "" && pidAlive(m.Runner.PID)
	for _, r := range recs {
		st := r.Status
		if st == StateRunning && !s.Alive {
			st = "interrupted"
		}
		s.Statuses[st]++
		if r.Attempts > 1 {
			s.Retried = append(s.Retried, RetriedEp{ID: r.ID, Attempts: r.Attempts, Status: st, Node: r.Node})
		}
		if !Retryable(r.Status) && r.Node != "" {
			if s.Nodes == nil {
				s.Nodes = map[string]int{}
			}
			s.Nodes[r.Node]++
		}
		if !Retryable(r.Status) {
			s.Finished++
			s.Ended[r.Arm]++
			if r.Success != nil && *r.Success {
				s.Solved[r.Arm]++
			}
		}
		if st == StateRunning {
			re := RunningEp{ID: r.ID, Attempt: r.Attempts, Turns: r.Row.Turns, LLMCalls: r.Row.LLMCalls}
			if t, err := time.Parse(time.RFC3339, r.StartedAt); err == nil {
				re.ElapsedS = time.Since(t).Round(time.Second).Seconds()
			}
			s.Running = append(s.Running, re)
		}
	}
	return s
}

// WriteStatus prints a Status.
func WriteStatus(w io.Writer, s Status) {
	state := "not running"
	if s.Alive {
		state = fmt.Sprintf("running (pid %d, %d jobs, since %s)", s.Runner.PID, s.Runner.Jobs, s.Runner.StartedAt)
	}
	fmt.Fprintf(w, "suite %s: %d/%d finished\n", state, s.Finished, s.Total)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.Statuses)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, s.Statuses[k]))
	}
	fmt.Fprintf(w, "statuses: %s\n", strings.Join(parts, " "))
	for _, a := range slices.Sorted(maps.Keys(s.Ended)) {
		fmt.Fprintf(w, "%s: solved %d/%d\n", a, s.Solved[a], s.Ended[a])
	}
	if len(s.Nodes) > 0 {
		parts = parts[:0]
		for _, n := range slices.Sorted(maps.Keys(s.Nodes)) {
			parts = append(parts, fmt.Sprintf("%s=%d", shortNode(n), s.Nodes[n]))
		}
		fmt.Fprintf(w, "finished per Ray node: %s\n", strings.Join(parts, " "))
	}
	for _, r := range s.Retried {
		on := ""
		if r.Node != "" {
			on = " on node " + shortNode(r.Node)
		}
		fmt.Fprintf(w, "  retried %s: %d attempts, %s%s\n", r.ID, r.Attempts, r.Status, on)
	}
	for _, r := range s.Running {
		fmt.Fprintf(w, "  running %s (attempt %d, %.0fs, %d turns, %d llm calls)\n", r.ID, r.Attempt, r.ElapsedS, r.Turns, r.LLMCalls)
	}
}

// shortNode is a Ray node id's first 8 hex digits, as Ray's own tools print it.
func shortNode(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	return err == nil && p.Signal(syscall.Signal(0)) == nil
}

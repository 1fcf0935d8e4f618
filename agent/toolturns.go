package agent

import (
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/atomicfile"
)

// ToolTurnsFile is the run folder's per-tool-call table, beside turns.jsonl (one row per LLM call).
const ToolTurnsFile = "tool_turns.json"

// ToolTurn is one python or primitive call: a row of tool_turns.json, as the original writes it.
type ToolTurn struct {
	Index        int      `json:"index"`
	Tool         string   `json:"tool"`
	ElapsedS     float64  `json:"elapsed_s"`
	OK           bool     `json:"ok"` // the cell ran without an exception
	Moved        bool     `json:"moved"`
	EnvSteps     int      `json:"env_steps"`
	Terminated   bool     `json:"terminated"` // the benchmark predicate had fired by the cell's end
	SandboxFlags []string `json:"sandbox_flags"`
}

// toolTurn is a tool_turns.json row for one call: its status ("ok" when the cell ran without an
// exception), time and, for a cell, what the judge said of it (nil for a call that ran no cell).
func toolTurn(tool, status string, elapsed time.Duration, r *cellReport) ToolTurn {
	row := ToolTurn{Tool: tool, ElapsedS: Round(elapsed.Seconds(), 3), OK: status == "ok", SandboxFlags: []string{}}
	if r != nil {
		row.Moved, row.EnvSteps = r.Moved, r.EnvSteps
		row.Terminated = r.Success != nil && *r.Success
		if r.SandboxFlags != nil {
			row.SandboxFlags = r.SandboxFlags
		}
	}
	return row
}

// toolTurns is tool_turns.json: one row per tool call of the agent's, finish and refused calls
// included (the original counts every call), numbered from 0 in call order. The file is small and
// rewritten whole, atomically, so a killed play leaves every finished call on disk.
type toolTurns struct {
	path string
	mu   sync.Mutex
	rows []ToolTurn
}

// add appends a row and returns how many there are.
func (t *toolTurns) add(row ToolTurn) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	row.Index = len(t.rows)
	t.rows = append(t.rows, row)
	return len(t.rows), atomicfile.WriteJSON(t.path, t.rows)
}

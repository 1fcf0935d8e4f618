package agent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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

// appendToolTurn adds one row to tool_turns.json. Cells run one at a time (callMu), and the file is
// small, so it is rewritten whole, atomically: a killed play leaves every finished turn on disk.
func appendToolTurn(dir string, i int, tool, status string, elapsed time.Duration, r *cellReport) error {
	row := ToolTurn{Index: i, Tool: tool, ElapsedS: round3(elapsed.Seconds()), OK: status == "ok", SandboxFlags: []string{}}
	if r != nil {
		row.Moved, row.EnvSteps = r.Moved, r.EnvSteps
		row.Terminated = r.Success != nil && *r.Success
		if r.SandboxFlags != nil {
			row.SandboxFlags = r.SandboxFlags
		}
	}
	path := filepath.Join(dir, ToolTurnsFile)
	var rows []ToolTurn
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &rows); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return atomicfile.WriteJSON(path, append(rows, row))
}

package robotapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
)

// SolutionCall is one primitive call of a task's reference solution as the tools arm makes it: the
// tool, its arguments and the brief result it gave (recorded from a replay of the solution, seed 0).
type SolutionCall struct {
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
	Result json.RawMessage `json:"result"`
}

// SolutionCallsPath is the recorded primitive calls of a task's reference solution (repo-relative):
// robotapi/solutions/<robot>/tools/<task>.jsonl, one SolutionCall a line.
func SolutionCallsPath(robot, task string) string {
	return filepath.Join("robotapi", "solutions", robot, "tools", task+".jsonl")
}

// SolutionCalls returns a task's reference solution as primitive calls (the tools arm's worked
// examples); a task without such a file is an error wrapping os.ErrNotExist.
func SolutionCalls(robot, task string) ([]SolutionCall, error) {
	src, err := readSolution(robot, task, SolutionCallsPath, "solution calls")
	if err != nil {
		return nil, err
	}
	var out []SolutionCall
	sc := bufio.NewScanner(bytes.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var c SolutionCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil || c.Tool == "" {
			return nil, fmt.Errorf("robotapi: %s line %d: not a {tool, args, result} object (%v)", SolutionCallsPath(robot, task), n, err)
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

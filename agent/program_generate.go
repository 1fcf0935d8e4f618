package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
)

// RunProgramOnce submits one program through the episode's run_program tool (the original's `pyrualean run
// --policy`) and returns how it ended (completed | finished | error | timeout).
func RunProgramOnce(ctx context.Context, ep Driver, code string) (string, error) {
	args, _ := json.Marshal(map[string]string{"code": code})
	res, err := ep.Toolkit().Call(ctx, ToolRunProgram, args)
	if err != nil {
		return "", err
	}
	st := ProgramStatus(res.Text)
	if st == "" {
		return "", fmt.Errorf("run_program refused: %s", res.Text)
	}
	return st, nil
}

var fencedBlock = regexp.MustCompile("(?ms)^[ \t]*```[ \t]*(python|py|python3)?[ \t]*\r?\n(.*?)^[ \t]*```")

// LargestPythonBlock returns the longest fenced code block tagged python (or untagged) in text.
func LargestPythonBlock(text string) string {
	best := ""
	for _, m := range fencedBlock.FindAllStringSubmatch(text, -1) {
		if len(m[2]) > len(best) {
			best = m[2]
		}
	}
	return best
}

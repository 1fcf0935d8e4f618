package runtimes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// Action is one fixed agent action for the scripted runtime: a tool name and its JSON arguments.
type Action struct {
	Tool string
	Args json.RawMessage
}

// LoadActions reads the actions to play from an episode trace (.ipynb: its agent and tool cells and
// its finish) or a percent-format script (.py: each `# %%` code cell is one python call).
func LoadActions(path, arm string) ([]Action, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(filepath.Ext(path), ".ipynb") {
		nb, err := notebooks.Read(strings.NewReader(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return actionsFromNotebook(nb, arm)
	}
	switch arm {
	case spec.ArmTools:
		return nil, fmt.Errorf("%s: a script of cells replays only in the cells arm (--arm cells)", path)
	case spec.ArmProgram:
		return nil, fmt.Errorf("%s: a script of cells replays only in the cells arm (for one program: pyrualean run --policy %s)", path, path)
	}
	var acts []Action
	for _, cell := range robotapi.SplitPercentCells(string(b)) {
		acts = append(acts, pythonAction(cell))
	}
	if len(acts) == 0 {
		return nil, fmt.Errorf("%s: no code cells", path)
	}
	return acts, nil
}

func pythonAction(code string) Action {
	args, _ := json.Marshal(map[string]string{"code": code})
	return Action{Tool: "python", Args: args}
}

func actionsFromNotebook(nb *notebooks.Notebook, arm string) ([]Action, error) {
	var acts []Action
	for _, c := range nb.Cells {
		meta := notebooks.CellMetaOf(c)
		author, tool := meta.Author, meta.Tool
		switch {
		case c.CellType == notebooks.CellMarkdown && meta.Finish != nil:
			args, _ := json.Marshal(map[string]string{"status": meta.Finish.Status, "summary": meta.Finish.Summary})
			acts = append(acts, Action{Tool: "finish", Args: args})
		case c.CellType != notebooks.CellCode:
		case author == notebooks.AuthorSetup || author == notebooks.AuthorHuman:
		case tool == agent.ToolRunProgram && arm == spec.ArmProgram && meta.Args != nil,
			author == notebooks.AuthorTool && arm == spec.ArmTools && meta.Args != nil:
			args, _ := json.Marshal(meta.Args)
			acts = append(acts, Action{Tool: tool, Args: args})
		default:
			// agent cells, tool cells replayed in the cells arm, and plain notebooks' code cells.
			if strings.TrimSpace(c.Source) != "" && !(author == "" && strings.Contains(c.Source, "make(")) {
				acts = append(acts, pythonAction(c.Source))
			}
		}
	}
	if len(acts) == 0 {
		return nil, fmt.Errorf("no agent cells to replay")
	}
	if arm == spec.ArmTools || arm == spec.ArmProgram {
		for _, a := range acts {
			if a.Tool == "python" {
				return nil, fmt.Errorf("the trace holds python cells, which the %s arm cannot replay (use --arm cells)", arm)
			}
		}
	}
	return acts, nil
}

// RunScript plays fixed actions through the episode's toolkit with no model (the scripted runtime,
// `--runtime replay` on the command line). Without a finish among
// the actions it finishes with "success" if the environment says so, else "failure".
func RunScript(ctx context.Context, ep agent.Driver, actions []Action) error {
	tk := ep.Toolkit()
	for _, a := range actions {
		if ep.Finished() {
			return nil
		}
		// Each action stands for a decision: a person's pause holds it here.
		if _, err := ep.AwaitTurn(ctx); err != nil {
			return err
		}
		res, err := tk.Call(ctx, a.Tool, a.Args)
		if err != nil {
			return err
		}
		if res.Finished {
			break
		}
	}
	if ep.Finished() {
		return nil
	}
	status := "failure"
	if ok := ep.Success(); ok != nil && *ok {
		status = "success"
	}
	args, _ := json.Marshal(map[string]string{"status": status, "summary": "replay: the recorded actions ran out without a finish"})
	_, err := tk.Call(ctx, "finish", args)
	return err
}

// scriptedRuntime plays the same actions on every episode it drives.
type scriptedRuntime struct {
	nothingToStart
	actions []Action
}

func (scriptedRuntime) Model() string { return "replay" }
func (r scriptedRuntime) Run(ctx context.Context, ep agent.Driver) error {
	return RunScript(ctx, ep, r.actions)
}

func newScripted(s Settings) (Runtime, error) {
	if s.From == "" {
		return nil, fmt.Errorf("--runtime replay needs --from TRACE.ipynb|CELLS.py")
	}
	acts, err := LoadActions(s.From, s.Arm)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	return scriptedRuntime{actions: acts}, nil
}

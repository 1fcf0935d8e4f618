package agent

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pyrualean/pyrualean/atomicfile"
	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/robotapi"
)

// briefing is what the model is given: the prompt (prompt.txt and the card images), the episode
// card, the toolkit and the robot's tools, and the API reference fetched while the kernel boots.
type briefing struct {
	prompt   Prompt
	card     Card
	tk       Toolkit
	tools    []ToolSpec // the robot's primitives as tools (offered in the tools arm)
	stateful map[string]bool
	refs     *references
}

func (e *Episode) writeCard(cardJSON []byte) error {
	var pretty any
	if err := json.Unmarshal(cardJSON, &pretty); err == nil {
		if m, ok := pretty.(map[string]any); ok {
			delete(m, "images") // stored as files in card/
		}
		if err := atomicfile.WriteJSON(filepath.Join(e.cfg.Out, "card.json"), pretty); err != nil {
			return err
		}
	}
	imgs, err := e.card.images()
	if err != nil {
		return err
	}
	if len(imgs) > 0 {
		dir := filepath.Join(e.cfg.Out, "card")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, im := range imgs {
			if err := atomicfile.Write(filepath.Join(dir, im.Name), im.PNG); err != nil {
				return err
			}
		}
	}
	e.prompt.Images = imgs
	return nil
}

// buildPrompt assembles prompt.txt: arm contract + API reference + robot knowledge + task card (+ guides).
func (e *Episode) buildPrompt(ctx context.Context) error {
	c := e.cfg
	format := robotapi.FormatText
	if c.Arm == ArmTools {
		format = robotapi.FormatTools
	}
	refs := e.refs.wait()
	if refs.err[format] != nil {
		return refs.err[format]
	}
	ref := refs.text[format]
	apiText := ref
	var err error
	if c.Arm == ArmTools {
		e.tools, err = ParseToolSchemas([]byte(ref))
		if err != nil {
			return err
		}
		apiText = toolsReference(e.tools)
	} else if refs.err[robotapi.FormatTools] == nil {
		// Only to tell stateful primitives apart in the ledger counts.
		e.tools, _ = ParseToolSchemas([]byte(refs.text[robotapi.FormatTools]))
	}
	e.stateful = map[string]bool{}
	for _, t := range e.tools {
		if t.Stateful {
			e.stateful[t.Name] = true
		}
	}
	var guides []string
	if c.Guides {
		guides, err = e.copyGuides()
		if err != nil {
			return err
		}
	}
	var examples []Example
	if c.PromptProfile == ProfileCompact {
		if examples, err = e.examples(ctx); err != nil {
			return err
		}
	}
	budgetS := c.Budget.Seconds()
	text := BuildPrompt(PromptParts{
		Profile: c.PromptProfile, Examples: examples,
		Arm: c.Arm, Images: c.Images, Feedback: c.Feedback, MaxTurns: c.MaxTurns, MaxPrograms: c.MaxPrograms, BudgetS: budgetS,
		MaxEnvSteps: e.card.MaxEnvSteps, APIReference: apiText, Knowledge: e.card.Knowledge,
		TaskCard: RenderCard(e.card), TaskLanguage: e.card.TaskLanguage, GuideFiles: guides, Cameras: e.card.Cameras, MotionCameras: e.card.MotionCameras,
	})
	e.prompt.Text = text
	if err := atomicfile.Write(filepath.Join(c.Out, "prompt.txt"), []byte(text)); err != nil {
		return err
	}
	switch c.Arm {
	case ArmTools:
		e.tk = &toolsToolkit{e: e}
	case ArmProgram:
		e.tk = &programToolkit{e: e}
	default:
		e.tk = &cellsToolkit{e: e}
	}
	e.mu.Lock()
	e.res.Prompt = e.prompt.Info()
	e.res.Prompt.Profile = c.PromptProfile
	e.res.TaskLanguage = e.card.TaskLanguage
	if e.res.Suite == "" {
		e.res.Suite = e.card.Suite
	}
	if e.res.Task == "" {
		e.res.Task = e.card.Task
	}
	e.mu.Unlock()
	_ = e.updateTraceMeta(func(m *notebooks.EpisodeMeta) {
		m.TaskLanguage, m.Task, m.PromptSHA256 = e.card.TaskLanguage, e.card.Task, e.prompt.Info().SHA256
		m.Budgets = e.budgetsMeta(e.card.MaxEnvSteps) // the robot's own step budget
	})
	return e.trace.AddMarkdown(RenderCard(e.card), notebooks.CellMeta{Author: notebooks.AuthorSetup, Kind: "task_card"}.Map())
}

// examples are the compact profile's worked examples: reference solutions of tasks from the robot's
// other task families (PickExamples). A robot without tasks or solutions gets none.
func (e *Episode) examples(ctx context.Context) ([]Example, error) {
	tasks, err := robotapi.Tasks(ctx, e.cfg.Robot)
	if err != nil {
		return nil, fmt.Errorf("compact prompt: %w", err)
	}
	own := e.card.Task
	if own == "" {
		own = e.cfg.Task
	}
	list := make([]ExampleTask, len(tasks))
	for i, t := range tasks {
		list[i] = ExampleTask{Name: t.Name, Family: t.Family, Instruction: t.Instruction}
	}
	var out []Example
	for _, t := range PickExamples(list, own, 3) {
		cells, err := robotapi.SolutionCells(e.cfg.Robot, t.Name)
		if err != nil {
			continue // a task without a reference solution is no example
		}
		out = append(out, Example{Task: t.Name, Instruction: t.Instruction, Cells: cells})
	}
	return out, nil
}

// guidesFS holds the arm-independent guides that ship with the agent.
//
//go:embed guides/*.md
var guidesFS embed.FS

// copyGuides copies the guides (ours, then the robot's own from pyrualean_robot/guides/<robot>/) into
// workspace/guides and returns their file names: the prompt says where they are, as the seed's does,
// instead of inlining them. The robot's knowledge files (<robot>.md, <robot>-novla.md) are already the
// prompt's knowledge section and are not copied (the full one would name VLA calls a no-vla run lacks).
func (e *Episode) copyGuides() ([]string, error) {
	type guide struct{ name, text string }
	var guides []guide
	entries, _ := fs.ReadDir(guidesFS, "guides")
	for _, en := range entries {
		b, err := guidesFS.ReadFile("guides/" + en.Name())
		if err != nil {
			return nil, err
		}
		guides = append(guides, guide{en.Name(), string(b)})
	}
	robotDir := filepath.Join(e.cfg.Root, "robotapi", "python", "pyrualean_robot", "guides", e.cfg.Robot)
	matches, _ := filepath.Glob(filepath.Join(robotDir, "*.md"))
	for _, m := range matches {
		if n := filepath.Base(m); n == e.cfg.Robot+".md" || n == e.cfg.Robot+"-novla.md" {
			continue
		}
		b, err := os.ReadFile(m)
		if err != nil {
			return nil, fmt.Errorf("guide: %w", err)
		}
		guides = append(guides, guide{filepath.Base(m), string(b)})
	}
	dst := filepath.Join(e.workspace, "guides")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(guides))
	for _, g := range guides {
		if err := atomicfile.Write(filepath.Join(dst, g.name), []byte(g.text)); err != nil {
			return nil, err
		}
		names = append(names, g.name)
	}
	return names, nil
}

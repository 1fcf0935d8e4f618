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
	"github.com/pyrualean/pyrualean/spec"
)

// briefing is what the model is given, built once at boot and read-only after: the prompt (prompt.txt
// and the card images), the episode card, the toolkit and the robot's tools.
type briefing struct {
	prompt   Prompt
	card     Card
	tk       Toolkit
	tools    []ToolSpec // the robot's primitives as tools (offered in the tools arm)
	stateful map[string]bool
}

// build reads the card, writes card.json and card/*.png, assembles prompt.txt (arm contract, API
// reference, robot knowledge, task card, guides) and the toolkit, and records them in result.json and
// the trace.
func (b *briefing) build(ctx context.Context, e *Episode, cardJSON []byte, refs *references) error {
	s := e.spec
	card, err := parseCard(cardJSON)
	if err != nil {
		return err
	}
	if card.MaxEnvSteps == 0 {
		card.MaxEnvSteps = s.MaxEnvSteps
	}
	b.card = card
	e.book.update(func(r *Result) { r.Perception = card.Perception })
	if b.prompt.Images, err = writeCard(e.files, card, cardJSON); err != nil {
		return err
	}
	apiText, err := b.tooling(s.Arm, refs)
	if err != nil {
		return err
	}
	var guides []string
	if s.Guides {
		if guides, err = copyGuides(e.host.Root, s.Robot, e.files.workspace); err != nil {
			return err
		}
	}
	var examples []Example
	if s.PromptProfile == spec.ProfileCompact {
		if examples, err = workedExamples(ctx, s.Robot, firstNonEmpty(card.Task, s.Task)); err != nil {
			return err
		}
	}
	b.prompt.Text = BuildPrompt(PromptParts{
		Profile: s.PromptProfile, Examples: examples,
		Arm: s.Arm, Images: s.Images, Feedback: s.Feedback, MaxTurns: s.MaxCalls, MaxPrograms: s.MaxPrograms, BudgetS: s.BudgetS,
		MaxEnvSteps: card.MaxEnvSteps, APIReference: apiText, Knowledge: card.Knowledge,
		TaskCard: RenderCard(card), TaskLanguage: card.TaskLanguage, GuideFiles: guides, Cameras: card.Cameras, MotionCameras: card.MotionCameras,
	})
	if err := atomicfile.Write(e.files.path("prompt.txt"), []byte(b.prompt.Text)); err != nil {
		return err
	}
	switch s.Arm {
	case spec.ArmTools:
		b.tk = &toolsToolkit{e: e}
	case spec.ArmProgram:
		b.tk = &programToolkit{e: e}
	default:
		b.tk = &cellsToolkit{e: e}
	}
	if b.tk, err = newRecordingToolkit(b.tk, e); err != nil { // exchanges.jsonl: every driver's calls and results
		return err
	}
	info := b.prompt.Info()
	info.Profile = s.PromptProfile
	e.book.update(func(r *Result) {
		r.Prompt, r.TaskLanguage = info, card.TaskLanguage
		r.Suite, r.Task = firstNonEmpty(r.Suite, card.Suite), firstNonEmpty(r.Task, card.Task)
	})
	_ = e.book.setMeta(func(m *notebooks.EpisodeMeta) {
		m.TaskLanguage, m.Task, m.PromptSHA256 = card.TaskLanguage, card.Task, info.SHA256
		m.Budgets = budgetsMeta(s, card.MaxEnvSteps) // the robot's own step budget
	})
	return e.trace.AddMarkdown(RenderCard(card), notebooks.CellMeta{Author: notebooks.AuthorSetup, Kind: "task_card"}.Map())
}

// tooling reads the robot's primitives as tools (the tools arm offers them; every arm tells stateful
// ones apart in the ledger counts) and returns the API reference text the prompt holds.
func (b *briefing) tooling(arm string, refs *references) (string, error) {
	format := robotapi.FormatText
	if arm == spec.ArmTools {
		format = robotapi.FormatTools
	}
	if refs.err[format] != nil {
		return "", refs.err[format]
	}
	apiText := refs.text[format]
	var err error
	if arm == spec.ArmTools {
		if b.tools, err = ParseToolSchemas([]byte(apiText)); err != nil {
			return "", err
		}
		apiText = toolsReference(b.tools)
	} else if refs.err[robotapi.FormatTools] == nil {
		b.tools, _ = ParseToolSchemas([]byte(refs.text[robotapi.FormatTools]))
	}
	b.stateful = map[string]bool{}
	for _, t := range b.tools {
		if t.Stateful {
			b.stateful[t.Name] = true
		}
	}
	return apiText, nil
}

// writeCard writes card.json (without its images) and card/<camera>.png; it returns the images.
func writeCard(f *runFolder, card Card, cardJSON []byte) ([]Image, error) {
	var pretty any
	if err := json.Unmarshal(cardJSON, &pretty); err == nil {
		if m, ok := pretty.(map[string]any); ok {
			delete(m, "images") // stored as files in card/
		}
		if err := atomicfile.WriteJSON(f.path("card.json"), pretty); err != nil {
			return nil, err
		}
	}
	imgs, err := card.images()
	if err != nil || len(imgs) == 0 {
		return imgs, err
	}
	dir := f.path("card")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, im := range imgs {
		if err := atomicfile.Write(filepath.Join(dir, im.Name), im.PNG); err != nil {
			return nil, err
		}
	}
	return imgs, nil
}

// workedExamples are the compact profile's worked examples: reference solutions of tasks from the
// robot's other task families (PickExamples). A robot without tasks or solutions gets none.
func workedExamples(ctx context.Context, robot, own string) ([]Example, error) {
	tasks, err := robotapi.Tasks(ctx, robot)
	if err != nil {
		return nil, fmt.Errorf("compact prompt: %w", err)
	}
	list := make([]ExampleTask, len(tasks))
	for i, t := range tasks {
		list[i] = ExampleTask{Name: t.Name, Family: t.Family, Instruction: t.Instruction}
	}
	var out []Example
	for _, t := range PickExamples(list, own, 3) {
		cells, err := robotapi.SolutionCells(robot, t.Name)
		if err != nil {
			continue // a task without a reference solution is no example
		}
		out = append(out, Example{Task: t.Name, Instruction: t.Instruction, Cells: cells})
	}
	return out, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// guidesFS holds the arm-independent guides that ship with the agent.
//
//go:embed guides/*.md
var guidesFS embed.FS

// copyGuides copies the guides (ours, then the robot's own from pyrualean_robot/guides/<robot>/) into
// workspace/guides and returns their file names: the prompt says where they are, as the original's does,
// instead of inlining them. The robot's knowledge files (<robot>.md, <robot>-novla.md) are already the
// prompt's knowledge section and are not copied (the full one would name VLA calls a no-vla run lacks).
func copyGuides(root, robot, workspace string) ([]string, error) {
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
	robotDir := filepath.Join(root, "robotapi", "python", "pyrualean_robot", "guides", robot)
	matches, _ := filepath.Glob(filepath.Join(robotDir, "*.md"))
	for _, m := range matches {
		if n := filepath.Base(m); n == robot+".md" || n == robot+"-novla.md" {
			continue
		}
		b, err := os.ReadFile(m)
		if err != nil {
			return nil, fmt.Errorf("guide: %w", err)
		}
		guides = append(guides, guide{filepath.Base(m), string(b)})
	}
	dst := filepath.Join(workspace, "guides")
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

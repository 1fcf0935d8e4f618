package agent

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
	e.book.update(func(r *Result) { r.Perception, r.MaxEpisodeSteps = card.Perception, card.MaxEnvSteps })
	if b.prompt.Images, err = writeCard(e.files, card, cardJSON); err != nil {
		return err
	}
	if s.Images == spec.ImagesNone {
		// "Camera images are never attached" holds for the card too: its step-0 images stay in card/ for
		// people, and the card neither attaches nor names them (it did, beside that line).
		b.prompt.Images, card.Images = nil, nil
	}
	apiText, err := b.tooling(s.Arm, refs)
	if err != nil {
		return err
	}
	var guides []string
	if s.Guides {
		if guides, err = installGuides(ctx, e); err != nil {
			return err
		}
	}
	var examples []Example
	if s.PromptProfile == spec.ProfileCompact {
		if examples, err = workedExamples(ctx, s.Robot, firstNonEmpty(card.Task, s.Task), s.Arm); err != nil {
			return err
		}
	}
	parts := PromptParts{
		Profile: s.PromptProfile, Examples: examples,
		Arm: s.Arm, Images: s.Images, Feedback: s.Feedback, MaxTurns: s.MaxCalls, MaxPrograms: s.MaxPrograms, BudgetS: s.BudgetS,
		MaxEnvSteps: card.MaxEnvSteps, APIReference: apiText, Tools: b.tools, Knowledge: card.Knowledge,
		TaskCard: RenderCard(card), Task: firstNonEmpty(card.Task, s.Task), TaskLanguage: card.TaskLanguage,
		GuideFiles: guides, Cameras: card.Cameras, MotionCameras: card.MotionCameras,
	}
	b.prompt.Text, b.prompt.ReplyStart = BuildPrompt(parts), ReplyStart(parts)
	if err := e.files.writeFile("prompt.txt", []byte(b.prompt.Text)); err != nil {
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
	// every driver's calls: exchanges.jsonl (each call and its result), tool_turns.json (a row each)
	if b.tk, err = newRecordingToolkit(b.tk, e); err != nil {
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

// installGuides copies the episode's guides into its workspace, records them in result.json (with their
// sha256 and whether they are the paper's) and, when they are not the paper's, says so plainly.
func installGuides(ctx context.Context, e *Episode) ([]string, error) {
	found, source, paper, err := gatherGuides(ctx, e.host.Root, e.spec.Robot)
	if err != nil {
		return nil, err
	}
	names, sums, err := copyGuides(found, e.files)
	if err != nil {
		return nil, err
	}
	e.book.update(func(r *Result) {
		r.Guides = Guides{Source: source, Files: sums, Paper: paper}
		if !paper {
			r.Notes = append(r.Notes, "the guides are pyrualean's own, not the paper's (RPent's guides are copied from "+
				"$RPENT_ROOT/robots/<robot>/guides where RPENT_ROOT names an RPent checkout)")
		}
	})
	if !paper {
		e.log.Warn("--guides: pyrualean's own guides, not the paper's (set RPENT_ROOT to an RPent checkout to copy those)")
	}
	return names, nil
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
		if err := f.writeJSON("card.json", pretty); err != nil {
			return nil, err
		}
	}
	imgs, err := card.images()
	if err != nil || len(imgs) == 0 {
		return imgs, err
	}
	if err := f.root.MkdirAll("card", 0o755); err != nil {
		return nil, err
	}
	for _, im := range imgs {
		if err := f.writeFile(filepath.Join("card", im.Name), im.PNG); err != nil {
			return nil, err
		}
	}
	return imgs, nil
}

// workedExamples are the compact profile's worked examples: reference solutions of tasks from the
// robot's other task families (PickExamples), as cells, and for the tools arm as the primitive calls
// they make (robotapi.SolutionCalls). A robot without tasks or solutions gets none.
func workedExamples(ctx context.Context, robot, own, arm string) ([]Example, error) {
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
		ex := Example{Task: t.Name, Instruction: t.Instruction, Cells: cells}
		if arm == spec.ArmTools {
			calls, err := robotapi.SolutionCalls(robot, t.Name)
			if err != nil {
				continue // no calls recorded: no example for the tools arm
			}
			for _, c := range calls {
				ex.Calls = append(ex.Calls, ExampleCall{Tool: c.Tool, Args: c.Args, Result: c.Result})
			}
		}
		out = append(out, ex)
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

// guide is one guide file: its name in workspace/guides and its text.
type guide struct{ name, text string }

// gatherGuides finds the guides an episode copies: the paper's (RPent's own guides for this robot, from
// the RPent checkout $RPENT_ROOT names, as the original copies them) when there is one and the robot has
// such guides, else pyrualean's own (ours, then the robot's from pyrualean_robot/guides/<robot>/: the
// robot's knowledge files are the prompt's knowledge section already and are not copied). It returns
// them and where they came from; paper says whether they are the paper's.
func gatherGuides(ctx context.Context, root, robot string) (guides []guide, source string, paper bool, err error) {
	if rpent := os.Getenv("RPENT_ROOT"); rpent != "" {
		info, err := (&robotapi.Registry{}).Lookup(ctx, robot)
		if err != nil {
			return nil, "", false, err
		}
		if g := info.RPentGuides; g != nil {
			dir := filepath.Join(rpent, filepath.FromSlash(g.Dir))
			for _, name := range g.Files {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					return nil, "", false, fmt.Errorf("--guides: the paper's guide %s is missing under $RPENT_ROOT (%s): %w", name, dir, err)
				}
				guides = append(guides, guide{name, string(b)})
			}
			return guides, dir, true, nil
		}
	}
	entries, _ := fs.ReadDir(guidesFS, "guides")
	for _, en := range entries {
		b, err := guidesFS.ReadFile("guides/" + en.Name())
		if err != nil {
			return nil, "", false, err
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
			return nil, "", false, fmt.Errorf("guide: %w", err)
		}
		guides = append(guides, guide{filepath.Base(m), string(b)})
	}
	return guides, "pyrualean", false, nil
}

// copyGuides writes the guides into workspace/guides and returns their names and sha256s (result.json
// records exactly which text the agent could read): the prompt says where they are, as the original's
// does, instead of inlining them. A reused --out's workspace is the agent's: the guides are written
// beneath it (a link it planted there is replaced or refused, never written through).
func copyGuides(guides []guide, f *runFolder) ([]string, map[string]string, error) {
	if fi, err := f.ws.Lstat("guides"); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if err := f.ws.Remove("guides"); err != nil { // the link, not what it points at
			return nil, nil, fmt.Errorf("guides: %w", err)
		}
	}
	if err := f.ws.MkdirAll("guides", 0o755); err != nil {
		return nil, nil, fmt.Errorf("guides: %w", err)
	}
	names := make([]string, 0, len(guides))
	sums := map[string]string{}
	for _, g := range guides {
		if err := f.writeWorkspace(filepath.Join("guides", g.name), []byte(g.text)); err != nil {
			return nil, nil, fmt.Errorf("guides: %w", err)
		}
		names = append(names, g.name)
		sum := sha256.Sum256([]byte(g.text))
		sums[g.name] = hex.EncodeToString(sum[:])
	}
	return names, sums, nil
}

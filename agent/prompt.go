package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Prompt is what the model reads first: the text (prompt.txt) and the task card's images.
type Prompt struct {
	Text   string
	Images []Image
}

// Info describes the prompt for result.json.
func (p Prompt) Info() PromptInfo {
	sum := sha256.Sum256([]byte(p.Text))
	names := make([]string, 0, len(p.Images))
	for _, im := range p.Images {
		names = append(names, im.Name)
	}
	return PromptInfo{Chars: len([]rune(p.Text)), SHA256: hex.EncodeToString(sum[:]), Images: names}
}

// PromptParts are the pieces a prompt is assembled from.
type PromptParts struct {
	Arm, Images, Feedback string
	MaxTurns              int     // 0: no call budget
	BudgetS               float64 // wall clock budget
	MaxEnvSteps           int
	APIReference          string // `pyrualean api --format text` (cells) or the tools' descriptions
	Knowledge             string // robot knowledge (markdown)
	TaskCard              string // rendered task card
	Guides                string // with --guides
}

// BuildPrompt joins contract, API reference, robot knowledge, task card (and guides) with blank lines.
func BuildPrompt(p PromptParts) string {
	var parts []string
	if p.Arm == ArmTools {
		parts = append(parts, toolsContract(p))
	} else {
		parts = append(parts, cellsContract(p))
	}
	if p.APIReference != "" {
		title := "# API reference (the `robo` object)"
		if p.Arm == ArmTools {
			title = "# API reference (each primitive is a tool; these are the same calls on the robot)"
		}
		parts = append(parts, title+"\n\n"+strings.TrimSpace(p.APIReference))
	}
	for _, s := range []string{p.Knowledge, p.TaskCard, p.Guides} {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n") + "\n"
}

func imageNote(images string) string {
	switch images {
	case ImagesOnDemand:
		return "Images are NOT attached automatically: call `robo.show(\"agentview\")` (or another camera) or `display(image)` in a cell when a decision depends on what the scene looks like. Prefer cells that do several steps with checks in code over looking after every move."
	case ImagesNone:
		return "Camera images are never attached; rely on the state, the result values and the perception calls."
	default:
		return "Whenever a call moved the robot, the current camera images (agentview and wrist) are attached to its result."
	}
}

func endingNote(p PromptParts, tool string) string {
	var notes []string
	if p.BudgetS > 0 {
		steps := ""
		if p.MaxEnvSteps > 0 {
			steps = fmt.Sprintf(" or %d simulator steps", p.MaxEnvSteps)
		}
		notes = append(notes, fmt.Sprintf("The episode ends after %.0f s of wall clock in total (your thinking included)%s.", p.BudgetS, steps))
	}
	if p.MaxTurns > 0 {
		notes = append(notes, fmt.Sprintf("The number of `%s` calls in an episode is limited (every call counts, including calls that only look, print or display).", tool))
	}
	return strings.Join(notes, " ")
}

func cellsContract(p PromptParts) string {
	feedback := "The tool returns exactly what your code produced: stdout, stderr, the exception if any, and the value of a trailing expression. Nothing else is added."
	if p.Feedback != FeedbackPure {
		feedback = "The tool returns what your code produced (stdout, stderr, the exception if any, the value of a trailing expression) plus the robot calls the cell made (`primitive_calls`), whether the robot moved, the simulator steps used and the robot state."
	}
	return strings.TrimSpace(fmt.Sprintf(`# How you control the robot

You have ONE tool to act, `+"`python(code)`"+`: it runs Python in a persistent session, like a notebook
cell in Jupyter. The robot is the object `+"`robo`"+`; `+"`np`"+` (numpy), `+"`math`"+` and `+"`time`"+` are imported,
and `+"`display(image)`"+` shows a numpy array or PIL image. Variables, functions and imports persist between
calls, so write helpers once and reuse them. A cell may do many steps: check results in code (loops,
conditions, retries) instead of asking for a new call after every move.

%s
%s

Sandbox: your cells may use only the documented `+"`robo`"+` API and computation modules (numpy, math,
scipy, PIL, collections, itertools, json, re, ...). Simulator internals, private attributes of `+"`robo`"+`
(names starting with `+"`_`"+`), `+"`__globals__`"+`/`+"`__subclasses__`"+`-style introspection, subprocesses, the
network and files outside the episode workspace are refused: such a cell is not run and you are told why.

# How the episode is scored

Success is the task's own predicate: the episode succeeds the moment the benchmark says the task is
done. %s Once the task is done, further motion calls raise `+"`EpisodeFinished`"+`; then call
`+"`finish(status=\"success\", summary=...)`"+`. If you cannot finish the task, call `+"`finish`"+` with status
"failure" or "stuck" and say why.`, feedback, imageNote(p.Images), endingNote(p, "python")))
}

func toolsContract(p PromptParts) string {
	return strings.TrimSpace(fmt.Sprintf(`# How you control the robot

Each robot primitive is a tool: call it with its arguments and you get back its result and the robot
state. One call runs one primitive.
%s

# How the episode is scored

Success is the task's own predicate: the episode succeeds the moment the benchmark says the task is
done. %s Once the task is done, further motion calls are refused; then call
`+"`finish(status=\"success\", summary=...)`"+`. If you cannot finish the task, call `+"`finish`"+` with status
"failure" or "stuck" and say why.`, imageNote(p.Images), endingNote(p, "robot tool")))
}

// RenderCard renders the episode card (episode_card()) as markdown for the prompt.
func RenderCard(c Card) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Task\n\nInstruction (authoritative): %s\n\n", c.TaskLanguage)
	fmt.Fprintf(&b, "- robot: %s", c.Robot)
	if c.Suite != "" {
		fmt.Fprintf(&b, ", suite: %s", c.Suite)
	}
	fmt.Fprintf(&b, ", task: %s, seed: %d\n", c.Task, c.Seed)
	if len(c.ObjectNames) > 0 {
		fmt.Fprintf(&b, "- movable objects: %s\n", strings.Join(c.ObjectNames, ", "))
	}
	if len(c.EEFPos) > 0 {
		fmt.Fprintf(&b, "- initial end-effector position: %v\n", c.EEFPos)
	}
	if c.GripperOpening != nil {
		fmt.Fprintf(&b, "- initial gripper opening: %.3f m\n", *c.GripperOpening)
	}
	if c.MaxEnvSteps > 0 {
		fmt.Fprintf(&b, "- simulator step budget: %d\n", c.MaxEnvSteps)
	}
	for _, f := range c.Facts {
		fmt.Fprintf(&b, "- %s\n", f)
	}
	if len(c.Images) > 0 {
		names := make([]string, 0, len(c.Images))
		for n := range c.Images {
			names = append(names, n)
		}
		fmt.Fprintf(&b, "- attached: the initial camera image(s) %s\n", strings.Join(sortedStrings(names), ", "))
	}
	return b.String()
}

package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/pyrualean/pyrualean/pylit"
	"github.com/pyrualean/pyrualean/spec"
)

// Prompt is what the model reads first: the text (prompt.txt) and the task card's images.
type Prompt struct {
	Text   string
	Images []Image
	// ReplyStart is the text every reply's code begins with where a backend can force it (the embedded
	// server's code block); "" : none. The compact cells profile sets it to its worked examples' header
	// for this task.
	ReplyStart string
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
	// Profile is spec.ProfileDefault ("" too) or spec.ProfileCompact (cells: compactPrompt; tools:
	// compactToolsPrompt).
	Profile string
	// Examples are the compact profile's worked examples (PickExamples: other task families only).
	Examples     []Example
	MaxTurns     int     // 0: no call budget (the wall clock is the budget)
	MaxPrograms  int     // program arm: run_program calls allowed (0: no limit)
	BudgetS      float64 // wall clock budget; with MaxTurns > 0 only a safety ceiling the prompt does not state
	MaxEnvSteps  int
	APIReference string // `pyrualean api --format text` (cells) or the tools' descriptions
	// Tools are the robot's primitives as tools (the tools arm's compact profile lists their arguments).
	Tools        []ToolSpec
	Knowledge    string // robot knowledge (markdown)
	TaskCard     string // rendered task card
	Task         string // the task's name (the compact profile's ReplyStart)
	TaskLanguage string // the task instruction (the compact profile repeats it last)
	// GuideFiles names the guides copied into the workspace's guides/ directory: the contract then says
	// where they are and that reading them is optional (the original's prompt.GUIDES_NOTE), without inlining them.
	GuideFiles []string
	// Guides is guide text inlined after the task card; only used when GuideFiles is empty.
	Guides string
	// Cameras are the cameras robo.show() takes and MotionCameras those attached after a motion (the
	// robot's CAMERAS and ON_MOTION_IMAGES); empty means LIBERO's agentview and wrist.
	Cameras, MotionCameras []string
}

// BuildPrompt assembles the prompt in the original's order (play.build_prompt): contract (with the guides
// note), API reference, robot knowledge, task card.
func BuildPrompt(p PromptParts) string {
	if p.Profile == spec.ProfileCompact {
		switch p.Arm {
		case spec.ArmCells, "":
			return compactPrompt(p)
		case spec.ArmTools:
			return compactToolsPrompt(p)
		}
	}
	var parts []string
	contract := cellsContract(p)
	switch p.Arm {
	case spec.ArmTools:
		contract = toolsContract(p)
	case spec.ArmProgram:
		contract = programContract(p)
	}
	if len(p.GuideFiles) > 0 {
		contract += "\n\n" + guidesNote(p.GuideFiles)
	}
	parts = append(parts, contract)
	if p.APIReference != "" {
		title := "# API reference (the `robo` object)"
		if p.Arm == spec.ArmTools {
			title = "# API reference (each primitive is a tool; these are the same calls on the robot)"
		}
		parts = append(parts, title+"\n\n"+strings.TrimSpace(p.APIReference))
	}
	extra := []string{p.Knowledge, p.TaskCard}
	if len(p.GuideFiles) == 0 {
		extra = append(extra, p.Guides)
	}
	for _, s := range extra {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n") + "\n"
}

// callsMode reports whether the episode's budget is a number of calls (the original's budget_mode "calls").
func (p PromptParts) callsMode() bool { return p.MaxTurns > 0 }

// imageNote says when camera images come with a result (the original's prompt.IMAGE_NOTES, reworded).
func imageNote(p PromptParts) string {
	motion := cameraList(p.MotionCameras, "and")
	n := len(p.MotionCameras)
	if n == 0 {
		motion, n = "agentview and wrist", 2
	}
	count := ""
	if n == 2 {
		count = "two "
	}
	if p.Arm == spec.ArmTools {
		switch p.Images {
		case spec.ImagesOnDemand:
			return "Camera images are NOT attached on their own: call the `show` tool when a decision depends on the picture."
		case spec.ImagesNone:
			return "Camera images are never attached; rely on the returned results and the robot state."
		default:
			return "If the robot moved during a call, the " + count + "current camera images (" + motion + ") come attached to its result."
		}
	}
	switch p.Images {
	case spec.ImagesOnDemand:
		cams := p.Cameras
		if len(cams) == 0 {
			cams = []string{"agentview", "wrist"}
		}
		shows := make([]string, len(cams))
		for i, c := range cams {
			shows[i] = "`robo.show('" + c + "')`"
		}
		return "Camera images are NOT attached on their own: call " + strings.Join(shows, " or ") + " " +
			"for a current camera view, or `display(image)` for any image array you made (a crop, an overlay, a " +
			"picture kept from earlier) when you need to look before the next call. Prefer cells that carry out " +
			"several steps with checks in code (segmentation, back-projection, gripper opening, whether a move " +
			"reached its target) and look only when a decision depends on the picture."
	case spec.ImagesNone:
		return "Camera images are never attached; rely on the returned results and the robot state."
	default:
		return "If the robot moved during a call, the " + count + "current camera images (" + motion + ") come " +
			"attached to its result. Keep cells short when you need to look before deciding, and loop in code " +
			"when you do not."
	}
}

// cameraList joins names as prose: "a", "a and b", "a, b and c".
func cameraList(names []string, conj string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// feedbackNote says what the tool returns (the original's prompt.FEEDBACK_NOTES, reworded).
func feedbackNote(feedback string) string {
	if feedback == spec.FeedbackPure {
		return "A call returns exactly what your code produced: stdout, stderr, the exception if one was raised, " +
			"and the value of a final expression. Nothing is added: print whatever you want to know (for " +
			"example `print(robo.state())` or a motion call's result)."
	}
	return "A call returns stdout, stderr, the exception if one was raised, the value of a final expression, " +
		"the list of robot primitives the call made and the robot state."
}

// endingNote states the episode's limits (the original's prompt.ENDING_NOTES): the wall clock, or, under a call
// budget, that calls are limited without saying how many (the tool-calling baseline's prompt does not
// say either); the wall clock is then only a safety ceiling and is not mentioned.
func endingNote(p PromptParts) string {
	steps := ""
	if p.MaxEnvSteps > 0 {
		steps = fmt.Sprintf("%d simulator steps", p.MaxEnvSteps)
	}
	if p.callsMode() {
		s := "- The number of robot tool calls in an episode is limited (each call counts)"
		if p.Arm == spec.ArmCells || p.Arm == "" {
			s = "- The number of `python` calls in an episode is limited (each call counts, also one that only looks, prints or displays)"
		} else if p.Arm == spec.ArmProgram {
			s = "- The number of `run_program` calls in an episode is limited (each call counts)"
		}
		if steps != "" {
			s += "; the episode also ends after " + steps + ". Hitting either limit"
		} else {
			s += ". Hitting the limit"
		}
		if p.Arm == spec.ArmTools {
			return s + " is a failure, so make every call count."
		}
		return s + " is a failure, so give every call real work to do and check its results in code."
	}
	if p.BudgetS <= 0 {
		if steps == "" {
			return ""
		}
		return "- The episode ends after " + steps + "; that is a failure."
	}
	s := fmt.Sprintf("- The episode ends after %.0f s of wall-clock time in all (your thinking counts too)", p.BudgetS)
	if steps != "" {
		s += " or after " + steps
	}
	return s + "; that is a failure."
}

// guidesNote tells the agent about the guides in its workspace (the original's prompt.GUIDES_NOTE, reworded).
func guidesNote(files []string) string {
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = "`" + f + "`"
	}
	return "Reference guides: the `guides/` directory of your working directory holds operating guides written " +
		"for the tool-calling version of this system (" + strings.Join(quoted, ", ") + "). Where they name a " +
		"tool, it is the `robo` method of the same name; what they say about runners, MCP or servers does not " +
		"apply here. Reading them is optional."
}

func scoringSection(p PromptParts) string {
	check := "motion results carry a `terminated` field and `robo.done` tells you too."
	after := "motion calls raise `EpisodeFinished`"
	if p.Arm == spec.ArmTools {
		check, after = "motion results carry a `terminated` field.", "motion calls are refused"
	}
	lines := []string{
		"# How the episode is scored",
		"",
		"- Success means the benchmark's own task predicate fires (`terminated`) at any moment. The simulator checks it, not you; " + check,
	}
	if n := endingNote(p); n != "" {
		lines = append(lines, n)
	}
	lines = append(lines,
		"- Once the task has terminated, "+after+": call `finish(status=\"success\", summary=...)` and stop. "+
			"If you cannot make progress, call `finish` with status `failure` or `stuck`.")
	return strings.Join(lines, "\n")
}

func cellsContract(p PromptParts) string {
	return "# How you control the robot\n\n" +
		"You act through ONE tool, `python(code)`. Every call runs your code in the same persistent Python " +
		"session, the way cells run in a notebook: `robo` (the robot, bound to the live simulator), `np`, " +
		"`math`, `time` and `display(image)` already exist, and every variable, function or import you create " +
		"is still there in later calls, so a helper defined once can be called directly later without " +
		"defining or importing it again. " + feedbackNote(p.Feedback) + "\n" + imageNote(p) + "\n" +
		"The session is sandboxed: import `numpy`, `math`, `time`, `json`, `re`, `PIL`, `scipy` and other " +
		"pure-computation modules, but not `os`, `sys`, `subprocess`, `pathlib` or networking; files open only " +
		"inside your workspace; private attributes of `robo` (names starting with `_`) and reaching into Python " +
		"internals (`__globals__`, `__subclasses__`, ...) are refused: such a cell does not run and you are told why.\n\n" +
		scoringSection(p) + "\n\n" +
		"Your working directory is a scratch workspace where you may keep notes or helper files. Do not read " +
		"files outside it; every action goes through `python`."
}

func toolsContract(p PromptParts) string {
	return "# How you control the robot\n\n" +
		"Each robot primitive is a tool: call it with its arguments and you get back its result and the robot " +
		"state. One call runs one primitive.\n" + imageNote(p) + "\n\n" +
		scoringSection(p)
}

// RenderCard renders the episode card (episode_card()) for the prompt, laid out like the original's
// TaskCard.render: LIBERO (one arm with a known initial pose) gets its own layout, every other robot
// the generic one with its facts.
func RenderCard(c Card) string {
	lines := []string{"# Task card"}
	libero := c.Robot == "libero" && len(c.EEFPos) > 0 && c.GripperOpening != nil
	if libero {
		if c.Suite != "" {
			lines = append(lines, "- suite: "+c.Suite)
		}
		lines = append(lines, "- task: "+c.Task, fmt.Sprintf("- seed: %d", c.Seed),
			"- task instruction (authoritative): "+pylit.Quote(c.TaskLanguage))
		if len(c.ObjectNames) > 0 {
			lines = append(lines, "- movable objects in the scene: "+strings.Join(c.ObjectNames, ", "))
		}
		pos := make([]string, len(c.EEFPos))
		for i, v := range c.EEFPos {
			pos[i] = fmt.Sprintf("%.3f", v)
		}
		lines = append(lines, fmt.Sprintf("- initial gripper position [x, y, z]: [%s] m, opening %.3f (open, pointing down)",
			strings.Join(pos, ", "), *c.GripperOpening))
	} else {
		lines = append(lines, "- robot: "+c.Robot, "- task: "+c.Task)
		if c.Suite != "" {
			lines = append(lines, "- variant: "+c.Suite)
		}
		lines = append(lines, fmt.Sprintf("- seed: %d", c.Seed), "- task instruction (authoritative): "+pylit.Quote(c.TaskLanguage))
		if len(c.ObjectNames) > 0 {
			lines = append(lines, "- objects named by the benchmark: "+strings.Join(c.ObjectNames, ", "))
		}
		for _, f := range c.Facts {
			lines = append(lines, "- "+f)
		}
	}
	if c.MaxEnvSteps > 0 {
		lines = append(lines, fmt.Sprintf("- simulator step budget: %d", c.MaxEnvSteps))
	}
	if len(c.Images) > 0 {
		lines = append(lines, cardImagesLine(c, libero))
	}
	return strings.Join(lines, "\n") + "\n"
}

// cardImagesLine names the attached step-0 images and says what they are (the original's TaskCard.render).
func cardImagesLine(c Card, libero bool) string {
	keys := sortedKeys(c.Images)
	names := make([]string, len(keys))
	calls := make([]string, len(keys))
	for i, k := range keys {
		names[i] = fmt.Sprintf("%s (%s)", k, pngName(k))
		calls[i] = fmt.Sprintf("`robo.image('%s')`", cameraOf(k))
	}
	s := "- attached images: " + strings.Join(names, ", ") + ". They are step 0 of your run, what " +
		strings.Join(calls, " / ") + " return before any motion"
	if !libero {
		return s + "."
	}
	for _, k := range keys {
		if cameraOf(k) != "agentview" {
			continue
		}
		size := "agentview"
		if w, h, ok := pngSize(c.Images[k]); ok {
			size = fmt.Sprintf("%dx%d agentview", w, h)
		}
		return s + "; a pixel (row, col) read off the " + size + " image becomes world coordinates at run " +
			"time through `robo.back_project(row, col, step=0)`."
	}
	return s + "."
}

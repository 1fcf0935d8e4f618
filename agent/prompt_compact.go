package agent

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pyrualean/pyrualean/spec"
)

// Prompt profiles: the default is the original's prompt, for hosted models; compact says the same contract
// in fewer words for small local models, puts the primitives that matter first and adds worked

// Example is a worked example for the compact profile: another task's reference solution, one code
// cell per python call.
type Example struct {
	Task, Instruction string
	Cells             []string
	// Calls are the same solution as the tools arm makes it: primitive calls with the results they gave
	// (robotapi.SolutionCalls); the tools arm's compact profile shows these instead of Cells.
	Calls []ExampleCall
}

// ExampleCall is one primitive call of a worked example and its (brief) result, both JSON objects.
type ExampleCall struct {
	Tool         string
	Args, Result json.RawMessage
}

// ExampleTask is what PickExamples needs to know of a task (robotapi.Task has it).
type ExampleTask struct {
	Name, Family, Instruction string
}

// PickExamples chooses up to n tasks whose solutions serve as worked examples for the task named own:
// never own's family (so never its own solution, nor its swapped twin), one task per family, in the
// order given, skipping "_swap" variants. The choice depends only on own's family, so every task of a
// family gets the same examples and episodes of one family share a prompt prefix (the local model's
// prompt cache).
func PickExamples(tasks []ExampleTask, own string, n int) []ExampleTask {
	ownFamily := ""
	for _, t := range tasks {
		if t.Name == own {
			ownFamily = t.Family
		}
	}
	if ownFamily == "" {
		return nil // an unknown task: no family to keep out, so no examples
	}
	seen := map[string]bool{ownFamily: true}
	var out []ExampleTask
	for _, t := range tasks {
		if len(out) == n {
			break
		}
		if seen[t.Family] || strings.HasSuffix(t.Name, "_swap") {
			continue
		}
		seen[t.Family] = true
		out = append(out, t)
	}
	return out
}

// compactPrompt is BuildPrompt for spec.ProfileCompact: the contract first (the same for every task of a
// robot), then the API reference with the example's primitives first, the worked examples, the
// robot's notes and the task card last, so the longest possible prefix repeats across episodes.
func compactPrompt(p PromptParts) string {
	parts := []string{compactContract(p)}
	if ref := strings.TrimSpace(p.APIReference); ref != "" {
		parts = append(parts, "# API reference (the `robo` object)\n\n"+compactReference(ref, usedPrimitives(p.Examples)))
	}
	if len(p.Examples) > 0 {
		parts = append(parts, examplesSection(p.Examples))
	}
	for _, s := range []string{p.Knowledge, p.TaskCard} {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n") + "\n"
}

func compactContract(p PromptParts) string {
	lines := []string{
		"# How you control the robot",
		"",
		"Call the tool `python(code)`. The code runs in one persistent Python session, like notebook cells: " +
			"`robo` (the robot), `np` and `math` already exist and what you define stays for later calls. " +
			"Do not assign `robo.task` or other attributes of `robo`: call its methods.",
		compactFeedback(p.Feedback),
		imageNote(p),
		"Sandbox: no `os`, `sys`, `subprocess`, files outside the workspace, network or `robo._private` names.",
		"",
		"# How to work",
		"",
		readCardStep("`robo.segment(place)`"),
		"2. Write the whole solution in one call, as the worked examples below do (they solve OTHER tasks " +
			"with the same methods): find positions with `robo.segment`, move above, lower, grasp or release, " +
			"and end with `print(robo.state())`. How this task's objects move (only blocks can be picked; a " +
			"drawer moves by its handle) is in the robot facts below the examples.",
		"3. Read the result. If `terminated` is not True yet, fix what went wrong in the next call; never repeat a call unchanged.",
		"4. Success is decided by the simulator: motion results carry `terminated`, and `robo.done` becomes True. " +
			"Then call `finish(status=\"success\", summary=...)`. If you cannot make progress, call " +
			"`finish(status=\"failure\", summary=...)`.",
	}
	if n := endingNote(p); n != "" {
		lines = append(lines, strings.TrimPrefix(n, "- "))
	}
	return strings.Join(lines, "\n")
}

// readCardStep is the first step of both compact profiles (cells and tools): what moves and where it goes.
// A small model that picks a block and then reads that same block's position as the place (stacking, in
// both arms) needs it said; "pick the object that moves" alone got the drawer's handle picked, so the
// drawer is named. segment is how the arm reads a position.
func readCardStep(segment string) string {
	return "1. Read the task card: the task instruction says what moves and where it goes. A block is picked " +
		"and put on its place (a bowl, the plate, another block), read with " + segment +
		": the place is never the object you hold. A drawer is never picked: the gripper closes on its " +
		"handle or pushes it, as the Drawer facts below say."
}

func compactFeedback(feedback string) string {
	if feedback == spec.FeedbackPure {
		return "A call returns only what your code prints, errors, and the value of a final expression."
	}
	return "A call returns what your code prints, errors, the value of a final expression, the robot calls made and the robot state."
}

func examplesSection(examples []Example) string {
	var b strings.Builder
	b.WriteString("# Worked examples (other tasks, not yours: adapt, do not copy object names)")
	for _, ex := range examples {
		// One call per example: a small model copies the shape it sees, and a whole solution in one
		// call is what it should write (split into cells, it repeats the first one).
		code := make([]string, len(ex.Cells))
		for i, c := range ex.Cells {
			code[i] = strings.TrimRight(c, "\n")
		}
		// The task goes in a comment inside the block: a label outside it gets copied into the code.
		fmt.Fprintf(&b, "\n\n```python\n%s\n%s\n```", taskComment("Example task", ex.Task, ex.Instruction), strings.Join(code, "\n"))
	}
	return b.String()
}

// taskComment is the line that opens a worked example's code, and the episode's own cells (ReplyStart).
func taskComment(label, task, instruction string) string {
	return fmt.Sprintf("# %s %q: %s", label, task, instruction)
}

// ReplyStart is Prompt.ReplyStart: for the compact cells profile, the examples' opening comment naming
// this task. A 1.5B model otherwise sometimes opens its code with the prompt's last heading ("# Task
// card") and copies the card, with a made-up task, into every call (measured: 2 of 11 seeds).
func ReplyStart(p PromptParts) string {
	if p.Profile != spec.ProfileCompact || (p.Arm != spec.ArmCells && p.Arm != "") || p.Task == "" || p.TaskLanguage == "" {
		return ""
	}
	line := taskComment("Task", p.Task, strings.Join(strings.Fields(p.TaskLanguage), " "))
	if strings.Contains(line, "`") {
		return "" // it would end the code block
	}
	return line + "\n"
}

var roboCall = regexp.MustCompile(`robo\.([a-z][a-z0-9_]*)\(`)

// usedPrimitives are the robo methods the examples call, in order of first use.
func usedPrimitives(examples []Example) []string {
	var out []string
	for _, ex := range examples {
		for _, c := range ex.Cells {
			for _, m := range roboCall.FindAllStringSubmatch(c, -1) {
				if !slices.Contains(out, m[1]) {
					out = append(out, m[1])
				}
			}
		}
	}
	return out
}

// compactReference reorders the text reference's Methods section: the methods named in first (with
// their docs) come first, then every other method as its signature line only. The preamble,
// constants, properties and the sections after the methods are kept; a reference without a Methods section is returned as it is.
func compactReference(ref string, first []string) string {
	head, methods, ok := strings.Cut(ref, "\nMethods:\n")
	if !ok || len(first) == 0 {
		return ref
	}
	type method struct{ name, sig, doc string }
	var ms []method
	lines := strings.Split(methods, "\n")
	tail := ""
	for i, line := range lines {
		if line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "robo.") {
			tail = strings.Join(lines[i:], "\n") // the next section (result types, exceptions)
			break
		}
		if strings.HasPrefix(line, "robo.") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "robo."), "(")
			ms = append(ms, method{name: name, sig: line})
			continue
		}
		if len(ms) > 0 {
			ms[len(ms)-1].doc += line + "\n"
		}
	}
	var main, rest, returns []string
	for _, name := range first {
		for _, m := range ms {
			if m.name == name {
				main = append(main, m.sig+"\n"+strings.TrimRight(m.doc, "\n"))
				if _, ret, ok := strings.Cut(m.sig, ") -> "); ok {
					returns = append(returns, strings.TrimSpace(ret))
				}
			}
		}
	}
	for _, m := range ms {
		if !slices.Contains(first, m.name) {
			rest = append(rest, m.sig)
		}
	}
	out := strings.TrimRight(head, "\n") + "\n\nMethods used in the examples:\n" + strings.Join(main, "\n")
	if len(rest) > 0 {
		out += "\n\nOther methods (signatures only):\n" + strings.Join(rest, "\n")
	}
	if tail = strings.TrimSpace(compactTail(tail, returns)); tail != "" {
		out += "\n\n" + tail
	}
	return out
}

// compactTail keeps, of the sections after the methods, the result types the main methods return and
// each exception's first line.
func compactTail(tail string, returns []string) string {
	var out []string
	section, keep := "", true
	for _, line := range strings.Split(tail, "\n") {
		switch {
		case line != "" && !strings.HasPrefix(line, " "):
			if strings.HasSuffix(line, ":") {
				section, keep = line, true
				out = append(out, "", line)
			} else {
				keep = false // an exception's continuation paragraph
			}
			continue
		case strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "    "):
			name, _, _ := strings.Cut(strings.TrimSpace(line), "(")
			name, _, _ = strings.Cut(name, ":")
			keep = !strings.HasPrefix(section, "Result types") || slices.Contains(returns, name)
		case line == "":
			continue
		}
		if keep {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

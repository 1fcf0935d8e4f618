package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

func TestPickExamples(t *testing.T) {
	tasks := []ExampleTask{
		{Name: "put_block_in_bowl", Family: "pick_place"}, {Name: "put_block_in_bowl_swap", Family: "pick_place"},
		{Name: "put_block_on_plate", Family: "pick_place"}, {Name: "stack_blocks", Family: "stack"},
		{Name: "stack_blocks_swap", Family: "stack"}, {Name: "stack_three", Family: "stack"},
		{Name: "open_drawer", Family: "drawer"}, {Name: "close_drawer", Family: "drawer"},
		{Name: "bowl_then_plate", Family: "multi_step"},
	}
	for _, tc := range []struct {
		own  string
		n    int
		want []string
	}{
		{"put_block_in_bowl", 3, []string{"stack_blocks", "open_drawer", "bowl_then_plate"}},
		{"put_block_in_bowl_swap", 3, []string{"stack_blocks", "open_drawer", "bowl_then_plate"}},
		{"stack_blocks_swap", 3, []string{"put_block_in_bowl", "open_drawer", "bowl_then_plate"}},
		{"close_drawer", 2, []string{"put_block_in_bowl", "stack_blocks"}},
		{"bowl_then_plate", 5, []string{"put_block_in_bowl", "stack_blocks", "open_drawer"}},
		{"no_such_task", 3, nil},
	} {
		var got []string
		for _, e := range PickExamples(tasks, tc.own, tc.n) {
			got = append(got, e.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("PickExamples(%s, %d) = %v, want %v", tc.own, tc.n, got, tc.want)
		}
	}
}

func TestCompactReference(t *testing.T) {
	ref := "`robo`: Robot\n\nConstants:\n  robo.OPEN = -1.0\n\nMethods:\n" +
		"robo.state() -> State\n    Current state.\n\n" +
		"robo.image(camera: str) -> ndarray\n    Render a camera.\n\n" +
		"robo.pick(object: str) -> Pick\n    Grasp a block.\n\n" +
		"Result types (frozen dataclasses):\n  State(step)\n    Robot state.\n  Pick(success)\n    Grasp outcome.\n  Other(x)\n    Unused.\n\n" +
		"Exceptions:\n  ValueError: invalid arguments.\n  EpisodeFinished(BaseException): over.\n\nA long paragraph.\n"
	got := compactReference(ref, []string{"pick", "state"})
	for _, want := range []string{"Constants:\n  robo.OPEN = -1.0", "Methods used in the examples:\nrobo.pick(object: str) -> Pick\n    Grasp a block.\nrobo.state() -> State\n    Current state.",
		"Other methods (signatures only):\nrobo.image(camera: str) -> ndarray", "  State(step)\n    Robot state.\n  Pick(success)", "  ValueError: invalid arguments."} {
		if !strings.Contains(got, want) {
			t.Errorf("compact reference lacks %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{"Render a camera", "Other(x)", "A long paragraph"} {
		if strings.Contains(got, gone) {
			t.Errorf("compact reference keeps %q:\n%s", gone, got)
		}
	}
	if compactReference(ref, nil) != ref {
		t.Error("with no examples the reference must stay as it is")
	}
}

// TestCompactPromptNeverShowsOwnFamily builds the compact prompt of every tabletop task from the real
// task list and reference solutions: its worked examples are whole solutions of other families, never
// one of its own family's, and the part before the task card is the same for every
// task of a family (the prompt cache's shared prefix).
func TestCompactPromptNeverShowsOwnFamily(t *testing.T) {
	tasks, err := robotapi.Tasks(context.Background(), "tabletop")
	if err != nil {
		t.Fatal(err)
	}
	list := make([]ExampleTask, len(tasks))
	for i, tk := range tasks {
		list[i] = ExampleTask{Name: tk.Name, Family: tk.Family, Instruction: tk.Instruction}
	}
	prefixes := map[string]string{}
	for _, tk := range tasks {
		var examples []Example
		for _, e := range PickExamples(list, tk.Name, 3) {
			cells, err := robotapi.SolutionCells("tabletop", e.Name)
			if err != nil {
				t.Fatal(err)
			}
			examples = append(examples, Example{Task: e.Name, Instruction: e.Instruction, Cells: cells})
		}
		if len(examples) != 3 {
			t.Fatalf("%s: %d examples, want 3", tk.Name, len(examples))
		}
		text := BuildPrompt(PromptParts{Arm: spec.ArmCells, Profile: spec.ProfileCompact, Examples: examples, MaxTurns: 6,
			APIReference: "Methods:\nrobo.pick(object: str) -> Pick\n    Grasp.\n", TaskCard: "# Task card\n- task: " + tk.Name})
		for _, other := range tasks {
			if other.Family == tk.Family && strings.Contains(text, fmt.Sprintf("Example task %q", other.Name)) {
				t.Errorf("%s: the prompt shows %s's solution (same family %s)", tk.Name, other.Name, tk.Family)
			}
		}
		for _, e := range examples {
			if !strings.Contains(text, strings.Join(trimAll(e.Cells), "\n")) {
				t.Errorf("%s: example %s is not shown whole, as one call", tk.Name, e.Task)
			}
		}
		prefix, _, _ := strings.Cut(text, "# Task card")
		if p, ok := prefixes[tk.Family]; ok && p != prefix {
			t.Errorf("%s: the prompt before the task card differs from its family's", tk.Name)
		}
		prefixes[tk.Family] = prefix
	}
}

func trimAll(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = strings.TrimRight(c, "\n")
	}
	return out
}

// TestReplyStart: the compact cells profile opens the episode's cells with its examples' comment naming
// the task (one line, the instruction's whitespace folded); other profiles and arms, and a line that
// would end the server's code block, get none.
func TestReplyStart(t *testing.T) {
	compact := PromptParts{Arm: spec.ArmCells, Profile: spec.ProfileCompact, Task: "put_block_in_bowl", TaskLanguage: "put the red block\n in the bowl"}
	with := func(f func(*PromptParts)) PromptParts { p := compact; f(&p); return p }
	for _, tc := range []struct {
		name string
		p    PromptParts
		want string
	}{
		{"compact cells", compact, "# Task \"put_block_in_bowl\": put the red block in the bowl\n"},
		{"arm unset", with(func(p *PromptParts) { p.Arm = "" }), "# Task \"put_block_in_bowl\": put the red block in the bowl\n"},
		{"tools arm", with(func(p *PromptParts) { p.Arm = spec.ArmTools }), ""},
		{"default profile", with(func(p *PromptParts) { p.Profile = spec.ProfileDefault }), ""},
		{"no instruction", with(func(p *PromptParts) { p.TaskLanguage = "" }), ""},
		{"backtick", with(func(p *PromptParts) { p.TaskLanguage = "open ```the``` drawer" }), ""},
	} {
		if got := ReplyStart(tc.p); got != tc.want {
			t.Errorf("%s: ReplyStart %q, want %q", tc.name, got, tc.want)
		}
	}
	// The start is the examples' own comment for this task: what the model reads is what it continues.
	ex := examplesSection([]Example{{Task: "stack_blocks", Instruction: "stack it", Cells: []string{"x = 1"}}})
	if !strings.Contains(ex, "```python\n# Example task \"stack_blocks\": stack it\nx = 1\n```") {
		t.Errorf("examples section:\n%s", ex)
	}
}

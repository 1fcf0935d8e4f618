package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// TestCompactToolsPrompt builds the tools arm's compact prompt of every tabletop task from the real
// task list, tool schemas and recorded solution calls: the examples are other families' solutions as
// calls in the reply format, every recorded call names a real tool with arguments it takes, and the
// part before the task card is the same for a family (the prompt cache's shared prefix).
func TestCompactToolsPrompt(t *testing.T) {
	ctx := context.Background()
	tasks, err := robotapi.Tasks(ctx, "tabletop")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := robotapi.Reference(ctx, "tabletop", "", robotapi.FormatTools)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := ParseToolSchemas([]byte(ref))
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]map[string]bool{}
	for _, tl := range tools {
		params[tl.Name] = map[string]bool{}
		for _, p := range orderedProperties(tl.Parameters) {
			params[tl.Name][p.name] = true
		}
	}
	list := make([]ExampleTask, len(tasks))
	for i, tk := range tasks {
		list[i] = ExampleTask{Name: tk.Name, Family: tk.Family, Instruction: tk.Instruction}
	}
	prefixes := map[string]string{}
	for _, tk := range tasks {
		var examples []Example
		for _, e := range PickExamples(list, tk.Name, 3) {
			calls, err := robotapi.SolutionCalls("tabletop", e.Name)
			if err != nil {
				t.Fatal(err)
			}
			ex := Example{Task: e.Name, Instruction: e.Instruction}
			for _, c := range calls {
				var args map[string]any
				if err := json.Unmarshal(c.Args, &args); err != nil {
					t.Fatalf("%s: %s args %s: %v", e.Name, c.Tool, c.Args, err)
				}
				for k := range args {
					if !params[c.Tool][k] {
						t.Errorf("%s: recorded call %s(%s=...) is not an argument of a tool", e.Name, c.Tool, k)
					}
				}
				ex.Calls = append(ex.Calls, ExampleCall{Tool: c.Tool, Args: c.Args, Result: c.Result})
			}
			examples = append(examples, ex)
		}
		text := BuildPrompt(PromptParts{Arm: spec.ArmTools, Profile: spec.ProfileCompact, Examples: examples, MaxTurns: 20,
			Tools: tools, Knowledge: "# Knowledge\n- facts", TaskCard: "# Task card\n- task: " + tk.Name})
		order := []string{"# How you control the robot", ToolReplyFormat, "# Tools", "move_to(xyz, gripper=null", "# Worked examples",
			`{"tool": "pick", "args": {"object": "red_block"}}`, `{"tool": "finish", "args": {"status": "success"`, "# Knowledge", "# Task card"}
		at := 0
		for _, want := range order {
			i := strings.Index(text[at:], want)
			if i < 0 {
				t.Fatalf("%s: %q missing or out of order in:\n%s", tk.Name, want, text)
			}
			at += i
		}
		for _, other := range tasks {
			if other.Family == tk.Family && strings.Contains(text, fmt.Sprintf("Example task %q", other.Name)) {
				t.Errorf("%s: the prompt shows %s's solution (same family %s)", tk.Name, other.Name, tk.Family)
			}
		}
		if strings.Contains(text, "robo.") {
			t.Errorf("%s: the tools prompt speaks of robo methods", tk.Name)
		}
		prefix, _, _ := strings.Cut(text, "# Task card")
		if p, ok := prefixes[tk.Family]; ok && p != prefix {
			t.Errorf("%s: the prompt before the task card differs from its family's", tk.Name)
		}
		prefixes[tk.Family] = prefix
	}
}

func TestToolSignatureAndJSON(t *testing.T) {
	tl := ToolSpec{Name: "move_to", Parameters: json.RawMessage(`{"type":"object","properties":{"xyz":{"type":"array"},` +
		`"gripper":{"type":"number"},"step_clip":{"type":"number","default":0.02}},"required":["xyz"]}`)}
	if got := toolSignature(tl); got != "move_to(xyz, gripper=null, step_clip=0.02)" {
		t.Errorf("signature %q", got)
	}
	if got := toolSignature(ToolSpec{Name: "state"}); got != "state()" {
		t.Errorf("no schema: %q", got)
	}
	if got := compactJSON(json.RawMessage(`{"a":[1,2],"b":"x, y: z"}`)); got != `{"a": [1, 2], "b": "x, y: z"}` {
		t.Errorf("compactJSON %q", got)
	}
	if got := callJSON("release", nil); got != `{"tool": "release", "args": {}}` {
		t.Errorf("callJSON %q", got)
	}
}

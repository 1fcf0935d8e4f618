package spec

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/robotapi"
)

func TestNewDefaults(t *testing.T) {
	t.Setenv("PYRUALEAN_PRIMITIVES", "")
	e := New()
	want := Episode{Seed: SeedDefault, Arm: ArmCells, Images: ImagesOnMotion, Feedback: FeedbackRich, Primitives: PrimitivesFull,
		Sealed: SealAuto, BudgetS: 1200}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("New() = %+v\nwant %+v", e, want)
	}
	t.Setenv("PYRUALEAN_PRIMITIVES", "no-vla")
	if e := New(); e.Primitives != PrimitivesNoVLA {
		t.Fatalf("$PYRUALEAN_PRIMITIVES not the default: %q", e.Primitives)
	}
}

func TestSetAndFlags(t *testing.T) {
	t.Setenv("PYRUALEAN_PRIMITIVES", "")
	e := New()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	e.Flags(fs)
	err := fs.Parse([]string{"--arm", "tools", "--seed", "3", "--robot-opt", "libero_type=pro", "--vla-endpoint", "socket://h:1",
		"--budget-s", "90s", "--guides", "--openai-temperature", "0", "--openai-extra-body", `{"top_k": 20}`, "--max-turns", "7"})
	if err == nil {
		err = e.ApplyFlags()
	}
	if err != nil {
		t.Fatal(err)
	}
	if e.Arm != ArmTools || e.Seed != 3 || e.BudgetS != 90 || !e.Guides || e.MaxCalls != 7 ||
		e.Policy.OpenAI.Temperature == nil || *e.Policy.OpenAI.Temperature != 0 || e.Policy.OpenAI.ExtraBody["top_k"] != 20.0 ||
		!reflect.DeepEqual(e.RobotOptions, map[string]string{"libero_type": "pro", "vla_endpoint": "socket://h:1"}) {
		t.Fatalf("flags did not land: %+v", e)
	}
	// the matrix's spelling: underscores for dashes
	if err := e.Set("cell_timeout_s", "12.5"); err != nil || e.CellTimeoutS != 12.5 {
		t.Fatalf("Set: %v %v", err, e.CellTimeoutS)
	}
	for _, c := range []struct{ name, v, want string }{
		{"arm", "hands", `--arm "hands": want one of cells, tools, program`},
		{"seed", "-2", "want an integer >= 0"},
		{"max-turns", "x", "want an integer >= 0"},
		{"openai-temperature", "3", "want a number in [0, 2]"},
		{"openai-extra-body", "[1]", "want a JSON object"},
		{"robot-opt", "novalue", "want KEY=VALUE"},
		{"no-such", "1", "no such setting"},
	} {
		err := e.Set(c.name, c.v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Set(%s, %q) = %v, want an error with %q", c.name, c.v, err, c.want)
		}
	}
	if err := e.Set("no-such", ""); !errors.Is(err, ErrUnknownSetting) {
		t.Errorf("unknown setting: %v", err)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	e := New()
	e.Task, e.Seed, e.Out = "stack_blocks", 4, "/tmp/x"
	e.RobotOptions = map[string]string{"vla_endpoint": "socket://a:1"}
	temp := 0.5
	e.Policy = Policy{Runtime: "openai", Model: "m", OpenAI: OpenAI{Temperature: &temp, ExtraBody: map[string]any{"top_p": 0.9}}}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var back Episode
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(e, back) {
		t.Fatalf("round trip:\n%+v\n%+v", e, back)
	}
}

// TestValidate checks resolution and refusals against the real robot registry (Python).
func TestValidate(t *testing.T) {
	if testing.Short() {
		t.Skip("asks the robot package's registry (Python)")
	}
	if _, err := robotapi.Root(); err != nil {
		t.Skip(err)
	}
	reg := &robotapi.Registry{}
	ctx := context.Background()
	base := func() Episode {
		e := New()
		e.Out, e.Policy.Runtime = "run", "openai"
		return e
	}
	ok := base()
	ok.Task = "libero_spatial_swap/7"
	ok.RobotOptions = map[string]string{"libero_type": "pro"}
	if err := ok.Validate(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if ok.Robot != "libero" || ok.Suite != "libero_spatial_swap" || ok.Task != "7" || ok.Seed != 0 || !filepath.IsAbs(ok.Out) ||
		ok.PromptProfile != ProfileDefault {
		t.Fatalf("resolved: %+v", ok)
	}
	local := base()
	local.Policy.Runtime = "local"
	if err := local.Validate(ctx, reg); err != nil || local.PromptProfile != ProfileCompact || local.Robot != robotapi.DefaultRobot {
		t.Fatalf("local: %v %+v", err, local)
	}
	for _, c := range []struct {
		name   string
		change func(*Episode)
		want   string
	}{
		{"unknown option", func(e *Episode) { e.RobotOptions = map[string]string{"nope": "1"} }, "has no option 'nope'"},
		{"unknown robot", func(e *Episode) { e.Robot = "nobot" }, "unknown robot"},
		{"unknown suite", func(e *Episode) { e.Suite = "nosuite" }, "unknown suite"},
		{"suite clash", func(e *Episode) { e.Suite, e.Task = "a", "b/1" }, "drop one"},
		{"compact program", func(e *Episode) { e.Arm, e.PromptProfile = ArmProgram, ProfileCompact }, "compact is for --arm cells or tools"},
		{"programs off arm", func(e *Episode) { e.MaxPrograms = 1 }, "need --arm program"},
		{"vla hidden", func(e *Episode) {
			e.Primitives, e.RobotOptions = PrimitivesNoVLA, map[string]string{"vla_endpoint": "socket://h:1"}
		}, "VLA primitives are hidden"},
		{"replay without from", func(e *Episode) { e.Policy.Runtime = "replay" }, "needs --from"},
		{"from without replay", func(e *Episode) { e.Policy.From = "x.py" }, "only for --runtime replay"},
		{"bad arm", func(e *Episode) { e.Arm = "x" }, "--arm"},
		{"negative budget", func(e *Episode) { e.BudgetS = -1 }, "--budget-s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := base()
			c.change(&e)
			err := e.Validate(ctx, reg)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want ErrInvalid with %q", err, c.want)
			}
		})
	}
}

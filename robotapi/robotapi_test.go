package robotapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/kernel"
	"github.com/pyrualean/pyrualean/notebooks/nbtest"
)

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestSetupCode(t *testing.T) {
	cases := []struct {
		name string
		opts SetupOptions
		want string
	}{
		{"defaults", SetupOptions{}, `from pyrualean_robot import make; robo = make("tabletop", seed=0)`},
		{"task and seed", SetupOptions{Task: "stack_blocks", Seed: 3},
			`from pyrualean_robot import make; robo = make("tabletop", task="stack_blocks", seed=3)`},
		{"libero seed options", SetupOptions{Robot: "libero", Task: "7", Suite: "libero_spatial_swap", Seed: 2,
			Options: map[string]string{"sam3_endpoint": "http://127.0.0.1:8114", "libero_type": "pro"}},
			`from pyrualean_robot import make; robo = make("libero", task="7", seed=2, suite="libero_spatial_swap", libero_type="pro", sam3_endpoint="http://127.0.0.1:8114")`},
		{"all options", SetupOptions{Robot: "libero", Task: "libero_spatial/0", Seed: 1, Workspace: `/tmp/a "b"`,
			Images: "on-demand", Primitives: "no-vla", Suite: "libero_spatial_swap", Options: map[string]string{"vla_endpoint": "http://x/act", "env_url": "socket://h:1"}, MaxEnvSteps: 500},
			`from pyrualean_robot import make; robo = make("libero", task="libero_spatial/0", seed=1, workspace="/tmp/a \"b\"", images="on-demand", primitives="no-vla", suite="libero_spatial_swap", env_url="socket://h:1", vla_endpoint="http://x/act", max_env_steps=500)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := SetupCode(c.opts); got != c.want {
				t.Errorf("SetupCode:\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestSplitPercentCells(t *testing.T) {
	src := "# %% [markdown]\n# A note\n\n# %%\nx = 1\n\n# %%\n\n# %%\nprint(x)\n"
	got := SplitPercentCells(src)
	want := []string{"x = 1\n", "print(x)\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("cells = %q, want %q", got, want)
	}
}

func TestTasksAndSolutions(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	tasks, err := Tasks(ctx, "tabletop")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 10 {
		t.Fatalf("%d tasks, want >= 10", len(tasks))
	}
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	families := map[string]bool{}
	for _, task := range tasks {
		families[task.Family] = true
		if task.Instruction == "" {
			t.Errorf("%s: empty instruction", task.Name)
		}
		if _, err := os.Stat(filepath.Join(root, task.Solution)); err != nil {
			t.Errorf("%s: solution: %v", task.Name, err)
		}
		cells, err := SolutionCells("tabletop", task.Name)
		if err != nil || len(cells) == 0 {
			t.Errorf("%s: SolutionCells = %d cells, %v", task.Name, len(cells), err)
		}
		for _, c := range cells {
			if strings.Contains(c, "import ") || strings.Contains(c, "_sim") {
				t.Errorf("%s: solution must use only robo: %q", task.Name, c)
			}
		}
	}
	for _, f := range []string{"pick_place", "stack", "drawer", "multi_step"} {
		if !families[f] {
			t.Errorf("no %s task", f)
		}
	}
	if _, err := SolutionCells("tabletop", "../../go"); !errors.Is(err, ErrBadArgument) {
		t.Errorf("path traversal: err = %v, want ErrBadArgument", err)
	}
}

func TestReference(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	full, err := Reference(ctx, "tabletop", "full", FormatText)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"robo.move_to(", "robo.pick(", "robo.policy(", "robo.segment(", "EpisodeFinished", "Result types"} {
		if !strings.Contains(full, want) {
			t.Errorf("full reference lacks %q", want)
		}
	}
	novla, err := Reference(ctx, "tabletop", "no-vla", FormatText)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(novla, "robo.policy(") {
		t.Error("no-vla reference still documents policy")
	}
	tools, err := Reference(ctx, "tabletop", "no-vla", FormatTools)
	if err != nil {
		t.Fatal(err)
	}
	var schemas []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal([]byte(tools), &schemas); err != nil {
		t.Fatalf("tools is not JSON: %v", err)
	}
	names := map[string]bool{}
	for _, s := range schemas {
		names[s.Function.Name] = true
		if s.Type != "function" || s.Function.Description == "" || len(s.Function.Parameters) == 0 {
			t.Errorf("bad schema %+v", s)
		}
	}
	if !names["move_to"] || !names["pick"] || names["policy"] {
		t.Errorf("tool names %v: want move_to and pick, not policy", names)
	}
	bad := []struct{ robot, prim, format string }{
		{"tabletop", "some", "text"}, {"tabletop", "full", "xml"}, {"no_such_robot", "full", "text"},
	}
	for _, b := range bad {
		if _, err := Reference(ctx, b.robot, b.prim, b.format); !errors.Is(err, ErrBadArgument) {
			t.Errorf("Reference(%q, %q, %q) err = %v, want ErrBadArgument", b.robot, b.prim, b.format, err)
		}
	}
}

// TestShowInKernel boots tabletop in a real kernel (kernelspec pyrualean) and receives robo.show() as PNG
// display_data with the contract's metadata, plus the per-cell report through user_expressions.
func TestShowInKernel(t *testing.T) {
	nbtest.Heavy(t, "a real IPython kernel")
	ctx := testCtx(t, 3*time.Minute)
	spec, err := kernel.FindSpec("pyrualean")
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Launch(ctx, spec, kernel.LaunchOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		k.Shutdown(sctx)
	})
	c := k.Client()
	setup := SetupCode(SetupOptions{Task: "stack_blocks", Seed: 0, Workspace: t.TempDir(), Images: "on-demand"})
	res, err := c.Execute(ctx, setup, kernel.ExecuteOptions{Timeout: 2 * time.Minute})
	if err != nil || res.Status != "ok" {
		t.Fatalf("setup: %v %+v", err, res.Error)
	}
	res, err = c.Execute(ctx, "robo.show('agentview')", kernel.ExecuteOptions{
		Timeout:         time.Minute,
		UserExpressions: map[string]string{"pyrualean": "__import__('pyrualean_robot').cell_report()"},
	})
	if err != nil || res.Status != "ok" {
		t.Fatalf("show: %v %+v", err, res.Error)
	}
	var png []byte
	for _, o := range res.Outputs {
		if o.OutputType != "display_data" {
			continue
		}
		meta, _ := o.Metadata["pyrualean"].(map[string]any)
		if meta["camera"] != "agentview" || meta["source"] != "show" {
			t.Errorf("display metadata = %v", o.Metadata)
		}
		s, _ := o.Data["image/png"].(string)
		png, err = base64.StdEncoding.DecodeString(strings.TrimSpace(s))
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("no PNG display_data in %+v", res.Outputs)
	}
	var ue struct {
		Status string                     `json:"status"`
		Data   map[string]json.RawMessage `json:"data"`
	}
	var rep struct {
		Calls []struct {
			Tool string `json:"tool"`
		} `json:"calls"`
		Moved bool `json:"moved"`
	}
	if err := json.Unmarshal(res.UserExpressions["pyrualean"], &ue); err != nil {
		t.Fatalf("user_expressions: %v (%s)", err, res.UserExpressions["pyrualean"])
	}
	if err := json.Unmarshal(ue.Data["application/json"], &rep); err != nil {
		t.Fatalf("cell report: %v (%s)", err, res.UserExpressions["pyrualean"])
	}
	if ue.Status != "ok" || len(rep.Calls) != 1 || rep.Calls[0].Tool != "show" || rep.Moved {
		t.Errorf("cell report = %s", res.UserExpressions["pyrualean"])
	}
}

func TestRobotsComeFromThePythonRegistry(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	robots, err := Robots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]RobotInfo{}
	for _, r := range robots {
		byName[r.Name] = r
	}
	want := []struct {
		name   string
		seed   int
		remote bool
	}{{"tabletop", 0, false}, {"libero", 0, false}, {"robotwin", 100000, true}, {"robocasa", 1, true},
		{"robodojo_xpl_rgb", 0, true}}
	for _, w := range want {
		r, ok := byName[w.name]
		if !ok {
			t.Fatalf("robot %s missing from %v", w.name, RobotNames(robots))
		}
		if r.DefaultSeed != w.seed || r.Remote != w.remote || !r.Available {
			t.Errorf("%s = %+v, want default_seed %d remote %v available", w.name, r, w.seed, w.remote)
		}
		if got, err := LookupRobot(context.Background(), w.name); err != nil || got.DefaultSeed != r.DefaultSeed {
			t.Errorf("LookupRobot(%s) = %+v, %v", w.name, got, err)
		}
	}
	if !byName[DefaultRobot].Default {
		t.Errorf("%s is not the registry's default", DefaultRobot)
	}
	// options are make()'s keyword arguments, read from each class (through tabletop's **opts to the base)
	has := func(r RobotInfo, name string) bool {
		return slices.ContainsFunc(r.Options, func(o Option) bool { return o.Name == name })
	}
	if o := byName[DefaultRobot]; !has(o, "vla_endpoint") || has(o, "max_env_steps") || has(o, "libero_type") {
		t.Errorf("%s options = %v", DefaultRobot, o)
	}
	if got := RobotsTaking(robots, "libero_type"); !slices.Equal(got, []string{"libero"}) {
		t.Errorf("RobotsTaking(libero_type) = %v, want [libero]", got)
	}
	if got := RobotsTaking(robots, "env_url"); len(got) != 3 || slices.Contains(got, DefaultRobot) {
		t.Errorf("RobotsTaking(env_url) = %v, want the three remote robots", got)
	}
	if _, err := FindRobot(robots, "no_such_robot"); !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), DefaultRobot) {
		t.Errorf("FindRobot(no_such_robot) = %v, want ErrBadArgument naming the robots", err)
	}
}

func TestRobotForSuite(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	cases := []struct{ suite, robot string }{
		{"libero_spatial_swap", "libero"}, {"libero_10", "libero"}, {"demo_clean", "robotwin"},
		{"composite_seen", "robocasa"}, {"robodojo_sim", "robodojo_xpl_rgb"},
	}
	for _, c := range cases {
		got, err := RobotForSuite(ctx, c.suite)
		if err != nil || got != c.robot {
			t.Errorf("RobotForSuite(%q) = %q, %v; want %q", c.suite, got, err, c.robot)
		}
	}
	_, err := RobotForSuite(ctx, "libero_nowhere")
	if !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), "libero_spatial_swap") {
		t.Errorf("unknown suite: err = %v, want ErrBadArgument naming the suites", err)
	}
}

package replay

import (
	"reflect"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/robotserver"
)

func TestRetargetWorkspace(t *testing.T) {
	tests := []struct{ in, want string }{
		{`robo = make("tabletop", task="x", seed=0, workspace="/runs/a b/ws", images="on-motion")`,
			`robo = make("tabletop", task="x", seed=0, workspace="/new", images="on-motion")`},
		{`robo = make(workspace = '/old\'s', seed=1)`, `robo = make(workspace="/new", seed=1)`},
		{`robo = make("tabletop", seed=0)`, `robo = make("tabletop", seed=0)`},
		{`my_workspace="/keep"`, `my_workspace="/keep"`},
	}
	for _, tc := range tests {
		if got := retargetWorkspace(tc.in, "/new"); got != tc.want {
			t.Errorf("retargetWorkspace(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// setupRobot reads the robot a setup cell makes (as robotapi.SetupCode writes it) for the robot server.
func TestSetupRobot(t *testing.T) {
	cell := func(src string) *notebooks.Notebook {
		return &notebooks.Notebook{Cells: []notebooks.Cell{
			{CellType: notebooks.CellMarkdown, Source: `make("wrong")`},
			{CellType: notebooks.CellCode, Source: src, Metadata: map[string]any{notebooks.MetaKey: notebooks.CellMeta{Author: notebooks.AuthorSetup}.Map()}},
		}}
	}
	setup := robotapi.SetupCode(robotapi.SetupOptions{Robot: "libero", Task: "t \"q\"", Seed: 3, Workspace: "/w", Images: "none",
		Primitives: "no-vla", Suite: "libero_spatial", MaxEnvSteps: 500, Options: map[string]string{"libero_type": "x", "env_url": "http://h:1"}})
	got, err := setupRobot(cell(setup))
	if err != nil {
		t.Fatal(err)
	}
	want := robotserver.Options{Robot: "libero", Task: "t \"q\"", Seed: 3, Images: "none", Primitives: "no-vla", Suite: "libero_spatial",
		MaxEnvSteps: 500, Options: map[string]string{"libero_type": "x", "env_url": "http://h:1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("setupRobot:\n got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"", "print(1)", `robo = make(robot)`, `robo = make("tabletop", seed=99999999999999999999)`} {
		if _, err := setupRobot(cell(bad)); err == nil {
			t.Errorf("setupRobot(%q): no error", bad)
		}
	}
	// Only the setup cell counts: an agent cell's make() is not the episode's robot.
	nb := cell(`x = 1`)
	nb.Cells = append(nb.Cells, notebooks.Cell{CellType: notebooks.CellCode, Source: `make("tabletop")`,
		Metadata: map[string]any{notebooks.MetaKey: notebooks.CellMeta{Author: notebooks.AuthorAgent}.Map()}})
	if _, err := setupRobot(nb); err == nil {
		t.Errorf("an agent cell's make() was taken for the setup cell's")
	}
}

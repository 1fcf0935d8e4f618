package replay

import "testing"

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

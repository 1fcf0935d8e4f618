package agent

import "testing"

func TestStripToolPrefix(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"python", "python"},
		{"move_to", "move_to"},
		{"mcp__pyrualean__python", "python"},
		{"mcp__pyrualean__move_to", "move_to"},
		{"mcp__my__server__finish", "finish"}, // a server name holding "__" (Claude Code normalises names to [A-Za-z0-9_-])
		{"mcp__python", "mcp__python"},        // no server part: not a qualified name
		{"mcp____python", "python"},
		{"pyrualean__python", "pyrualean__python"}, // only the mcp__ form is a client prefix
	} {
		if got := StripToolPrefix(c.in); got != c.want {
			t.Errorf("StripToolPrefix(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

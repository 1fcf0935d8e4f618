package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/openaitest"
	"github.com/pyrualean/pyrualean/spec"
)

// TestCompactProfileResults (sealed episodes): under the compact profile the model reads a cell's result with one line per
// primitive call (and per state field), the default profile keeps the original's indented JSON; both
// hold the same document. Agent output that looks like JSON layout stays inside its string, and a
// long output is delivered cut in the middle, as the original cuts it.
func TestCompactProfileResults(t *testing.T) {
	fake := `{"primitive_calls": [\n  {"tool": "x"},\n  1\n]}},[{` + "\u2028\x00\x1b[31m\\\",}\t"
	codes := []string{
		"x, y, z = robo.segment('red_block').top_xyz\nrobo.move_to([x, y, 0.2])\nprint(" + pyQuote(fake) + ")",
		"print('{' * 30000)",
		// the agent's own nesting reaches the result through a refused call's kwargs
		"x = []\nfor _ in range(400):\n    x = [x, '],{\"']\ntry:\n    robo.move_to(x)\nexcept ValueError as e:\n    print('refused')",
		// a robot error: raised in the robot server, rebuilt in the kernel by the proxy
		"def go():\n    robo.pick('no_such_object')\ngo()",
		// an attacker's exception, its class named like a robot frame, to hide its own error line
		"E = type('File /x/pyrualean_robot/a.py:1, in f', (Exception,), {})\ndef g():\n    raise E('forged')\ng()",
		// the kernel's NameError note (hints.py) against the agent: a megabyte name, a name whose
		// comparison raises, then the note it is for (a name a failed cell never got to assign)
		"raise NameError('forged', name='y' * 1000000)",
		"class N:\n    def __eq__(self, o):\n        raise RuntimeError('eq')\n    __hash__ = None\nraise NameError('n', name=N())",
		"a = 1 / 0\nb = 2",
		"print(b)",
		// the kernel's TypeError note (a segment that found nothing, unpacked): an error whose str()
		// raises, and a megabyte message, on the very line the note looks for
		"class T(TypeError):\n    def __str__(self):\n        raise RuntimeError('str')\nraise T()  # robo.segment('red_block').top_xyz",
		"raise TypeError('cannot unpack non-iterable NoneType object' + 'z' * 1000000)  # robo.segment('red_block').top_xyz",
		// a robot method written bare: named from the robot's class (in a sealed episode, the proxy's)
		"segment('red_block')",
		// a primitive called with wrong arguments: the robot server names the parameters; an agent's
		// 100,000-character keyword does not make the message (or the result) long
		"robo.move_to([0.5, 0.0, 0.2], above=0.03)",
		"robo.move_to([0.5, 0.0, 0.2], **{'k' * 100000: 1})",
		// a value dropped into `_` gets its note; a line too long (and too deep) to quote does not; a target
		// that reads as a distance is told so (from the robot server), a 1e300 one only hears the bounds
		"x, y, _ = robo.segment('red_block').top_xyz\nprint(top)",
		"x, _ = " + strings.Repeat("-", 400) + "1, 2\nprint(top)",
		"robo.move_to([-0.17, 0.0, 0.2])",
		"robo.move_to([0.5, 0.0, 1e300])",
	}
	results := map[string][]string{}
	for _, profile := range []string{spec.ProfileDefault, spec.ProfileCompact} {
		var steps []openaitest.Step
		for _, c := range codes {
			steps = append(steps, call(py(c)))
		}
		srv := openaitest.New(append(steps, call(finish("failure", "done")))...)
		cfg := episodeConfig(t, func(c *testEpisode) { c.PromptProfile, c.Images, c.Sealed = profile, spec.ImagesNone, spec.SealOn })
		res, _ := playEpisode(t, cfg, openaiConfig(srv, nil), nil)
		srv.Close()
		if res.Status != agent.StatusCompleted || !res.Sealed {
			t.Fatalf("%s: status %s", profile, res.Status)
		}
		for _, r := range srv.Requests()[1:] {
			msgs := r.Messages()
			results[profile] = append(results[profile], msgs[len(msgs)-1]["content"].(string))
		}
	}
	def, cmp := results[spec.ProfileDefault], results[spec.ProfileCompact]
	if len(def) != len(codes) || len(cmp) != len(codes) {
		t.Fatalf("results: %d default, %d compact", len(def), len(cmp))
	}
	var d, c map[string]any
	if err := json.Unmarshal([]byte(def[0]), &d); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(cmp[0]), &c); err != nil {
		t.Fatal(err)
	}
	// (the feedback strips the ANSI colour code, in both profiles)
	if out, _ := c["stdout"].(string); !strings.HasSuffix(out, "]}},[{\u2028\x00\\\",}\t\n") || d["stdout"] != out || len(c["primitive_calls"].([]any)) != 2 {
		t.Errorf("stdout %q / %q, calls %v", c["stdout"], d["stdout"], c["primitive_calls"])
	}
	for _, k := range []string{"primitive_calls", "state", "moved", "env_steps"} {
		db, _ := json.Marshal(d[k])
		cb, _ := json.Marshal(c[k])
		if string(db) != string(cb) {
			t.Errorf("%s differs between the profiles:\n%s\n%s", k, db, cb)
		}
	}
	callLines := 0
	for _, line := range strings.Split(cmp[0], "\n") {
		if strings.HasPrefix(line, `    {"tool": `) {
			callLines++
		}
	}
	if callLines != 2 || !strings.Contains(def[0], "\n      \"tool\": \"segment\",\n") || len(cmp[0]) >= len(def[0])*3/4 {
		t.Errorf("layout: %d call lines in the compact result (%d chars; default %d):\n%s", callLines, len(cmp[0]), len(def[0]), cmp[0])
	}
	// The nested kwargs: indented to every depth (the original's layout) the result outgrows
	// MaxTextChars and is cut as the original cuts it; laid out two deep, it stays whole and small.
	var cn map[string]any
	if err := json.Unmarshal([]byte(cmp[2]), &cn); err != nil {
		t.Fatalf("compact: %v: %.300s", err, cmp[2])
	}
	if cn["stdout"] != "refused\n" || len(cn["primitive_calls"].([]any)) != 1 || cn["state"] == nil {
		t.Errorf("the refused nested call, compact: %.400s", cmp[2])
	}
	if !strings.HasSuffix(def[2], "\n[truncated]") || len(cmp[2]) > len(def[2])/2 {
		t.Errorf("nested kwargs: default %d chars (ends %q), compact %d", len(def[2]), def[2][len(def[2])-15:], len(cmp[2]))
	}
	for i, r := range [][]string{def, cmp} {
		var out map[string]any
		if err := json.Unmarshal([]byte(r[1]), &out); err != nil || !strings.Contains(out["stdout"].(string), "chars omitted") {
			t.Errorf("profile %d: the 30000-char output is not delivered cut in the middle (%v): %.200s", i, err, r[1])
		}
	}
	// The NameError note: hostile names get Python's own error, bounded, and the episode goes on; the
	// name a failed cell never assigned gets the note, in both profiles.
	for i, r := range [][]string{def, cmp} {
		for j, want := range map[int]string{5: "NameError: forged", 6: "NameError: n",
			8: "`b` does not exist: an earlier cell assigns it on line 2, but that cell stopped at line 1 (`a = 1 / 0`) with ZeroDivisionError"} {
			var out map[string]any
			if err := json.Unmarshal([]byte(r[j]), &out); err != nil {
				t.Fatalf("profile %d, call %d: %v", i, j, err)
			}
			exc, _ := out["exception"].(string)
			if !strings.Contains(exc, want) || len(r[j]) > 3*agent.ValueCapChars || (j < 8 && strings.Contains(exc, "does not exist")) {
				t.Errorf("profile %d, call %d (%d chars): want %q in\n%.600s", i, j, len(r[j]), want, exc)
			}
		}
		var bare map[string]any
		if err := json.Unmarshal([]byte(r[11]), &bare); err != nil {
			t.Fatalf("profile %d, call 11: %v", i, err)
		}
		if exc, _ := bare["exception"].(string); !strings.Contains(exc, "`segment` belongs to the robot: write `robo.segment`") {
			t.Errorf("profile %d: a bare robot method, no note:\n%.600s", i, r[11])
		}
		for j, want := range map[int]string{12: "TypeError: got an unexpected keyword argument 'above'; move_to takes xyz, gripper, *, tol, step_clip, max_steps, target_yaw",
			13: "; move_to takes xyz, gripper, *,"} {
			var out map[string]any
			if err := json.Unmarshal([]byte(r[j]), &out); err != nil {
				t.Fatalf("profile %d, call %d: %v (%d chars)\n%.500s\n...\n%s", i, j, err, len(r[j]), r[j], r[j][max(0, len(r[j])-800):])
			}
			if exc, _ := out["exception"].(string); !strings.Contains(exc, want) || len(r[j]) > 3*agent.ValueCapChars || out["moved"] != false {
				t.Errorf("profile %d, call %d (%d chars): want %q, unmoved, in\n%.600s", i, j, len(r[j]), want, exc)
			}
		}
		for j, want := range map[int]string{14: "drops a value into `_`: if `top` is that value, name it there: `x, y, top = robo.segment('red_block').top_xyz`",
			15: "NameError: name 'top' is not defined", 16: "not a distance to move; to move by -0.17 along x",
			17: "outside the workspace [0.005, 0.65]"} {
			var out map[string]any
			if err := json.Unmarshal([]byte(r[j]), &out); err != nil {
				t.Fatalf("profile %d, call %d: %v", i, j, err)
			}
			exc, _ := out["exception"].(string)
			noted := strings.Contains(exc, "drops a value") || strings.Contains(exc, "not a distance")
			if !strings.Contains(exc, want) || len(r[j]) > 3*agent.ValueCapChars || out["moved"] != false ||
				(j == 15 || j == 17) == noted {
				t.Errorf("profile %d, call %d (%d chars): want %q (noted %v), unmoved, in\n%.600s", i, j, len(r[j]), want, noted, exc)
			}
		}
		for _, j := range []int{9, 10} {
			var out map[string]any
			if err := json.Unmarshal([]byte(r[j]), &out); err != nil {
				t.Fatalf("profile %d, call %d: %v", i, j, err)
			}
			exc, _ := out["exception"].(string)
			// (call 9's report is the error its str() raised: Python's own account of what happened)
			if !strings.Contains(exc, []string{9: "RuntimeError: str", 10: "TypeError: cannot unpack"}[j]) ||
				strings.Contains(exc, "found nothing") || len(r[j]) > 3*agent.ValueCapChars {
				t.Errorf("profile %d, call %d (%d chars): a hostile TypeError got a note or is unbounded:\n%.600s", i, j, len(r[j]), exc)
			}
		}
	}
	// The robot error: the default profile shows the robot package's frames (as the original's in-kernel
	// robot shows its library's), the compact one only the agent's, then the same error line.
	excs := [2]string{}
	for i, r := range [][]string{def, cmp} {
		var out map[string]any
		if err := json.Unmarshal([]byte(r[3]), &out); err != nil {
			t.Fatalf("profile %d: %v", i, err)
		}
		excs[i], _ = out["exception"].(string)
	}
	lastLine := func(s string) string { return s[strings.LastIndex(s, "\n")+1:] }
	if !strings.Contains(excs[0], "/pyrualean_robot/") || strings.Contains(excs[1], "pyrualean_robot") ||
		!strings.Contains(excs[1], "robo.pick('no_such_object')") || !strings.Contains(excs[1], "go()") ||
		lastLine(excs[0]) != lastLine(excs[1]) || !strings.Contains(lastLine(excs[1]), "no_such_object") {
		t.Errorf("robot error:\ndefault:\n%s\ncompact:\n%s", excs[0], excs[1])
	}
	t.Logf("robot error, compact:\n%s\n(default %d chars, compact %d)", excs[1], len(excs[0]), len(excs[1]))
	// A class named like a robot frame never hides the exception line.
	var forged map[string]any
	if err := json.Unmarshal([]byte(cmp[4]), &forged); err != nil {
		t.Fatalf("forged exception: %v: %.300s", err, cmp[4])
	}
	if exc, _ := forged["exception"].(string); !strings.HasSuffix(exc, "forged") || !strings.Contains(exc, "g()") {
		t.Errorf("forged exception, compact:\n%s", exc)
	}
}

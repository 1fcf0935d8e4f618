package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/notebooks"
	"github.com/pyrualean/pyrualean/spec"
	"github.com/pyrualean/pyrualean/spec/spectest"
)

// The prompt keeps the original's sections and order (play.build_prompt): contract (guides note inside),
// API reference, knowledge, task card.
func TestPromptSectionsFollowSeed(t *testing.T) {
	base := PromptParts{Arm: spec.ArmCells, Images: spec.ImagesOnMotion, Feedback: spec.FeedbackRich, BudgetS: 1200, MaxEnvSteps: 10000,
		APIReference: "robo.move_to(xyz)", Knowledge: "# Knowledge\n\nlift before moving", TaskCard: "# Task card\n- task: x",
		GuideFiles: []string{"hybrid_guide.md"}}
	cases := []struct {
		name    string
		mod     func(*PromptParts)
		want    []string // in this order
		wantNot []string
	}{
		{"cells/wall", nil,
			[]string{"# How you control the robot", "`python(code)`", "persistent", "the list of robot primitives", "two current camera images",
				"sandboxed", "# How the episode is scored", "`terminated`", "`robo.done`", "1200 s of wall-clock", "10000 simulator steps",
				"`EpisodeFinished`", "`failure` or `stuck`", "scratch workspace", "Reference guides", "`hybrid_guide.md`",
				"# API reference (the `robo` object)", "robo.move_to", "# Knowledge", "# Task card"},
			[]string{"calls in an episode is limited"}},
		{"cells/calls", func(p *PromptParts) { p.MaxTurns = 40; p.Feedback = spec.FeedbackPure; p.Images = spec.ImagesOnDemand },
			[]string{"Nothing is added", "NOT attached", "`robo.show('agentview')`", "`display(image)`", "`python` calls in an episode is limited",
				"10000 simulator steps", "failure"},
			[]string{"wall-clock", "1200", "40", "primitives the call made"}},
		{"cells/none", func(p *PromptParts) { p.Images = spec.ImagesNone; p.GuideFiles = nil }, []string{"never attached"}, []string{"Reference guides"}},
		{"tools", func(p *PromptParts) { p.Arm = spec.ArmTools; p.Images = spec.ImagesOnDemand },
			[]string{"Each robot primitive is a tool", "`show` tool", "# API reference (each primitive is a tool"},
			[]string{"`python(code)`", "display(image)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			if tc.mod != nil {
				tc.mod(&p)
			}
			text := BuildPrompt(p)
			at := 0
			for _, w := range tc.want {
				i := strings.Index(text[at:], w)
				if i < 0 {
					t.Fatalf("prompt lacks %q after offset %d:\n%s", w, at, text)
				}
				at += i
			}
			for _, w := range tc.wantNot {
				if strings.Contains(text, w) {
					t.Errorf("prompt says %q:\n%s", w, text)
				}
			}
		})
	}
}

func testPNG(t *testing.T, w, h int) string {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// The card renders like the original's TaskCard.render: LIBERO layout, generic layout with facts in order.
func TestRenderCardFollowsSeed(t *testing.T) {
	op := 0.08
	libero := Card{Robot: "libero", Suite: "libero_spatial", Task: "3", Seed: 7, TaskLanguage: "pick up the bowl's lid",
		ObjectNames: []string{"bowl", "plate"}, EEFPos: []float64{-0.2, 0, 1.1}, GripperOpening: &op, MaxEnvSteps: 10000,
		Images: map[string]string{"agentview_high": testPNG(t, 32, 24), "wrist": testPNG(t, 8, 8)}}
	got := RenderCard(libero)
	want := "# Task card\n- suite: libero_spatial\n- task: 3\n- seed: 7\n" +
		"- task instruction (authoritative): \"pick up the bowl's lid\"\n- movable objects in the scene: bowl, plate\n" +
		"- initial gripper position [x, y, z]: [-0.200, 0.000, 1.100] m, opening 0.080 (open, pointing down)\n" +
		"- simulator step budget: 10000\n" +
		"- attached images: agentview_high (agentview_high.png), wrist (wrist.png). They are step 0 of your run, what " +
		"`robo.image('agentview')` / `robo.image('wrist')` return before any motion; a pixel (row, col) read off the " +
		"32x24 agentview image becomes world coordinates at run time through `robo.back_project(row, col, step=0)`.\n"
	if got != want {
		t.Errorf("libero card:\n%s\nwant:\n%s", got, want)
	}
	raw := []byte(`{"robot":"robotwin","suite":"demo_clean","task":"beat_block_hammer","seed":100000,"task_language":"beat it",
		"object_names":["hammer"],"max_env_steps":500,"facts":{"zeta":1,"arms":["left","right"],"open":true,"frame":{"x":"across"}}}`)
	c, err := parseCard(raw)
	if err != nil {
		t.Fatal(err)
	}
	got = RenderCard(c)
	want = "# Task card\n- robot: robotwin\n- task: beat_block_hammer\n- variant: demo_clean\n- seed: 100000\n" +
		"- task instruction (authoritative): 'beat it'\n- objects named by the benchmark: hammer\n" +
		"- zeta: 1\n- arms: ['left', 'right']\n- open: True\n- frame: {'x': 'across'}\n- simulator step budget: 500\n"
	if got != want {
		t.Errorf("generic card:\n%s\nwant:\n%s", got, want)
	}
}

// Rich feedback keeps the original's key order, flattens each call's summary (without eef_pos) and keeps the
// robot's key order inside state and kwargs.
func TestRichFeedbackShape(t *testing.T) {
	report := []byte(`{"moved":true,"env_steps":12,"env_steps_total":40,"calls":[
		{"index":0,"tool":"move_to","kwargs":{"xyz":[0.5,0,0.3],"gripper":null},"ok":true,"stateful":true,"error":null,
		 "summary":{"reached":true,"eef_pos":[1,2,3],"terminated":false}},
		{"index":1,"tool":"artifact","kwargs":{},"ok":true,"error":null,"summary":{}}],
		"state":{"gripper_opening":0.08,"eef_pos":[0.5,0,0.3],"done":false},"done":false,"success":false,"episode_finished":null}`)
	var r cellReport
	if err := json.Unmarshal(report, &r); err != nil {
		t.Fatal(err)
	}
	outs := []notebooks.Output{
		{OutputType: notebooks.OutputStream, Name: "stdout", Text: "hi\n"},
		{OutputType: notebooks.OutputDisplayData, Data: notebooks.MimeBundle{"image/png": testPNG(t, 4, 4)},
			Metadata: map[string]any{"pyrualean": map[string]any{"source": "on-motion", "camera": "agentview"}}},
		{OutputType: notebooks.OutputExecuteResult, Data: notebooks.MimeBundle{"text/plain": "42"}},
	}
	res, _ := buildCellFeedback(cellRun{Index: 2, Outputs: outs, Report: &r}, spec.FeedbackRich, spec.ImagesOnMotion, nil, styleOriginal)
	want := `{
  "cell": 2,
  "value": "42",
  "stdout": "hi\n",
  "stderr": "",
  "elapsed_s": 0,
  "primitive_calls": [
    {
      "tool": "move_to",
      "kwargs": {
        "xyz": [
          0.5,
          0,
          0.3
        ],
        "gripper": null
      },
      "ok": true,
      "error": null,
      "reached": true,
      "terminated": false
    }
  ],
  "moved": true,
  "env_steps": 12,
  "state": {
    "gripper_opening": 0.08,
    "eef_pos": [
      0.5,
      0,
      0.3
    ],
    "done": false
  },
  "episode_done": false,
  "images": [
    "agentview.png"
  ]
}`
	if res.Text != want {
		t.Errorf("rich feedback:\n%s\nwant:\n%s", res.Text, want)
	}
}

// The original's tests/test_arms.py assertions, against the production cells toolkit on a real kernel.
func TestCellsArmMatchesSeedAssertions(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a real episode (kernel, MuJoCo): not in the fast tier")
	}
	root, err := FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	start := func(t *testing.T, feedback string, maxTurns int) (*Episode, context.Context) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		t.Cleanup(cancel)
		s := spectest.Tabletop(t, func(s *spec.Episode) { s.Images, s.Feedback, s.MaxCalls = spec.ImagesOnMotion, feedback, maxTurns })
		ep, err := StartEpisode(ctx, s, Host{Root: root})
		if err != nil {
			t.Fatalf("StartEpisode: %v", err)
		}
		t.Cleanup(func() { ep.Finish(context.Background(), "", nil) })
		return ep, ctx
	}
	run := func(t *testing.T, ep *Episode, ctx context.Context, code string) (ToolResult, map[string]json.RawMessage) {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"code": code})
		res, err := ep.Toolkit().Call(ctx, "python", args)
		if err != nil {
			t.Fatalf("python %q: %v", code, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(res.Text), &m); err != nil {
			t.Fatalf("feedback is not JSON: %v\n%s", err, res.Text)
		}
		return res, m
	}
	str := func(raw json.RawMessage) string {
		var s string
		json.Unmarshal(raw, &s)
		return s
	}
	keys := func(text string) []string {
		v, _ := decodeOrdered([]byte(text))
		if o, ok := v.(*jsonObject); ok {
			return o.keys
		}
		return nil
	}

	t.Run("rich", func(t *testing.T) {
		ep, ctx := start(t, spec.FeedbackRich, 0)
		var names []string
		for _, s := range ep.Toolkit().Tools() {
			names = append(names, s.Name)
		}
		if strings.Join(names, ",") != "python,finish" {
			t.Errorf("tools %v, want python,finish", names)
		}
		if _, m := run(t, ep, ctx, "41 + 1"); str(m["value"]) != "42" {
			t.Errorf("trailing value %s, want \"42\"", m["value"])
		}
		res, m := run(t, ep, ctx, "robo.move_to([0.5, 0.0, 0.3])")
		var imgs []string
		json.Unmarshal(m["images"], &imgs)
		if strings.Join(imgs, ",") != "agentview.png,wrist.png" || len(res.Images) != 2 {
			t.Errorf("images after motion %v (%d attached)", imgs, len(res.Images))
		}
		var calls []map[string]any
		json.Unmarshal(m["primitive_calls"], &calls)
		if len(calls) == 0 || calls[0]["tool"] != "move_to" {
			t.Fatalf("primitive_calls %s", m["primitive_calls"])
		}
		if _, nested := calls[0]["summary"]; nested {
			t.Errorf("summary not flattened into the call: %v", calls[0])
		}
		if _, pos := calls[0]["eef_pos"]; pos {
			t.Errorf("eef_pos kept in the call: %v", calls[0])
		}
		want := "cell,value,stdout,stderr,elapsed_s,primitive_calls,moved,env_steps,state,episode_done,images" // move_to returns a Move
		if got := strings.Join(keys(res.Text), ","); got != want {
			t.Errorf("rich keys %s, want %s", got, want)
		}
		res, m = run(t, ep, ctx, "1/0")
		if !strings.Contains(str(m["exception"]), "ZeroDivisionError") || res.IsError {
			t.Errorf("exception %s (IsError %v)", m["exception"], res.IsError)
		}
		if k := keys(res.Text); len(k) < 3 || k[1] != "exception" || k[2] != "stdout" {
			t.Errorf("exception keys %v", k)
		}
		// the frame is named as the original names it, by the agent's call, not IPython's count
		if want := fmt.Sprintf(`File "<cell %s>", line 1`, m["cell"]); !strings.Contains(str(m["exception"]), want) || strings.Contains(str(m["exception"]), "Cell In[") {
			t.Errorf("exception %s: want the frame %s", m["exception"], want)
		}
		run(t, ep, ctx, "grasp = robo.pick(\"red_block\")\nassert grasp.success, grasp\n"+
			"base = robo.segment(\"blue block\")\nx, y, top = base.top_xyz\nrobo.move_to([x, y, top + 0.10])\n"+
			"robo.move_to([x, y, top + 0.025], step_clip=0.01)\nrobo.release()\n")
		res, m = run(t, ep, ctx, "robo.move_to([0.5, 0.0, 0.3])")
		if str(m["episode_finished"]) != "terminated" || !res.EpisodeDone || res.Finished {
			t.Errorf("motion after success: %s", res.Text)
		}
	})

	t.Run("pure", func(t *testing.T) {
		ep, ctx := start(t, spec.FeedbackPure, 2)
		res, m := run(t, ep, ctx, "x = 41\nx + 1")
		if got := strings.Join(keys(res.Text), ","); got != "cell,value,stdout,stderr,elapsed_s" || str(m["value"]) != "42" {
			t.Errorf("pure keys %s value %s", got, m["value"])
		}
		res, m = run(t, ep, ctx, "display(np.zeros((8, 8, 3), dtype=np.uint8))")
		if string(m["images"]) == "" || !strings.Contains(string(m["images"]), `"display_0"`) || len(res.Images) != 1 {
			t.Errorf("display images %s (%d attached)", m["images"], len(res.Images))
		}
		res, m = run(t, ep, ctx, "x")
		if !res.IsError || str(m["error"]) != "call budget exhausted: the episode is over, call finish" || string(m["cell"]) != "2" {
			t.Errorf("third call with max_turns=2: %s", res.Text)
		}
	})
}

// relabelCells names IPython's "Cell In[N]" frames by the episode's labels; counts it has no label for stay.
func TestRelabelCells(t *testing.T) {
	labels := map[int]string{4: "<cell 3>", 6: "<a person's cell 1>"}
	tests := []struct{ name, in, want string }{
		{"agent's cell", "  Cell In[4], line 3\n    f()", `  File "<cell 3>", line 3` + "\n    f()"},
		{"person's cell", "Cell In[6], line 1", `File "<a person's cell 1>", line 1`},
		{"two frames", "Cell In[6], line 2\nCell In[4], line 9", `File "<a person's cell 1>", line 2` + "\n" + `File "<cell 3>", line 9`},
		{"setup cell unlabelled", "Cell In[1], line 1", "Cell In[1], line 1"},
		{"no frame", "ValueError: Cell In[4] is text here", "ValueError: Cell In[4] is text here"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := relabelCells(tc.in, labels); got != tc.want {
				t.Errorf("relabelCells(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	if got := relabelCells("Cell In[4], line 1", nil); got != "Cell In[4], line 1" {
		t.Errorf("no labels: %q", got)
	}
}

// Exceptions read like traceback.format_exc (the original's cells), not like IPython's verbose report.
func TestTracebackIsPlain(t *testing.T) {
	red := func(s string) string { return "\x1b[91m" + s + "\x1b[39m" }
	tb := []string{
		red(strings.Repeat("-", 75)),
		red("ValueError") + "                                Traceback (most recent call last)",
		"Cell In[4], line 3\n      1 def f():\n      2     return robo.move_to([9, 9, 9, 9])\n\x1b[92m----> \x1b[39m\x1b[92m3\x1b[39m f()\n",
		"File \x1b[32m/x/base.py:61\x1b[39m, in wrapper(self, *args)\n     59 @functools.wraps(fn)\n---> 61     return self._run_tool(fn)\n     62 \n",
		red("ValueError") + ": xyz must be three numbers\nsecond line",
	}
	want := "Traceback (most recent call last):\n  Cell In[4], line 3\n    f()\n  File /x/base.py:61, in wrapper(self, *args)\n" +
		"    return self._run_tool(fn)\nValueError: xyz must be three numbers\nsecond line"
	if got := joinTraceback(tb, "ValueError", "xyz must be three numbers\nsecond line", true); got != want {
		t.Errorf("traceback:\n%s\nwant:\n%s", got, want)
	}
	syntax := []string{"  Cell In[3], line 1\n    def f(\n         ^\n", "SyntaxError: incomplete input\n"}
	if got := joinTraceback(syntax, "SyntaxError", "incomplete input", false); got != "  Cell In[3], line 1\n    def f(\n         ^\nSyntaxError: incomplete input" {
		t.Errorf("syntax error:\n%q", got)
	}
}

// The compact profile leaves the robot package's frames out of a traceback; the original's keeps them.
func TestTracebackRobotFrames(t *testing.T) {
	tb := []string{
		"\x1b[91mValueError\x1b[39m                                Traceback (most recent call last)",
		"Cell In[4], line 2\n      1 def go():\n----> 2     robo.pick('x')\n",
		"File \x1b[32m/opt/r/robotapi/python/pyrualean_robot/served/proxy.py:102\x1b[39m, in _forward.<locals>.method(self, *args, **kwargs)\n--> 102     return self._call(name, args, kwargs)\n",
		"File /opt/r/robotapi/python/pyrualean_robot/served/proxy.py:72, in RobotProxy._call(self, name, args, kwargs)\n---> 72     raise rebuild_exception(out[\"raised\"])\n",
		"File /home/a/pyrualean_robot_notes.py:3, in helper()\n----> 3     f()\n", // not the package: kept
		"\x1b[91mValueError\x1b[39m: unknown object 'x'",
	}
	for _, tc := range []struct {
		robotFrames bool
		want        string
	}{
		{true, "Traceback (most recent call last):\n  Cell In[4], line 2\n    robo.pick('x')\n" +
			"  File /opt/r/robotapi/python/pyrualean_robot/served/proxy.py:102, in _forward.<locals>.method(self, *args, **kwargs)\n    return self._call(name, args, kwargs)\n" +
			"  File /opt/r/robotapi/python/pyrualean_robot/served/proxy.py:72, in RobotProxy._call(self, name, args, kwargs)\n    raise rebuild_exception(out[\"raised\"])\n" +
			"  File /home/a/pyrualean_robot_notes.py:3, in helper()\n    f()\nValueError: unknown object 'x'"},
		{false, "Traceback (most recent call last):\n  Cell In[4], line 2\n    robo.pick('x')\n" +
			"  File /home/a/pyrualean_robot_notes.py:3, in helper()\n    f()\nValueError: unknown object 'x'"},
	} {
		if got := joinTraceback(tb, "ValueError", "unknown object 'x'", tc.robotFrames); got != tc.want {
			t.Errorf("robotFrames %v:\n%s\nwant:\n%s", tc.robotFrames, got, tc.want)
		}
	}
}

// A robot with other cameras is described with its own (the original words each robot's contract).
func TestImageNoteNamesTheRobotsCameras(t *testing.T) {
	p := PromptParts{Arm: spec.ArmCells, Images: spec.ImagesOnMotion, MotionCameras: []string{"head", "left_wrist", "right_wrist"},
		Cameras: []string{"head", "left_wrist", "right_wrist"}}
	if got := imageNote(p); !strings.Contains(got, "the current camera images (head, left_wrist and right_wrist)") {
		t.Errorf("on-motion note: %s", got)
	}
	p.Images = spec.ImagesOnDemand
	if got := imageNote(p); !strings.Contains(got, "`robo.show('head')` or `robo.show('left_wrist')` or `robo.show('right_wrist')`") {
		t.Errorf("on-demand note: %s", got)
	}
}

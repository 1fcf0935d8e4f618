package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pyrualean/pyrualean/notebooks"
)

// msg builds an iopub message as a kernel sends it; content is raw JSON or a value to encode.
func msg(t testing.TB, msgType string, content any) *Message {
	t.Helper()
	m, err := newMessage(msgType, "kernel-session", content)
	if err != nil {
		t.Fatal(err)
	}
	m.Channel = IOPub
	return m
}

func stream(t testing.TB, name, text string) *Message {
	return msg(t, "stream", map[string]string{"name": name, "text": text})
}

func displayMsg(t testing.TB, msgType, id string, data map[string]any) *Message {
	c := map[string]any{"data": data, "metadata": map[string]any{}}
	if id != "" {
		c["transient"] = map[string]string{"display_id": id}
	}
	if msgType == "execute_result" {
		c["execution_count"] = 7
	}
	return msg(t, msgType, c)
}

func clearOut(t testing.TB, wait bool) *Message {
	return msg(t, "clear_output", map[string]bool{"wait": wait})
}

func so(name, text string) notebooks.Output {
	return notebooks.Output{OutputType: notebooks.OutputStream, Name: name, Text: text}
}

func dd(id, text string) notebooks.Output {
	return notebooks.Output{OutputType: notebooks.OutputDisplayData, Data: notebooks.MimeBundle{"text/plain": text}, Metadata: map[string]any{}, DisplayID: id}
}

// TestOutputBuilder: the nbclient/JupyterLab semantics, without limits in the way.
func TestOutputBuilder(t *testing.T) {
	seven := 7
	cases := []struct {
		name    string
		msgs    func(t *testing.T) []*Message
		want    []notebooks.Output
		updates []notebooks.Output
	}{
		{"streams of one name merge", func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", "a"), stream(t, "stdout", "b\n"), stream(t, "stdout", "c")}
		}, []notebooks.Output{so("stdout", "ab\nc")}, nil},
		{"another stream or output in between splits", func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", "a"), stream(t, "stderr", "e"), stream(t, "stdout", "b"),
				displayMsg(t, "display_data", "", map[string]any{"text/plain": "d"}), stream(t, "stdout", "c")}
		}, []notebooks.Output{so("stdout", "a"), so("stderr", "e"), so("stdout", "b"), dd("", "d"), so("stdout", "c")}, nil},
		{"clear_output clears now", func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", "a"), clearOut(t, false), stream(t, "stdout", "b")}
		}, []notebooks.Output{so("stdout", "b")}, nil},
		{"clear_output(wait) clears at the next output", func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", "a"), clearOut(t, true), stream(t, "stdout", "b")}
		}, []notebooks.Output{so("stdout", "b")}, nil},
		{"clear_output(wait) with nothing after keeps", func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", "a"), clearOut(t, true)}
		}, []notebooks.Output{so("stdout", "a")}, nil},
		{"an update does not trigger a waiting clear", func(t *testing.T) []*Message {
			return []*Message{displayMsg(t, "display_data", "d1", map[string]any{"text/plain": "v1"}), clearOut(t, true),
				displayMsg(t, "update_display_data", "d1", map[string]any{"text/plain": "v2"})}
		}, []notebooks.Output{dd("d1", "v2")}, nil},
		{"update_display_data replaces every output with its id", func(t *testing.T) []*Message {
			return []*Message{displayMsg(t, "display_data", "d1", map[string]any{"text/plain": "v1"}), stream(t, "stdout", "x"),
				displayMsg(t, "display_data", "d2", map[string]any{"text/plain": "other"}),
				displayMsg(t, "display_data", "d1", map[string]any{"text/plain": "v2"}),
				displayMsg(t, "update_display_data", "d1", map[string]any{"text/plain": "v3"})}
		}, []notebooks.Output{dd("d1", "v3"), so("stdout", "x"), dd("d2", "other"), dd("d1", "v3")}, nil},
		{"a display shown again updates the earlier ones (nbclient)", func(t *testing.T) []*Message {
			return []*Message{displayMsg(t, "display_data", "d1", map[string]any{"text/plain": "v1"}),
				displayMsg(t, "display_data", "d1", map[string]any{"text/plain": "v2"})}
		}, []notebooks.Output{dd("d1", "v2"), dd("d1", "v2")}, nil},
		{"updates for other cells' displays are handed back, the latest per id", func(t *testing.T) []*Message {
			return []*Message{displayMsg(t, "update_display_data", "old", map[string]any{"text/plain": "u1"}),
				displayMsg(t, "update_display_data", "older", map[string]any{"text/plain": "w"}),
				displayMsg(t, "update_display_data", "old", map[string]any{"text/plain": "u2"})}
		}, []notebooks.Output{}, []notebooks.Output{dd("old", "u2"), dd("older", "w")}},
		{"an update after its display was cleared goes to other cells", func(t *testing.T) []*Message {
			return []*Message{displayMsg(t, "display_data", "d1", map[string]any{"text/plain": "v1"}), clearOut(t, false),
				displayMsg(t, "update_display_data", "d1", map[string]any{"text/plain": "v2"})}
		}, []notebooks.Output{}, []notebooks.Output{dd("d1", "v2")}},
		{"execute_result keeps its count and exact numbers", func(t *testing.T) []*Message {
			return []*Message{msg(t, "execute_result", json.RawMessage(`{"execution_count": 7, "data": {"text/plain": "1", "application/json": {"x": 1.0000000000000001, "big": 12345678901234567890}}, "metadata": {"w": 0.1}, "transient": {}}`))}
		}, []notebooks.Output{{OutputType: notebooks.OutputExecuteResult, ExecutionCount: &seven, Metadata: map[string]any{"w": json.Number("0.1")},
			Data: notebooks.MimeBundle{"text/plain": "1", "application/json": map[string]any{"x": json.Number("1.0000000000000001"), "big": json.Number("12345678901234567890")}}}}, nil},
		{"error", func(t *testing.T) []*Message {
			return []*Message{msg(t, "error", map[string]any{"ename": "ZeroDivisionError", "evalue": "division by zero", "traceback": []string{"tb"}})}
		}, []notebooks.Output{{OutputType: notebooks.OutputError, Ename: "ZeroDivisionError", Evalue: "division by zero", Traceback: []string{"tb"}}}, nil},
		{"carriage returns keep a line's last state, across chunks", func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", "10%"), stream(t, "stdout", "\r50%"), stream(t, "stdout", "\r100%\nnext\r\n")}
		}, []notebooks.Output{so("stdout", "100%\nnext\r\n")}, nil},
		{"backspaces erase, then carriage returns", func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", "abc\b\bX\nab\rc\b\n\b\bé\bz")}
		}, []notebooks.Output{so("stdout", "aX\nab\r\nz")}, nil},
		{"messages without outputs are ignored", func(t *testing.T) []*Message {
			return []*Message{msg(t, "status", map[string]string{"execution_state": "busy"}), msg(t, "execute_input", map[string]any{"code": "1"}),
				msg(t, "comm_msg", map[string]any{}), stream(t, "stdout", "a")}
		}, []notebooks.Output{so("stdout", "a")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewOutputBuilder(OutputLimits{})
			for _, m := range tc.msgs(t) {
				if err := b.Add(m); err != nil {
					t.Fatal(err)
				}
			}
			if got := b.Final(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("outputs\n got %#v\nwant %#v", got, tc.want)
			}
			if got := b.DisplayUpdates(); !reflect.DeepEqual(got, tc.updates) {
				t.Errorf("display updates\n got %#v\nwant %#v", got, tc.updates)
			}
			if b.Omitted().Any() {
				t.Errorf("omitted %+v, want nothing", b.Omitted())
			}
		})
	}
}

// TestOutputBuilderLive: AddLive hands each message over as it came, whole, beside what it keeps.
func TestOutputBuilderLive(t *testing.T) {
	b := NewOutputBuilder(OutputLimits{StreamBytes: 4})
	var live []notebooks.Output
	for _, m := range []*Message{stream(t, "stdout", "hello "), stream(t, "stdout", "world"), displayMsg(t, "display_data", "d", map[string]any{"text/plain": "1"}),
		displayMsg(t, "update_display_data", "d", map[string]any{"text/plain": "2"}), msg(t, "status", map[string]string{"execution_state": "idle"})} {
		o, err := b.AddLive(m)
		if err != nil {
			t.Fatal(err)
		}
		if o != nil {
			live = append(live, *o)
		}
	}
	want := []notebooks.Output{so("stdout", "hello "), so("stdout", "world"), dd("d", "1"), dd("d", "2")}
	if !reflect.DeepEqual(live, want) {
		t.Fatalf("live %#v", live)
	}
	if got := b.Final(); got[0].Text != "he\n... [7 bytes omitted] ...\nld" || got[1].Data["text/plain"] != "2" {
		t.Fatalf("final %#v", got)
	}
}

// TestOutputBuilderLimits: what each limit keeps, drops and marks, at and around its boundary.
func TestOutputBuilderLimits(t *testing.T) {
	png := func(n int) map[string]any {
		return map[string]any{"image/png": strings.Repeat("A", n), "text/plain": "<Image>"}
	}
	imgCost := len(displayMsg(t, "display_data", "", png(100)).Content) // every png(100) message costs this
	cases := []struct {
		name    string
		lim     OutputLimits
		msgs    func(t *testing.T) []*Message
		want    []notebooks.Output
		omitted OutputOmission
	}{
		{"text at the limit is whole", OutputLimits{StreamBytes: 20}, func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", strings.Repeat("a", 10)), stream(t, "stdout", strings.Repeat("b", 10))}
		}, []notebooks.Output{so("stdout", strings.Repeat("a", 10)+strings.Repeat("b", 10))}, OutputOmission{}},
		{"one byte over: head and tail around a marker", OutputLimits{StreamBytes: 20}, func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", strings.Repeat("a", 10)+"X"), stream(t, "stdout", strings.Repeat("b", 10))}
		}, []notebooks.Output{so("stdout", strings.Repeat("a", 10)+"\n... [1 bytes omitted] ...\n"+strings.Repeat("b", 10))}, OutputOmission{StreamBytes: 1}},
		{"a flood keeps its first and last bytes and its final print", OutputLimits{StreamBytes: 8}, func(t *testing.T) []*Message {
			ms := []*Message{stream(t, "stdout", "BEGIN")}
			for range 100 {
				ms = append(ms, stream(t, "stdout", strings.Repeat("x", 1000)))
			}
			return append(ms, stream(t, "stdout", "END\n"))
		}, []notebooks.Output{so("stdout", "BEGI\n... [100001 bytes omitted] ...\nEND\n")}, OutputOmission{StreamBytes: 100001}},
		{"runes are never split", OutputLimits{StreamBytes: 7}, func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", "ééééé")} // 10 bytes: head 3 -> "é", tail 4 -> "éé"
		}, []notebooks.Output{so("stdout", "é\n... [4 bytes omitted] ...\néé")}, OutputOmission{StreamBytes: 4}},
		{"a run cut inside a rune drops the whole rune", OutputLimits{StreamBytes: 6}, func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", "a€b€")} // head 3: "a" (€ has 3 bytes), tail 3: "€"
		}, []notebooks.Output{so("stdout", "a\n... [4 bytes omitted] ...\n€")}, OutputOmission{StreamBytes: 4}},
		{"the text limit spans streams: whole streams dropped in the middle are counted", OutputLimits{StreamBytes: 4}, func(t *testing.T) []*Message {
			return []*Message{stream(t, "stdout", "ab"), stream(t, "stderr", "EE"), stream(t, "stdout", "cd"), stream(t, "stderr", "FF"), stream(t, "stdout", "gh")}
		}, []notebooks.Output{so("stdout", "ab"), so("stderr", "\n... [6 bytes and 3 outputs omitted] ...\n"), so("stdout", "gh")}, OutputOmission{StreamBytes: 6, Outputs: 3}},
		{"too many outputs: the middle ones go", OutputLimits{Outputs: 4}, func(t *testing.T) []*Message {
			var ms []*Message
			for i := range 6 {
				ms = append(ms, displayMsg(t, "display_data", "", map[string]any{"text/plain": fmt.Sprint(i)}))
			}
			return ms
		}, []notebooks.Output{dd("", "0"), dd("", "1"), so("stdout", "\n... [2 outputs (text/plain) omitted] ...\n"), dd("", "4"), dd("", "5")},
			OutputOmission{Outputs: 2, RichBytes: 2 * int64(len(displayMsg(t, "display_data", "", map[string]any{"text/plain": "0"}).Content))}},
		{"rich data: head and tail of the images, the middle marked in the text around it", OutputLimits{RichBytes: 4 * imgCost}, func(t *testing.T) []*Message {
			var ms []*Message
			for i := range 5 {
				ms = append(ms, stream(t, "stdout", fmt.Sprint(i)), displayMsg(t, "display_data", "", png(100)))
			}
			return ms
		}, []notebooks.Output{so("stdout", "0"), dd("", ""), so("stdout", "1"), dd("", ""), so("stdout", "2\n... [1 output (image/png) omitted] ...\n3"), dd("", ""), so("stdout", "4"), dd("", "")},
			OutputOmission{Outputs: 1, RichBytes: int64(imgCost)}},
		{"an output larger than half the rich limit becomes a marker of its type", OutputLimits{RichBytes: 300}, func(t *testing.T) []*Message {
			return []*Message{displayMsg(t, "execute_result", "", png(1000)), stream(t, "stdout", "after")}
		}, []notebooks.Output{{OutputType: notebooks.OutputExecuteResult, ExecutionCount: new(7), Metadata: map[string]any{},
			Data: notebooks.MimeBundle{"text/plain": fmt.Sprintf("[image/png, text/plain output omitted: %d bytes, over the cell's output limit]", len(displayMsg(t, "execute_result", "", png(1000)).Content))}},
			so("stdout", "after")}, OutputOmission{Outputs: 1, RichBytes: int64(len(displayMsg(t, "execute_result", "", png(1000)).Content))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewOutputBuilder(tc.lim)
			for _, m := range tc.msgs(t) {
				if err := b.Add(m); err != nil {
					t.Fatal(err)
				}
			}
			got := b.Final()
			for i := range got { // images: compare what is kept, not the base64
				if got[i].Data["image/png"] != nil {
					got[i].Data = notebooks.MimeBundle{"text/plain": ""}
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("outputs\n got %#v\nwant %#v", got, tc.want)
			}
			if b.Omitted() != tc.omitted {
				t.Errorf("omitted %+v, want %+v", b.Omitted(), tc.omitted)
			}
		})
	}
}

// TestOutputBuilderLimitedEdges: markers keep what a reader needs (an error stays an error, a display
// keeps its id), updates respect the limits, and clear_output takes omissions away with the outputs.
func TestOutputBuilderLimitedEdges(t *testing.T) {
	big := strings.Repeat("v", 5000)
	t.Run("a huge error stays an error", func(t *testing.T) {
		b := NewOutputBuilder(OutputLimits{RichBytes: 1000})
		if err := b.Add(msg(t, "error", map[string]any{"ename": "ValueError", "evalue": big, "traceback": []string{big}})); err != nil {
			t.Fatal(err)
		}
		got := b.Final()
		if len(got) != 1 || got[0].OutputType != notebooks.OutputError || got[0].Ename != "ValueError" ||
			!strings.HasPrefix(got[0].Evalue, "vvv") || len(got[0].Evalue) > 2200 || !strings.Contains(got[0].Traceback[0], "omitted") {
			t.Fatalf("%#v", got)
		}
	})
	t.Run("a display update too large for its outputs makes them markers, id kept", func(t *testing.T) {
		b := NewOutputBuilder(OutputLimits{RichBytes: 4000})
		for _, m := range []*Message{displayMsg(t, "display_data", "d", map[string]any{"text/plain": "small"}),
			displayMsg(t, "display_data", "d", map[string]any{"text/plain": "small"}),
			displayMsg(t, "update_display_data", "d", map[string]any{"text/plain": big[:1500]})} {
			if err := b.Add(m); err != nil {
				t.Fatal(err)
			}
		}
		got := b.Final()
		if len(got) != 2 || got[0].DisplayID != "d" || !strings.Contains(got[0].Data["text/plain"].(string), "omitted") || got[1].Data["text/plain"] != got[0].Data["text/plain"] {
			t.Fatalf("%#v", got)
		}
		if o := b.Omitted(); o.Outputs != 1 {
			t.Fatalf("omitted %+v", o)
		}
	})
	t.Run("many updates of one display cost one", func(t *testing.T) {
		b := NewOutputBuilder(OutputLimits{})
		b.Add(displayMsg(t, "display_data", "d", map[string]any{"text/plain": "0"}))
		for i := range 20_000 {
			b.Add(displayMsg(t, "update_display_data", "d", map[string]any{"text/plain": fmt.Sprint(i)}))
			b.Add(displayMsg(t, "update_display_data", "elsewhere", map[string]any{"text/plain": fmt.Sprint(i)}))
		}
		if got := b.Final(); len(got) != 1 || got[0].Data["text/plain"] != "19999" {
			t.Fatalf("%#v", got)
		}
		if u := b.DisplayUpdates(); len(u) != 1 || u[0].Data["text/plain"] != "19999" {
			t.Fatalf("%#v", u)
		}
	})
	t.Run("updates for other cells hold at most the rich limit", func(t *testing.T) {
		b := NewOutputBuilder(OutputLimits{RichBytes: 3000})
		for i := range 5 {
			b.Add(displayMsg(t, "update_display_data", fmt.Sprint("id", i), map[string]any{"text/plain": big[:1000]}))
		}
		u := b.DisplayUpdates()
		markers := 0
		for _, o := range u {
			if strings.Contains(o.Data["text/plain"].(string), "omitted") {
				markers++
			}
		}
		if len(u) != 5 || markers == 0 || b.Omitted().DisplayUpdates != markers {
			t.Fatalf("%d updates, %d markers, omitted %+v", len(u), markers, b.Omitted())
		}
	})
	t.Run("clear_output clears the omissions with the outputs", func(t *testing.T) {
		b := NewOutputBuilder(OutputLimits{StreamBytes: 10})
		b.Add(stream(t, "stdout", big))
		b.Add(clearOut(t, false))
		b.Add(stream(t, "stdout", "done"))
		if got := b.Final(); !reflect.DeepEqual(got, []notebooks.Output{so("stdout", "done")}) || b.Omitted().Any() {
			t.Fatalf("%#v %+v", got, b.Omitted())
		}
	})
	t.Run("malformed outputs are errors and change nothing", func(t *testing.T) {
		b := NewOutputBuilder(OutputLimits{})
		for _, raw := range []string{`{"name": "stdout", "text": "a\u0001"}`, `{"name": "stdout", "text": "\x"}`, `[]`} {
			if err := b.Add(msg(t, "stream", json.RawMessage(strings.ReplaceAll(raw, `\u0001`, "\x01")))); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: err %v", raw, err)
			}
		}
		if err := b.Add(msg(t, "update_display_data", map[string]any{"data": map[string]any{}})); !errors.Is(err, ErrMalformed) {
			t.Errorf("update without display_id: %v", err)
		}
	})
}

// TestOutputBuilderStreamInvariants: for random floods over random limits, what is kept is exactly
// the text's head and tail, valid UTF-8, and kept + omitted is everything; memory held stays within
// the limit.
func TestOutputBuilderStreamInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "é", "€", "😀", "\n", "xyz", strings.Repeat("q", 300)}
	for i := range 300 {
		limit := 1 + rng.IntN(400)
		b := NewOutputBuilder(OutputLimits{StreamBytes: limit})
		var all strings.Builder
		for range rng.IntN(60) {
			var chunk strings.Builder
			for range rng.IntN(20) {
				chunk.WriteString(pieces[rng.IntN(len(pieces))])
			}
			all.WriteString(chunk.String())
			if err := b.Add(stream(t, "stdout", chunk.String())); err != nil {
				t.Fatal(err)
			}
			if b.text.head > b.text.headCap || b.text.tail > b.text.tailCap {
				t.Fatalf("case %d: held %d+%d over %d", i, b.text.head, b.text.tail, limit)
			}
		}
		full, got := all.String(), b.Final()
		if full == "" {
			continue
		}
		text := got[0].Text
		if !utf8.ValidString(text) {
			t.Fatalf("case %d: invalid UTF-8 %q", i, text)
		}
		om := b.Omitted().StreamBytes
		if om == 0 {
			if text != full {
				t.Fatalf("case %d: %q != %q", i, text, full)
			}
			continue
		}
		marker := omittedMarker(int(om), 0, nil)
		head, tail, ok := strings.Cut(text, marker)
		if !ok || !strings.HasPrefix(full, head) || !strings.HasSuffix(full, tail) || int64(len(head)+len(tail))+om != int64(len(full)) ||
			len(head) > limit/2 || len(tail) > limit-limit/2 {
			t.Fatalf("case %d (limit %d): kept %q + %q, omitted %d of %d", i, limit, head, tail, om, len(full))
		}
	}
}

// TestJSONStringDecoding: the streaming decoder reads every string as encoding/json does.
func TestJSONStringDecoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	atoms := []string{"a", "é", `\"`, `\\`, `\/`, `\n`, `\t`, `\r`, `\b`, `\f`, `\u00e9`, `\ud83d\ude00`, `\ud83d`, `\ude00`, `\ud83dx`,
		`\ud83d\u0041`, "\xff", "\xc3", "\x80", `\u12`, `\q`, "\x01", `\`}
	for range 20000 {
		var s strings.Builder
		s.WriteByte('"')
		for range rng.IntN(8) {
			s.WriteString(atoms[rng.IntN(len(atoms))])
		}
		s.WriteByte('"')
		raw := []byte(s.String())
		var want string
		wantErr := json.Unmarshal(raw, &want)
		got, err := jsonString(raw)
		if (err != nil) != (wantErr != nil) || (err == nil && got != want) {
			t.Fatalf("%q: got %q, %v; encoding/json %q, %v", raw, got, err, want, wantErr)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("%q: error %v does not wrap ErrMalformed", raw, err)
		}
	}
}

// TestHasControl: the word-at-a-time test finds every byte a JSON string cannot hold raw, wherever it
// is, and nothing else.
func TestHasControl(t *testing.T) {
	for _, c := range []byte{0x00, 0x01, 0x0a, 0x1f, '"', 0x20, 0x21, 0x23, 0x5c, 0x7f, 0x80, 0xc3, 0xff} {
		for n := 1; n < 40; n++ {
			for i := range n {
				b := []byte(strings.Repeat("a\xc3\xa9\x7f ", 8))[:n]
				b[i] = c
				if got, want := hasControl(b), c < 0x20 || c == '"'; got != want {
					t.Fatalf("byte %#x at %d of %d: %v", c, i, n, got)
				}
			}
		}
	}
}

// TestOutputBuilderRandomLimits: random mixes of streams, displays, updates and clears under small
// limits never hold more than the limits, and always render valid UTF-8 with at most about as many
// outputs as the limit allows.
func TestOutputBuilderRandomLimits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	texts := []string{"a", "é", "😀\n", "xyz", strings.Repeat("q", 50), ""}
	for i := range 400 {
		lim := OutputLimits{StreamBytes: 1 + rng.IntN(100), RichBytes: 1 + rng.IntN(2000), Outputs: 1 + rng.IntN(8)}
		b := NewOutputBuilder(lim)
		for range rng.IntN(80) {
			var m *Message
			switch k := rng.IntN(10); {
			case k < 5:
				m = stream(t, []string{"stdout", "stderr"}[rng.IntN(2)], texts[rng.IntN(len(texts))])
			case k < 7:
				m = displayMsg(t, "display_data", []string{"", "d1", "d2"}[rng.IntN(3)], map[string]any{"text/plain": strings.Repeat("p", rng.IntN(600))})
			case k < 9:
				m = displayMsg(t, "update_display_data", []string{"d1", "d2", "far"}[rng.IntN(3)], map[string]any{"text/plain": strings.Repeat("u", rng.IntN(600))})
			default:
				m = clearOut(t, rng.IntN(2) == 0)
			}
			if err := b.Add(m); err != nil {
				t.Fatal(err)
			}
			for name, w := range map[string]window{"text": b.text, "rich": b.rich, "count": b.count} {
				if w.head > w.headCap || w.tail > w.tailCap || w.head < 0 || w.tail < 0 {
					t.Fatalf("case %d (%+v): %s window %+v", i, lim, name, w)
				}
			}
		}
		outs := b.Final()
		if len(outs) > 2*lim.Outputs+1 {
			t.Fatalf("case %d (%+v): %d outputs", i, lim, len(outs))
		}
		for _, o := range outs {
			if !utf8.ValidString(o.Text) {
				t.Fatalf("case %d: invalid UTF-8 %q", i, o.Text)
			}
		}
	}
}

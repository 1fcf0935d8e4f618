package notebooks_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/pyrualean/pyrualean/notebooks"
)

func pngOf(t *testing.T, w, h int, shade func(x, y int) uint8) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			v := shade(x, y)
			img.Set(x, y, color.RGBA{v, v / 2, 255 - v, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func TestOutputsMatch(t *testing.T) {
	grad := func(x, y int) uint8 { return uint8(x * 4) }
	base := pngOf(t, 64, 48, grad)
	slightly := pngOf(t, 64, 48, func(x, y int) uint8 { return uint8(x*4) + uint8((x+y)%2) })
	boxMoved := pngOf(t, 64, 48, func(x, y int) uint8 {
		if x > 20 && x < 40 && y > 10 && y < 30 {
			return 250
		}
		return grad(x, y)
	})
	smaller := pngOf(t, 32, 48, grad)
	stream := func(s string) notebooks.Output {
		return notebooks.Output{OutputType: notebooks.OutputStream, Name: "stdout", Text: s}
	}
	img := func(p string) notebooks.Output {
		return notebooks.Output{OutputType: notebooks.OutputDisplayData, Data: notebooks.MimeBundle{"image/png": p, "text/plain": "<PIL.Image.Image image mode=RGB size=64x48 at 0x7F12AB34CD56>"}}
	}
	js := func(s string) notebooks.Output {
		var v any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		return notebooks.Output{OutputType: notebooks.OutputExecuteResult, Data: notebooks.MimeBundle{"application/json": v, "text/plain": "{...}"}}
	}
	tests := []struct {
		name      string
		want, got []notebooks.Output
		why       string // "" = match; else a substring of the reason
	}{
		{"same text", []notebooks.Output{stream("eef at [0.1, 0.2]\n")}, []notebooks.Output{stream("eef at [0.1, 0.2]\n")}, ""},
		{"numbers within tolerance", []notebooks.Output{stream("eef at [0.100001, 0.2]\n")}, []notebooks.Output{stream("eef at [0.100002, 0.2]\n")}, ""},
		{"number beyond tolerance", []notebooks.Output{stream("eef at [0.1, 0.2]\n")}, []notebooks.Output{stream("eef at [0.1, 0.25]\n")}, "number 0.25, recorded 0.2"},
		{"words differ", []notebooks.Output{stream("grasped red\n")}, []notebooks.Output{stream("grasped blue\n")}, "text differs"},
		{"elapsed time is volatile", []notebooks.Output{stream("moved in 1.52 s\n")}, []notebooks.Output{stream("moved in 3.1 s\n")}, ""},
		{"addresses are volatile", []notebooks.Output{img(base)}, []notebooks.Output{img(base)}, ""},
		{"stream name", []notebooks.Output{stream("x")}, []notebooks.Output{{OutputType: notebooks.OutputStream, Name: "stderr", Text: "x"}}, "stream stderr"},
		{"missing output", []notebooks.Output{stream("a"), img(base)}, []notebooks.Output{stream("a")}, "1 outputs, recorded 2"},
		{"image noise under threshold", []notebooks.Output{img(base)}, []notebooks.Output{img(slightly)}, ""},
		{"image changed", []notebooks.Output{img(base)}, []notebooks.Output{img(boxMoved)}, "mean pixel difference"},
		{"image size", []notebooks.Output{img(base)}, []notebooks.Output{img(smaller)}, "size 32x48, recorded 64x48"},
		{"json numbers", []notebooks.Output{js(`{"pos": [0.5, 1e-9], "done": false}`)}, []notebooks.Output{js(`{"pos": [0.50000001, 2e-9], "done": false}`)}, ""},
		{"json bool", []notebooks.Output{js(`{"done": false}`)}, []notebooks.Output{js(`{"done": true}`)}, "done: true, recorded false"},
		{"json key", []notebooks.Output{js(`{"a": 1}`)}, []notebooks.Output{js(`{"a": 1, "b": 2}`)}, `unexpected key "b"`},
		{"error evalue", []notebooks.Output{{OutputType: notebooks.OutputError, Ename: "EpisodeFinished", Evalue: "success"}},
			[]notebooks.Output{{OutputType: notebooks.OutputError, Ename: "EpisodeFinished", Evalue: "success"}}, ""},
		{"error name", []notebooks.Output{{OutputType: notebooks.OutputError, Ename: "ValueError"}},
			[]notebooks.Output{{OutputType: notebooks.OutputError, Ename: "KeyError"}}, "KeyError, recorded ValueError"},
		{"type", []notebooks.Output{stream("a")}, []notebooks.Output{js(`1`)}, "is execute_result, recorded stream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			why, stats := notebooks.OutputsMatch(tc.want, tc.got, notebooks.Tolerances{})
			switch {
			case tc.why == "" && why != "":
				t.Fatalf("want match, got %q", why)
			case tc.why != "" && !strings.Contains(why, tc.why):
				t.Fatalf("reason %q, want it to mention %q", why, tc.why)
			case tc.why == "" && stats == "":
				t.Fatalf("no stats for a match")
			}
		})
	}
}

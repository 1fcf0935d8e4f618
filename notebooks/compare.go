package notebooks

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // decoders for image/gif outputs
	_ "image/jpeg"
	_ "image/png"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Tolerances decide when a re-executed cell's outputs count as the same as the recorded ones.
// The zero value means the defaults.
type Tolerances struct {
	// Number is the allowed difference between numbers in text and JSON (absolute, or relative to the
	// larger magnitude, whichever is looser). Default 1e-4: simulator state printed to 4+ digits.
	Number float64
	// Image is the allowed mean absolute pixel difference, as a fraction of full scale (0..1) over all
	// channels. Default 0.01 (about 2.5 grey levels).
	Image float64
}

func (t Tolerances) withDefaults() Tolerances {
	if t.Number == 0 {
		t.Number = 1e-4
	}
	if t.Image == 0 {
		t.Image = 0.01
	}
	return t
}

// OutputsMatch compares recorded outputs (want) with re-executed ones (got). It returns "" when they
// match and otherwise a one-line reason naming the first difference. Text must match exactly apart from
// volatile bits (memory addresses, kernel temp file names, elapsed times); numbers within tol.Number;
// images by mean pixel difference under tol.Image. The stats string summarises what was compared.
func OutputsMatch(want, got []Output, tol Tolerances) (reason string, stats string) {
	tol = tol.withDefaults()
	var maxImg, maxNum float64
	if len(want) != len(got) {
		return fmt.Sprintf("%d outputs, recorded %d (%s vs %s)", len(got), len(want), outputKinds(got), outputKinds(want)), ""
	}
	for i := range want {
		w, g := want[i], got[i]
		where := fmt.Sprintf("output %d (%s)", i, w.OutputType)
		if w.OutputType != g.OutputType {
			return fmt.Sprintf("output %d is %s, recorded %s", i, g.OutputType, w.OutputType), ""
		}
		switch w.OutputType {
		case OutputStream:
			if w.Name != g.Name {
				return fmt.Sprintf("%s: stream %s, recorded %s", where, g.Name, w.Name), ""
			}
			d, why := textMatch(w.Text, g.Text, tol.Number)
			if why != "" {
				return fmt.Sprintf("%s %s: %s", where, w.Name, why), ""
			}
			maxNum = max(maxNum, d)
		case OutputError:
			if w.Ename != g.Ename {
				return fmt.Sprintf("%s: %s, recorded %s", where, g.Ename, w.Ename), ""
			}
			d, why := textMatch(w.Evalue, g.Evalue, tol.Number)
			if why != "" {
				return fmt.Sprintf("%s %s: %s", where, w.Ename, why), ""
			}
			maxNum = max(maxNum, d)
		case OutputDisplayData, OutputExecuteResult:
			dn, di, why := bundleMatch(w.Data, g.Data, tol)
			if why != "" {
				return fmt.Sprintf("%s: %s", where, why), ""
			}
			maxNum, maxImg = max(maxNum, dn), max(maxImg, di)
		}
	}
	return "", fmt.Sprintf("%d outputs; max number diff %.3g; max image diff %.4f", len(want), maxNum, maxImg)
}

func outputKinds(outs []Output) string {
	k := make([]string, len(outs))
	for i, o := range outs {
		k[i] = o.OutputType
		if o.Name != "" {
			k[i] += ":" + o.Name
		}
	}
	return "[" + strings.Join(k, " ") + "]"
}

func bundleMatch(want, got MimeBundle, tol Tolerances) (maxNum, maxImg float64, why string) {
	wk, gk := sortedKeys(want), sortedKeys(got)
	if strings.Join(wk, ",") != strings.Join(gk, ",") {
		return 0, 0, fmt.Sprintf("mime types %v, recorded %v", gk, wk)
	}
	for _, mime := range wk {
		w, g := want[mime], got[mime]
		switch {
		case strings.HasPrefix(mime, "image/") && mime != "image/svg+xml":
			d, err := imageDiff(w, g)
			if err != nil {
				return 0, 0, fmt.Sprintf("%s: %v", mime, err)
			}
			if d > tol.Image {
				return 0, 0, fmt.Sprintf("%s: mean pixel difference %.4f > %.4f", mime, d, tol.Image)
			}
			maxImg = max(maxImg, d)
		case isJSONMime(mime):
			d, why := jsonMatch(w, g, tol.Number, "")
			if why != "" {
				return 0, 0, fmt.Sprintf("%s: %s", mime, why)
			}
			maxNum = max(maxNum, d)
		default:
			ws, wok := w.(string)
			gs, gok := g.(string)
			if !wok || !gok {
				d, why := jsonMatch(w, g, tol.Number, "")
				if why != "" {
					return 0, 0, fmt.Sprintf("%s: %s", mime, why)
				}
				maxNum = max(maxNum, d)
				continue
			}
			d, why := textMatch(ws, gs, tol.Number)
			if why != "" {
				return 0, 0, fmt.Sprintf("%s: %s", mime, why)
			}
			maxNum = max(maxNum, d)
		}
	}
	return maxNum, maxImg, ""
}

func sortedKeys(m MimeBundle) []string {
	k := make([]string, 0, len(m))
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}

// volatile matches text that differs between two runs of the same code: object addresses, IPython's
// per-kernel cell file names, wall-clock durations and ANSI colour codes.
var volatile = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`\x1b\[[0-9;]*m`), ""},
	{regexp.MustCompile(`0x[0-9a-fA-F]{6,16}`), "0xADDR"},
	{regexp.MustCompile(`/tmp/ipykernel_\d+/\d+\.py`), "CELLFILE"},
	{regexp.MustCompile(`(?i)(\d+(?:\.\d+)?\s*(?:ms|µs|us|ns|s|sec|seconds?)\b)`), "DURATION"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?`), "TIMESTAMP"},
}

// Normalize removes the volatile parts of an output text (see volatile).
func Normalize(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.repl)
	}
	return s
}

var numberRE = regexp.MustCompile(`[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?`)

// textMatch compares two texts: equal after Normalize except that numbers may differ by tol.
// It returns the largest number difference seen, or why they differ.
func textMatch(want, got string, tol float64) (float64, string) {
	if want == got {
		return 0, ""
	}
	w, g := Normalize(want), Normalize(got)
	if w == g {
		return 0, ""
	}
	wn, gn := numberRE.FindAllStringIndex(w, -1), numberRE.FindAllStringIndex(g, -1)
	wSkel, gSkel := skeleton(w, wn), skeleton(g, gn)
	if wSkel != gSkel || len(wn) != len(gn) {
		return 0, "text differs: " + diffSnippet(w, g)
	}
	var maxd float64
	for i := range wn {
		a, _ := strconv.ParseFloat(w[wn[i][0]:wn[i][1]], 64)
		b, _ := strconv.ParseFloat(g[gn[i][0]:gn[i][1]], 64)
		d := numDiff(a, b)
		if d > tol {
			return 0, fmt.Sprintf("number %s, recorded %s (tolerance %g)", g[gn[i][0]:gn[i][1]], w[wn[i][0]:wn[i][1]], tol)
		}
		maxd = max(maxd, d)
	}
	return maxd, ""
}

// numDiff is the absolute difference, or the relative one for large magnitudes.
func numDiff(a, b float64) float64 {
	d := math.Abs(a - b)
	if m := max(math.Abs(a), math.Abs(b)); m > 1 {
		d /= m
	}
	return d
}

func skeleton(s string, nums [][]int) string {
	var b strings.Builder
	last := 0
	for _, n := range nums {
		b.WriteString(s[last:n[0]])
		b.WriteString("#")
		last = n[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

func diffSnippet(want, got string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	start := max(0, i-20)
	clip := func(s string) string {
		end := min(len(s), i+40)
		if start > len(s) {
			return ""
		}
		return s[start:end]
	}
	return fmt.Sprintf("got %q, recorded %q", clip(got), clip(want))
}

func jsonMatch(want, got any, tol float64, path string) (float64, string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return 0, fmt.Sprintf("%s: %s, recorded an object", orRoot(path), jsonKind(got))
		}
		var maxd float64
		for k := range w {
			if _, ok := g[k]; !ok {
				return 0, fmt.Sprintf("%s: key %q missing", orRoot(path), k)
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				return 0, fmt.Sprintf("%s: unexpected key %q", orRoot(path), k)
			}
		}
		for _, k := range sortedKeys(MimeBundle(w)) {
			d, why := jsonMatch(w[k], g[k], tol, path+"."+k)
			if why != "" {
				return 0, why
			}
			maxd = max(maxd, d)
		}
		return maxd, ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return 0, fmt.Sprintf("%s: list of %d, recorded %d", orRoot(path), len(g), len(w))
		}
		var maxd float64
		for i := range w {
			d, why := jsonMatch(w[i], g[i], tol, fmt.Sprintf("%s[%d]", path, i))
			if why != "" {
				return 0, why
			}
			maxd = max(maxd, d)
		}
		return maxd, ""
	case json.Number, float64, int:
		a, aok := toFloat(want)
		b, bok := toFloat(got)
		if !aok || !bok {
			return 0, fmt.Sprintf("%s: %v, recorded %v", orRoot(path), got, want)
		}
		d := numDiff(a, b)
		if d > tol {
			return 0, fmt.Sprintf("%s: %v, recorded %v (tolerance %g)", orRoot(path), got, want, tol)
		}
		return d, ""
	case string:
		g, ok := got.(string)
		if !ok {
			return 0, fmt.Sprintf("%s: %s, recorded a string", orRoot(path), jsonKind(got))
		}
		d, why := textMatch(w, g, tol)
		if why != "" {
			return 0, orRoot(path) + ": " + why
		}
		return d, ""
	default:
		if want != got {
			return 0, fmt.Sprintf("%s: %v, recorded %v", orRoot(path), got, want)
		}
		return 0, ""
	}
}

func orRoot(path string) string {
	if path == "" {
		return "value"
	}
	return strings.TrimPrefix(path, ".")
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}

// imageDiff decodes two base64 images and returns their mean absolute difference (0..1) over RGBA.
func imageDiff(want, got any) (float64, error) {
	wi, err := decodeImage(want)
	if err != nil {
		return 0, fmt.Errorf("recorded image: %w", err)
	}
	gi, err := decodeImage(got)
	if err != nil {
		return 0, fmt.Errorf("replayed image: %w", err)
	}
	wb, gb := wi.Bounds(), gi.Bounds()
	if wb.Dx() != gb.Dx() || wb.Dy() != gb.Dy() {
		return 0, fmt.Errorf("size %dx%d, recorded %dx%d", gb.Dx(), gb.Dy(), wb.Dx(), wb.Dy())
	}
	var sum float64
	for y := 0; y < wb.Dy(); y++ {
		for x := 0; x < wb.Dx(); x++ {
			r1, g1, b1, a1 := wi.At(wb.Min.X+x, wb.Min.Y+y).RGBA()
			r2, g2, b2, a2 := gi.At(gb.Min.X+x, gb.Min.Y+y).RGBA()
			sum += absDiff(r1, r2) + absDiff(g1, g2) + absDiff(b1, b2) + absDiff(a1, a2)
		}
	}
	n := float64(wb.Dx()*wb.Dy()) * 4 * 0xffff
	if n == 0 {
		return 0, nil
	}
	return sum / n, nil
}

func absDiff(a, b uint32) float64 {
	if a > b {
		return float64(a - b)
	}
	return float64(b - a)
}

func decodeImage(v any) (image.Image, error) {
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("not a base64 string")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		return nil, fmt.Errorf("base64: %w", err)
	}
	img, _, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return img, nil
}

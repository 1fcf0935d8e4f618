package report

import (
	"bytes"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/pyrualean/pyrualean/suite"
)

// armColors keeps each arm one colour in every plot.
var armColors = map[string]color.Color{
	"cells": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"tools": color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

// series is one arm's value per category (NaN-free; missing categories are 0).
type series struct {
	arm    string
	values []float64
	lo, hi []float64 // optional error bars (absolute bounds)
}

// barSVG draws a grouped bar chart (one group per category, one bar per arm) as inline SVG.
func barSVG(title, ylabel string, cats []string, ss []series) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Legend.Top = true
	w := vg.Points(min(40, 300/float64(max(1, len(cats)*len(ss)))))
	for i, s := range ss {
		bars, err := plotter.NewBarChart(plotter.Values(s.values), w)
		if err != nil {
			return nil, err
		}
		bars.Offset = w * vg.Length(float64(i)-float64(len(ss)-1)/2)
		bars.LineStyle.Width = 0
		if c, ok := armColors[s.arm]; ok {
			bars.Color = c
		}
		p.Add(bars)
		p.Legend.Add(s.arm, bars)
		if s.lo != nil {
			// Error bars sit on the bars' centres: category index plus the bar's offset in data units.
			pts := make(errPoints, len(s.values))
			for j, v := range s.values {
				pts[j] = errPoint{x: float64(j), y: v, lo: v - s.lo[j], hi: s.hi[j] - v}
			}
			eb, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return nil, err
			}
			eb.LineStyle.Width = vg.Points(1)
			off := bars.Offset
			p.Add(shifted{eb, off})
		}
	}
	p.NominalX(cats...)
	// Headroom above the tallest bar (or error bar) for the legend.
	top := 0.0
	for _, s := range ss {
		for j, v := range s.values {
			top = max(top, v)
			if s.hi != nil {
				top = max(top, s.hi[j])
			}
		}
	}
	if top > 0 {
		p.Y.Max = top * 1.3
	}
	c := vgsvg.New(vg.Points(float64(max(360, 90*len(cats)))), vg.Points(260))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return stripXMLHeader(buf.Bytes()), nil
}

type errPoint struct{ x, y, lo, hi float64 }
type errPoints []errPoint

func (e errPoints) Len() int                        { return len(e) }
func (e errPoints) XY(i int) (float64, float64)     { return e[i].x, e[i].y }
func (e errPoints) YError(i int) (float64, float64) { return e[i].lo, e[i].hi }

// shifted draws error bars moved sideways by off (to sit on a bar of a group).
type shifted struct {
	eb  *plotter.YErrorBars
	off vg.Length
}

func (s shifted) Plot(c draw.Canvas, p *plot.Plot) {
	c.Rectangle.Min.X += s.off
	c.Rectangle.Max.X += s.off
	s.eb.Plot(c, p)
}

func (s shifted) DataRange() (xmin, xmax, ymin, ymax float64) { return s.eb.DataRange() }

// stripXMLHeader drops the <?xml ...?> prolog so the SVG can sit inline in HTML.
func stripXMLHeader(b []byte) []byte {
	if i := bytes.Index(b, []byte("<svg")); i > 0 {
		return b[i:]
	}
	return b
}

// plots are the report's figures for one group: success per arm and family (Wilson intervals),
// input tokens and LLM calls per solved episode, and cost per episode when prices are known.
func plots(g suite.GroupStats, recs []suite.Record) ([][]byte, error) {
	var cats []string
	for _, f := range g.Families {
		cats = append(cats, f.Family)
	}
	var arms []string
	for _, a := range g.Arms {
		arms = append(arms, a.Arm)
	}
	var out [][]byte
	var sr []series
	for _, arm := range arms {
		s := series{arm: arm}
		for _, f := range g.Families {
			v, lo, hi := 0.0, 0.0, 0.0
			for _, a := range f.Arms {
				if a.Arm == arm && a.Success != nil {
					v, lo, hi = 100*a.Success.Value, 100*a.Success.Lo, 100*a.Success.Hi
				}
			}
			s.values, s.lo, s.hi = append(s.values, v), append(s.lo, lo), append(s.hi, hi)
		}
		sr = append(sr, s)
	}
	svg, err := barSVG("Success rate per family (95% Wilson)", "% solved", cats, sr)
	if err != nil {
		return nil, err
	}
	out = append(out, svg)
	perSolved := func(title, ylabel string, val func(r suite.Record) (float64, bool)) error {
		var ss []series
		any := false
		for _, arm := range arms {
			s := series{arm: arm}
			for _, fam := range cats {
				var sum float64
				n := 0
				for _, r := range recs {
					if r.Arm != arm || r.Family != fam || r.Row.OK == nil || !*r.Row.OK {
						continue
					}
					if v, ok := val(r); ok {
						sum += v
						n++
					}
				}
				m := 0.0
				if n > 0 {
					m = sum / float64(n)
					any = any || m > 0
				}
				s.values = append(s.values, m)
			}
			ss = append(ss, s)
		}
		if !any {
			return nil
		}
		svg, err := barSVG(title, ylabel, cats, ss)
		if err == nil {
			out = append(out, svg)
		}
		return err
	}
	if err := perSolved("Input tokens per solved episode", "input tokens", func(r suite.Record) (float64, bool) { return float64(r.Row.InTok), true }); err != nil {
		return nil, err
	}
	if err := perSolved("LLM calls per solved episode", "LLM calls", func(r suite.Record) (float64, bool) { return float64(r.Row.LLMCalls), true }); err != nil {
		return nil, err
	}
	if err := perSolved("Tool calls (turns) per solved episode", "turns", func(r suite.Record) (float64, bool) { return float64(r.Row.Turns), true }); err != nil {
		return nil, err
	}
	if err := perSolved("Cost per solved episode", "USD", func(r suite.Record) (float64, bool) {
		if r.Row.Cost == nil {
			return 0, false
		}
		return *r.Row.Cost, true
	}); err != nil {
		return nil, err
	}
	return out, nil
}

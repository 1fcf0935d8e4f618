package report

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"

	"github.com/pyrualean/pyrualean/eval"
)

// armColors keeps each arm one colour in every plot.
var armColors = map[string]string{"cells": "#1f77b4", "tools": "#ff7f0e"}

// otherColors colour arms with no colour of their own, in order.
var otherColors = []string{"#2ca02c", "#d62728", "#9467bd", "#8c564b"}

// series is one arm's value per category (missing categories are 0).
type series struct {
	arm    string
	values []float64
	lo, hi []float64 // optional error bars (absolute bounds)
}

// chart is a grouped bar chart: one group per category, one bar per arm.
type chart struct {
	title, ylabel string
	cats          []string
	series        []series
	percent       bool // a 0-100% axis
	tick          func(float64) string
}

// Layout of a chart, in SVG user units (CSS pixels).
const (
	chartH       = 284
	marginLeft   = 66
	marginRight  = 16
	titleBase    = 20 // title baseline
	legendTop    = 30 // the legend's strip, between the title and the plot area
	legendH      = 16
	plotTop      = 56
	marginBottom = 34
	groupShare   = 0.7 // part of a category's band the bars take: the rest keeps groups (and the frame) apart
)

// svg draws the chart as inline SVG: the legend in a strip of its own above the plot area (never on
// the bars), a 0-100% axis for percentages, every bar inside the frame with a margin, and classes
// that say what each element is (frame, bar, errbar, legend, ytick, xtick).
func (c chart) svg() []byte {
	band := math.Max(90, 12*float64(maxLen(c.cats))+20)
	w := math.Max(420, marginLeft+marginRight+band*float64(len(c.cats)))
	x0, x1, y0, y1 := float64(marginLeft), w-marginRight, float64(plotTop), float64(chartH-marginBottom)
	band = (x1 - x0) / float64(max(1, len(c.cats)))
	ymax, ticks := c.axis()
	y := func(v float64) float64 { return y1 - (y1-y0)*math.Min(v, ymax)/ymax }
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%s" height="%d" viewBox="0 0 %s %d" role="img" aria-label="%s" data-percent="%t">`+"\n",
		f(w), chartH, f(w), chartH, html.EscapeString(c.title), c.percent)
	fmt.Fprintf(&b, `<text class="title" x="%s" y="%d" text-anchor="middle" font-size="14" font-weight="600">%s</text>`+"\n", f(w/2), titleBase, html.EscapeString(c.title))
	c.legend(&b, x0, x1)
	for _, t := range ticks {
		fmt.Fprintf(&b, `<line class="grid" x1="%s" x2="%s" y1="%s" y2="%s" stroke="#e5e5e5"/>`, f(x0), f(x1), f(y(t)), f(y(t)))
		fmt.Fprintf(&b, `<text class="ytick" x="%s" y="%s" text-anchor="end" dominant-baseline="middle" font-size="11" data-value="%s">%s</text>`+"\n",
			f(x0-6), f(y(t)), f(t), html.EscapeString(c.tick(t)))
	}
	fmt.Fprintf(&b, `<text class="ylabel" transform="translate(14 %s) rotate(-90)" text-anchor="middle" font-size="12">%s</text>`+"\n", f((y0+y1)/2), html.EscapeString(c.ylabel))
	barW := band * groupShare / float64(max(1, len(c.series)))
	b.WriteString(`<g class="bars">` + "\n")
	for i, cat := range c.cats {
		left := x0 + band*float64(i) + band*(1-groupShare)/2
		for j, s := range c.series {
			bx := left + barW*float64(j)
			v := s.values[i]
			label := fmt.Sprintf("%s, %s: %s", s.arm, cat, c.tick(v))
			fmt.Fprintf(&b, `<path class="bar" d="M%s %sH%sV%sH%sZ" fill="%s" data-arm="%s" data-category="%s" data-value="%s"><title>%s</title></path>`+"\n",
				f(bx), f(y1), f(bx+barW), f(y(v)), f(bx), c.color(j), html.EscapeString(s.arm), html.EscapeString(cat), f(v), html.EscapeString(label))
			if s.lo != nil && s.hi[i] > s.lo[i] {
				cx := bx + barW/2
				fmt.Fprintf(&b, `<path class="errbar" d="M%s %sV%sM%s %sH%sM%s %sH%s" stroke="#333" stroke-width="1" fill="none"/>`+"\n",
					f(cx), f(y(s.lo[i])), f(y(s.hi[i])), f(cx-3), f(y(s.lo[i])), f(cx+3), f(cx-3), f(y(s.hi[i])), f(cx+3))
			}
		}
		fmt.Fprintf(&b, `<text class="xtick" x="%s" y="%s" text-anchor="middle" font-size="11">%s</text>`+"\n", f(x0+band*(float64(i)+0.5)), f(y1+16), html.EscapeString(cat))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<rect class="frame" x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#888"/>`+"\n", f(x0), f(y0), f(x1-x0), f(y1-y0))
	b.WriteString("</svg>")
	return b.Bytes()
}

// legend draws one swatch and name per arm, right-aligned in the strip above the plot area.
func (c chart) legend(b *bytes.Buffer, x0, x1 float64) {
	widths := 0.0
	for _, s := range c.series {
		widths += 24 + 7*float64(len(s.arm))
	}
	x := math.Max(x0, x1-widths)
	b.WriteString(`<g class="legend">`)
	for j, s := range c.series {
		fmt.Fprintf(b, `<rect class="swatch" x="%s" y="%d" width="12" height="12" fill="%s"/><text x="%s" y="%d" font-size="12" dominant-baseline="middle">%s</text>`,
			f(x), legendTop+2, c.color(j), f(x+16), legendTop+legendH/2+1, html.EscapeString(s.arm))
		x += 24 + 7*float64(len(s.arm))
	}
	b.WriteString("</g>\n")
}

func (c chart) color(j int) string {
	if col, ok := armColors[c.series[j].arm]; ok {
		return col
	}
	return otherColors[j%len(otherColors)]
}

// axis is the y axis' top and ticks: 0-100 for percentages, else a round number above every bar
// and error bar.
func (c chart) axis() (float64, []float64) {
	if c.percent {
		return 100, []float64{0, 25, 50, 75, 100}
	}
	top := 0.0
	for _, s := range c.series {
		for i, v := range s.values {
			top = math.Max(top, v)
			if s.hi != nil {
				top = math.Max(top, s.hi[i])
			}
		}
	}
	if top <= 0 {
		return 1, []float64{0, 1}
	}
	step := niceStep(top / 4)
	ymax := step * math.Ceil(top*1.04/step) // the tallest bar stays below the frame's top
	var ticks []float64
	for t := 0.0; t <= ymax+step/2; t += step {
		ticks = append(ticks, t)
	}
	return ymax, ticks
}

// niceStep rounds a tick step up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func maxLen(ss []string) int {
	n := 0
	for _, s := range ss {
		n = max(n, len(s))
	}
	return n
}

// f writes a coordinate with at most two decimals.
func f(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }

// plots are the report's figures for one group: success per arm and family (Wilson intervals),
// and input tokens, LLM calls, tool calls and cost per solved episode when there are any.
func plots(g eval.GroupStats, recs []eval.Record) [][]byte {
	var cats []string
	for _, fam := range g.Families {
		cats = append(cats, fam.Family)
	}
	var arms []string
	for _, a := range g.Arms {
		arms = append(arms, a.Arm)
	}
	var sr []series
	for _, arm := range arms {
		s := series{arm: arm}
		for _, fam := range g.Families {
			v, lo, hi := 0.0, 0.0, 0.0
			for _, a := range fam.Arms {
				if a.Arm == arm && a.Success != nil {
					v, lo, hi = 100*a.Success.Value, 100*a.Success.Lo, 100*a.Success.Hi
				}
			}
			s.values, s.lo, s.hi = append(s.values, v), append(s.lo, lo), append(s.hi, hi)
		}
		sr = append(sr, s)
	}
	pct := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "%" }
	out := [][]byte{chart{title: "Success rate per family (95% Wilson)", ylabel: "% solved", cats: cats, series: sr, percent: true, tick: pct}.svg()}
	perSolved := func(title, ylabel string, tick func(float64) string, val func(r eval.Record) (float64, bool)) {
		var ss []series
		any, unknown := false, false
		for _, arm := range arms {
			s := series{arm: arm}
			for _, fam := range cats {
				var sum float64
				n := 0
				for _, r := range recs {
					if r.Arm != arm || r.Family != fam || r.Row.OK == nil || !*r.Row.OK {
						continue
					}
					v, ok := val(r)
					if !ok {
						unknown = true
						continue
					}
					sum += v
					n++
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
		if any && !unknown { // a mean over some episodes only would pass for all of them: no plot
			out = append(out, chart{title: title, ylabel: ylabel, cats: cats, series: ss, tick: tick}.svg())
		}
	}
	count := func(v float64) string {
		switch {
		case v >= 1e6:
			return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
		case v >= 1e3:
			return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
		}
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	perSolved("Input tokens per solved episode", "input tokens", count, func(r eval.Record) (float64, bool) { return float64(r.Row.InTok), true })
	perSolved("LLM calls per solved episode", "LLM calls", count, func(r eval.Record) (float64, bool) { return float64(r.Row.LLMCalls), true })
	perSolved("Tool calls (turns) per solved episode", "turns", count, func(r eval.Record) (float64, bool) { return float64(r.Row.Turns), true })
	perSolved("Cost per solved episode", "US$", func(v float64) string { return "$" + strconv.FormatFloat(v, 'g', 3, 64) },
		func(r eval.Record) (float64, bool) {
			if r.Row.Cost == nil {
				return 0, false
			}
			return *r.Row.Cost, true
		})
	return out
}

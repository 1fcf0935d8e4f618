package runs

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
)

// Group rollouts (eval --samples K): K episodes of the same instance, each with its own sampling seed.
// They are counted as every other episode (count.go); on top, per system and model:
//
//   - an instance's success rate is its solved episodes over its episodes with an outcome (the
//     quantity a group-normalised advantage is computed against);
//   - pass@1 is the mean of the instances' success rates, pass@K the mean of the unbiased estimator
//     1 - C(n-c, K)/C(n, K) (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"),
//     over the instances with at least K outcomes; both with a 95% percentile bootstrap interval over
//     instances (BootstrapResamples, a fixed seed: the same runs give the same interval). An instance
//     with fewer outcomes than K (episodes left to run, or still running) is left out of pass@K and
//     counted in Partial.

// PassAtK is one system's (and model's) group-rollout success.
type PassAtK struct {
	System    string         `json:"system"`
	Model     string         `json:"model,omitempty"`
	K         int            `json:"k"`
	Instances int            `json:"instances"` // instances with at least one outcome
	Complete  int            `json:"complete"`  // instances with K outcomes: pass@K's
	Partial   int            `json:"partial"`   // instances with outcomes, but fewer than K
	Pass1     *Interval      `json:"pass_at_1"`
	PassK     *Interval      `json:"pass_at_k"`
	PerInst   []InstanceRate `json:"per_instance"`
}

// InstanceRate is one instance's success rate over its samples.
type InstanceRate struct {
	Instance string  `json:"instance"` // robot/suite:task/seed (the group is this, per system and model)
	Episodes int     `json:"episodes"` // with an outcome
	Solved   int     `json:"solved"`
	Rate     float64 `json:"success_rate"`
}

// PassAtKOf computes pass@1 and pass@K per system and model over the rows that are samples of a group
// (Row.Samples > 1); nil when none are.
func PassAtKOf(rows []Row) []PassAtK {
	type key struct{ system, model string }
	by := map[key]map[string]*InstanceRate{}
	ks := map[key]int{}
	for _, r := range rows {
		if r.Samples < 2 || !Counted(r) {
			continue
		}
		k := key{r.System, r.Model}
		if by[k] == nil {
			by[k] = map[string]*InstanceRate{}
		}
		ks[k] = max(ks[k], r.Samples)
		inst := fmt.Sprintf("%s/%s/%d", r.Robot, r.Task, r.Seed)
		if r.Group != "" {
			inst = r.Group
		}
		ir := by[k][inst]
		if ir == nil {
			ir = &InstanceRate{Instance: inst}
			by[k][inst] = ir
		}
		ir.Episodes++
		if Solved(r) {
			ir.Solved++
		}
	}
	var out []PassAtK
	for k, insts := range by {
		p := PassAtK{System: k.system, Model: k.model, K: ks[k]}
		var rates, passk []float64
		for _, name := range sortedKeys(insts) {
			ir := insts[name]
			ir.Rate = float64(ir.Solved) / float64(ir.Episodes)
			p.PerInst = append(p.PerInst, *ir)
			rates = append(rates, ir.Rate)
			if ir.Episodes >= p.K {
				passk = append(passk, passAtK(ir.Episodes, ir.Solved, p.K))
			}
		}
		p.Instances, p.Complete, p.Partial = len(rates), len(passk), len(rates)-len(passk)
		p.Pass1, p.PassK = BootstrapMean(rates, BootstrapResamples), BootstrapMean(passk, BootstrapResamples)
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].System+"\x00"+out[i].Model < out[j].System+"\x00"+out[j].Model
	})
	return out
}

// passAtK is the unbiased pass@k estimate of an instance with n samples, c of them solved:
// 1 - C(n-c, k)/C(n, k), as a product to stay exact for large n.
func passAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	fail := 1.0
	for i := n - c + 1; i <= n; i++ {
		fail *= 1 - float64(k)/float64(i)
	}
	return 1 - fail
}

// BootstrapMean is the mean of v with a 95% percentile interval from resampling v (fixed seed); nil
// when v is empty.
func BootstrapMean(v []float64, resamples int) *Interval {
	n := len(v)
	if n == 0 {
		return nil
	}
	mean := func(idx func(int) int) float64 {
		s := 0.0
		for i := range n {
			s += v[idx(i)]
		}
		return s / float64(n)
	}
	rng := rand.New(rand.NewPCG(bootstrapSeed1, bootstrapSeed2))
	stats := make([]float64, resamples)
	for b := range stats {
		stats[b] = mean(func(int) int { return rng.IntN(n) })
	}
	sort.Float64s(stats)
	at := func(q float64) float64 { return stats[min(len(stats)-1, int(q*float64(len(stats))))] }
	return &Interval{Value: mean(func(i int) int { return i }), Lo: at(lowerQ), Hi: at(upperQ)}
}

// WritePassAtK prints pass@1, pass@K and the per-instance success rates.
func WritePassAtK(w io.Writer, ps []PassAtK) {
	for _, p := range ps {
		name := p.System
		if p.Model != "" {
			name += " @ " + p.Model
		}
		fmt.Fprintf(w, "\ngroup rollouts %s: %d instances x %d samples\n", name, p.Instances, p.K)
		fmt.Fprintf(w, "  pass@1 %s", pctCell(p.Pass1))
		fmt.Fprintf(w, "   pass@%d %s over %d complete instances", p.K, pctCell(p.PassK), p.Complete)
		if p.Partial > 0 {
			fmt.Fprintf(w, " (%d with fewer than %d outcomes left out)", p.Partial, p.K)
		}
		fmt.Fprintln(w, "   (95% bootstrap over instances)")
		var cells []string
		for _, ir := range p.PerInst {
			cells = append(cells, fmt.Sprintf("%s %d/%d", ir.Instance, ir.Solved, ir.Episodes))
		}
		fmt.Fprintf(w, "  per instance: %s\n", strings.Join(cells, ", "))
	}
}

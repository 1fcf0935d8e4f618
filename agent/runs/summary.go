package runs

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Summary aggregates rows (the original's §12: the original's keys, plus success, infrastructure failures,
// cost and per-solved means).
type Summary struct {
	Episodes               int            `json:"episodes"`
	NativeSR               *float64       `json:"native_sr"`
	NativeSRDenominator    int            `json:"native_sr_denominator"`
	UnknownOutcomeEpisodes int            `json:"unknown_outcome_episodes"`
	Solved                 int            `json:"solved"`
	Statuses               map[string]int `json:"statuses"`
	// Running episodes have no outcome yet (left out of the denominator; the summary is not final).
	Running int `json:"running_episodes"`
	// NullOutcome counts episodes whose outcome was never recorded, counted as failed (as the original).
	NullOutcome int `json:"null_outcome_episodes"`
	// Infra counts infrastructure failures by kind (see Infra); each is also a failed episode.
	Infra                 map[string]int `json:"infrastructure_failures"`
	MeanCalls             float64        `json:"mean_calls"`
	MeanStatefulCalls     float64        `json:"mean_stateful_calls"`
	MeanEnvSteps          float64        `json:"mean_env_steps"`
	MeanTurns             float64        `json:"mean_turns"`
	MeanLLMCalls          float64        `json:"mean_llm_calls"`
	MeanWallTimeS         float64        `json:"mean_wall_time_s"`
	MeanInputTokens       float64        `json:"mean_input_tokens"`
	MeanCachedInputTokens float64        `json:"mean_cached_input_tokens"`
	MeanOutputTokens      float64        `json:"mean_output_tokens"`
	MeanCostUSD           *float64       `json:"mean_cost_usd"`
	// PerSolved are means over each system's own solved episodes (the paper's columns are over the
	// jointly solved instances: see Compare and the paper table).
	PerSolved *Means `json:"per_solved"`
	// Unsealed counts episodes whose kernel was not sealed: their numbers are only as good as the agent's honesty.
	Unsealed int `json:"unsealed"`
	// Perception counts episodes by where their segmentation came from (only robots that say).
	Perception map[string]int `json:"perception,omitempty"`
	// Privileged counts episodes that used privileged primitives or perception (the simulator's ground
	// truth: the paper's agent had neither); PrimitiveSets counts episodes by primitive set.
	Privileged    int            `json:"privileged_episodes"`
	PrimitiveSets map[string]int `json:"primitive_sets,omitempty"`
	// With people: episodes where a person ran cells, and the people's totals (apart from the agent's).
	WithPeople         int `json:"episodes_with_people"`
	HumanCells         int `json:"human_cells"`
	HumanCalls         int `json:"human_calls"`
	HumanStatefulCalls int `json:"human_stateful_calls"`
	HumanEnvSteps      int `json:"human_env_steps"`
	// PassAtK is the group rollouts' success (eval --samples K > 1), per system and model (passk.go).
	PassAtK []PassAtK `json:"pass_at_k,omitempty"`
}

// Means are averages over a subset of episodes (the solved ones, or the jointly solved ones).
type Means struct {
	Episodes    int      `json:"episodes"`
	LLMCalls    float64  `json:"mean_llm_calls"`
	InputTokens float64  `json:"mean_input_tokens"`
	OutputToks  float64  `json:"mean_output_tokens"`
	Turns       float64  `json:"mean_turns"`
	WallS       float64  `json:"mean_wall_time_s"`
	CostUSD     *float64 `json:"mean_cost_usd"`
}

// Summarize aggregates rows, counting as the original (count.go): every episode with an outcome is
// in the success-rate denominator, failures of every kind included; only unknown outcomes and
// episodes still running are left out, and both are counted.
func Summarize(rows []Row) Summary {
	s := Summary{Episodes: len(rows), Statuses: map[string]int{}, Infra: map[string]int{}}
	if len(rows) == 0 {
		return s
	}
	var solved []Row
	for _, r := range rows {
		s.Statuses[r.Status]++
		if !r.Sealed && !r.SealPending && !strings.HasPrefix(r.System, RPentSystem) {
			s.Unsealed++
		}
		if r.Perception != "" {
			if s.Perception == nil {
				s.Perception = map[string]int{}
			}
			s.Perception[r.Perception]++
		}
		if r.Privileged > 0 || r.Perception == PerceptionSimulatorMasks {
			s.Privileged++
		}
		if r.Primitives != "" {
			if s.PrimitiveSets == nil {
				s.PrimitiveSets = map[string]int{}
			}
			s.PrimitiveSets[r.Primitives]++
		}
		if r.HumanCells > 0 {
			s.WithPeople++
		}
		s.HumanCells += r.HumanCells
		s.HumanCalls += r.HumanCalls
		s.HumanStatefulCalls += r.HumanStateful
		s.HumanEnvSteps += r.HumanSteps
		if k := Infra(r); k != "" {
			s.Infra[k]++
		}
		if r.NullOutcome {
			s.NullOutcome++
		}
		switch Outcome(r) {
		case OutcomeRunning:
			s.Running++
		case OutcomeUnknown:
			s.UnknownOutcomeEpisodes++
		case OutcomeSolved:
			s.Solved++
			s.NativeSRDenominator++
			solved = append(solved, r)
		default:
			s.NativeSRDenominator++
		}
	}
	if s.NativeSRDenominator > 0 {
		sr := float64(s.Solved) / float64(s.NativeSRDenominator)
		s.NativeSR = &sr
	}
	n := float64(len(rows))
	for _, r := range rows {
		s.MeanCalls += float64(r.Calls) / n
		s.MeanStatefulCalls += float64(r.Stateful) / n
		s.MeanEnvSteps += float64(r.Steps) / n
		s.MeanTurns += float64(r.Turns) / n
		s.MeanLLMCalls += float64(r.LLMCalls) / n
		s.MeanWallTimeS += r.WallS / n
		s.MeanInputTokens += float64(r.InTok) / n
		s.MeanCachedInputTokens += float64(r.Cached) / n
		s.MeanOutputTokens += float64(r.OutTok) / n
	}
	s.MeanCostUSD = meanCost(rows)
	if len(solved) > 0 {
		s.PerSolved = means(solved)
	}
	s.PassAtK = PassAtKOf(rows)
	return s
}

func means(rows []Row) *Means {
	m := &Means{Episodes: len(rows)}
	n := float64(len(rows))
	for _, r := range rows {
		m.LLMCalls += float64(r.LLMCalls) / n
		m.InputTokens += float64(r.InTok) / n
		m.OutputToks += float64(r.OutTok) / n
		m.Turns += float64(r.Turns) / n
		m.WallS += r.WallS / n
	}
	m.CostUSD = meanCost(rows)
	return m
}

// meanCost is nil unless every row has a cost (an unknown price must not read as free).
func meanCost(rows []Row) *float64 {
	var sum float64
	for _, r := range rows {
		if r.Cost == nil {
			return nil
		}
		sum += *r.Cost
	}
	v := sum / float64(len(rows))
	return &v
}

// unpriced counts rows without a cost.
func unpriced(rows []Row) int {
	n := 0
	for _, r := range rows {
		if r.Cost == nil {
			n++
		}
	}
	return n
}

// WriteSummaryTable prints the original's columns plus llm calls and cost, then the aggregates.
func WriteSummaryTable(w io.Writer, rows []Row, s Summary) {
	fmt.Fprintf(w, "%-17s %-22s %4s %3s %-10s %5s %5s %6s %7s %9s %9s %7s %5s %8s\n",
		"system", "task", "seed", "ok", "status", "turns", "calls", "steps", "wall_s", "in_tok", "cached", "out_tok", "llm", "cost")
	for _, r := range rows {
		ok := "-"
		if r.OK != nil {
			ok = map[bool]string{true: "Y", false: "N"}[*r.OK]
		}
		cost := "unknown"
		if r.Cost != nil {
			cost = fmt.Sprintf("%.4f", *r.Cost)
		}
		fmt.Fprintf(w, "%-17s %-22s %4d %3s %-10s %5d %5d %6d %7.1f %9d %9d %7d %5d %8s\n",
			r.System, r.Task, r.Seed, ok, r.Status, r.Turns, r.Calls, r.Steps, r.WallS, r.InTok, r.Cached, r.OutTok, r.LLMCalls, cost)
	}
	sr := "-"
	if s.NativeSR != nil {
		sr = fmt.Sprintf("%.1f%% (%d/%d)", 100**s.NativeSR, s.Solved, s.NativeSRDenominator)
	}
	fmt.Fprintf(w, "\nepisodes %d  success %s  statuses %s\n", s.Episodes, sr, counts(s.Statuses))
	if s.UnknownOutcomeEpisodes > 0 || s.Running > 0 || s.NullOutcome > 0 {
		fmt.Fprintf(w, "outside the denominator: unknown outcome %d (RPent runs without states.json), still running %d;"+
			" counted as failed: no recorded outcome %d\n", s.UnknownOutcomeEpisodes, s.Running, s.NullOutcome)
	}
	if len(s.Infra) > 0 {
		fmt.Fprintf(w, "infrastructure failures (counted as failed episodes, as the original): %s\n", counts(s.Infra))
	}
	writeSealing(w, rows, s)
	fmt.Fprintf(w, "mean: turns %.1f  calls %.1f  steps %.0f  wall_s %.1f  llm_calls %.1f  in_tok %.0f  cached %.0f  out_tok %.0f  cost %s\n",
		s.MeanTurns, s.MeanCalls, s.MeanEnvSteps, s.MeanWallTimeS, s.MeanLLMCalls, s.MeanInputTokens, s.MeanCachedInputTokens, s.MeanOutputTokens, fmtCost(s.MeanCostUSD, unpriced(rows)))
	if p := s.PerSolved; p != nil {
		fmt.Fprintf(w, "per own solved episode (%d): llm_calls %.1f  in_tok %.0f  out_tok %.0f  turns %.1f  wall_s %.1f  cost %s\n",
			p.Episodes, p.LLMCalls, p.InputTokens, p.OutputToks, p.Turns, p.WallS, fmtCost(p.CostUSD, -1))
	}
	WritePassAtK(w, s.PassAtK)
}

// writeSealing prints the sealed, perception and people lines of the summary.
func writeSealing(w io.Writer, rows []Row, s Summary) {
	ours, pending := 0, 0
	for _, r := range rows {
		if !strings.HasPrefix(r.System, RPentSystem) {
			ours++
			if r.SealPending {
				pending++
			}
		}
	}
	fmt.Fprintf(w, "sealed %d/%d", ours-s.Unsealed-pending, ours)
	if s.Unsealed > 0 {
		fmt.Fprintf(w, "  (NOT SEALED: %d; their kernels could reach the robot and the machine)", s.Unsealed)
	}
	if pending > 0 {
		fmt.Fprintf(w, "  (kernel not started yet: %d)", pending)
	}
	fmt.Fprintln(w)
	if len(s.Perception) > 0 {
		fmt.Fprintf(w, "perception %s", counts(s.Perception))
		if s.Perception[PerceptionSimulatorMasks] > 0 {
			fmt.Fprint(w, "  (simulator-masks: segment() read the simulator's own masks, privileged next to the original's SAM 3)")
		}
		fmt.Fprintln(w)
	}
	if len(s.PrimitiveSets) > 0 || s.Privileged > 0 {
		fmt.Fprintf(w, "primitives %s; privileged: %d episode(s) used primitives or perception that read the simulator's ground truth",
			counts(s.PrimitiveSets), s.Privileged)
		if s.Privileged > 0 {
			fmt.Fprint(w, " (not comparable with the paper's agent: run with --primitives paper and a SAM 3 endpoint)")
		}
		fmt.Fprintln(w)
	}
	if s.WithPeople > 0 {
		fmt.Fprintf(w, "people: %d episode(s) with people's cells: %d cells, %d calls (%d stateful), %d env steps; not in the agent's calls, steps or stateful calls\n",
			s.WithPeople, s.HumanCells, s.HumanCalls, s.HumanStatefulCalls, s.HumanEnvSteps)
	}
}

// counts prints a map as sorted k=v pairs.
func counts(m map[string]int) string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// fmtCost prints a mean cost; nil is unknown (with how many episodes lack a price, when known).
func fmtCost(c *float64, missing int) string {
	switch {
	case c != nil:
		return fmt.Sprintf("$%.4f", *c)
	case missing > 0:
		return fmt.Sprintf("unknown (%d episode(s) without a price)", missing)
	}
	return "unknown"
}

package runs

import "github.com/pyrualean/pyrualean/agent"

// How an episode counts, as the original counts (PyRUA-Lean evaluation/metrics.py):
//
//   - Every episode of a code arm is in its success-rate denominator. A crash, a timeout, a boot
//     failure, a planner failure, an interrupted run: each is a failed episode. An episode whose
//     environment_success was never recorded (null) is a failed episode too (LoadRun reads it so).
//   - Only an RPent run without states.json has an unknown outcome; it is left out of the
//     denominator and counted apart ("unknown outcome"), never silently dropped.
//   - An episode still running (its play process alive) has no outcome yet: it is left out and the
//     table says it is not final.
//   - Infrastructure failures (boot_error, planner_error, interrupted, an error before any policy
//     action) are failed episodes like the others, and are also listed on a line of their own so the
//     user knows what to rerun; `eval` reruns boot_error, planner_error and interrupted episodes when
//     the same command runs again (--retries per run).
//   - The paper's LLM calls, input tokens and cost are means per episode over the instances (same
//     robot, suite:task and seed) that both systems solved: the jointly solved ones.

// Outcomes of an episode for counting.
const (
	OutcomeSolved  = "solved"
	OutcomeFailed  = "failed"
	OutcomeUnknown = "unknown" // an RPent run without states.json
	OutcomeRunning = "running" // no outcome yet
)

// Outcome says how the row counts toward its system's success rate.
func Outcome(r Row) string {
	switch {
	case r.Status == agent.StatusRunning:
		return OutcomeRunning
	case r.OK == nil:
		return OutcomeUnknown
	case *r.OK:
		return OutcomeSolved
	}
	return OutcomeFailed
}

// Counted says whether the row is in its system's success-rate denominator.
func Counted(r Row) bool {
	o := Outcome(r)
	return o == OutcomeSolved || o == OutcomeFailed
}

// Solved says whether the benchmark's predicate fired in the episode.
func Solved(r Row) bool { return Outcome(r) == OutcomeSolved }

// InfraErrorBeforeAction names an error status with no policy action (no tool call ran).
const InfraErrorBeforeAction = "error before any action"

// Infra names the infrastructure failure the row ended in ("" when it ended otherwise): the
// episode failed for a reason outside the policy, and a rerun may give it an outcome of its own.
func Infra(r Row) string {
	switch r.Status {
	case agent.StatusBootError, agent.StatusPlannerError, agent.StatusInterrupted:
		return r.Status
	case agent.StatusError:
		if r.Turns == 0 && r.Calls == 0 {
			return InfraErrorBeforeAction
		}
	}
	return ""
}

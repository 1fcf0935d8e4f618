// Package rollouts turns run folders into training records (pyrualean rollouts export): one record
// per rollout with its conversation in OpenAI chat form (tool calls and tool results, images as
// files), its reward and the reward's parts, its group (the K samples of one instance: eval --samples),
// the group-normalised advantage, and the token ids and log-probabilities when they were recorded
// (--record-tokens: tokens.jsonl).
//
//	rollouts.go     Load: run folders -> Rollout (result.json, prompt, tools.json, exchanges.jsonl,
//	                turns.jsonl, tokens.jsonl), groups and advantages
//	conversation.go the conversation: the prompt, then each LLM turn's reply and its calls' results
//	formats.go      the records of each format (chat, trl, verifiers) and Export
//
// It only reads run folders (as agent/runs does) and writes the export's own files.
package rollouts

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runs"
	"github.com/pyrualean/pyrualean/spec"
)

// TokensFile is the run-folder file of token-level trajectories (--record-tokens), one JSON line per
// LLM call that returned token data: {"turn": N, ...TokenData}, N as in turns.jsonl.
const TokensFile = "tokens.jsonl"

// TokenData is one LLM call's tokens, as the runtimes write them to tokens.jsonl: the completion's
// token ids (absent where the endpoint gives only strings), strings and log-probabilities (natural
// log), and the prompt's where the endpoint gives them.
type TokenData struct {
	Turn               int        `json:"turn"`
	CompletionIDs      []int      `json:"completion_ids,omitempty"`
	Completion         []string   `json:"completion_tokens"`
	CompletionLogprobs []float64  `json:"completion_logprobs"`
	PromptIDs          []int      `json:"prompt_ids,omitempty"`
	Prompt             []string   `json:"prompt_tokens,omitempty"`
	PromptLogprobs     []*float64 `json:"prompt_logprobs,omitempty"`
}

// Rollout is one run folder read for training.
type Rollout struct {
	Dir    string
	Row    runs.Row // how summarize counts it (outcome, status, group)
	Result agent.Result
	Group  string
	// Reward is the benchmark's success (1 or 0); Parts name its terms.
	Reward float64
	Parts  map[string]float64
	// Advantage is (Reward - mean) / std over the group's rewards (std with N-1, as TRL's GRPO); 0
	// when std is 0: a group whose rewards are all equal (or a group of one) carries no signal.
	Advantage float64
	Conv      *Conversation // nil: the episode never got as far as a prompt (a boot failure)
}

// LoadError names a run folder that could not be read.
type LoadError = runs.LoadError

// Load reads every run folder under paths (run folders, folders above them, eval suite folders), as
// summarize does, and computes groups and advantages. Episodes without an outcome yet (running) are
// left out and reported; every other episode, infrastructure failures included, is in its group with
// reward 0 unless it succeeded (the counting rules of agent/runs).
func Load(paths []string) ([]Rollout, []LoadError) {
	rows, errs := runs.LoadRuns(paths)
	var out []Rollout
	for _, row := range rows {
		if !runs.Counted(row) {
			errs = append(errs, LoadError{Path: row.Path, Err: "no outcome yet (" + row.Status + "): left out"})
			continue
		}
		r, err := loadRollout(row)
		if err != nil {
			errs = append(errs, LoadError{Path: row.Path, Err: err.Error()})
			continue
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Row.Sample < out[j].Row.Sample
	})
	setAdvantages(out)
	return out, errs
}

func loadRollout(row runs.Row) (Rollout, error) {
	r := Rollout{Dir: row.Path, Row: row}
	b, err := os.ReadFile(filepath.Join(row.Path, "result.json"))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r.Result); err != nil {
		return r, fmt.Errorf("result.json: %w", err)
	}
	if runs.Solved(row) {
		r.Reward = 1
	}
	r.Parts = map[string]float64{"success": r.Reward}
	r.Group = GroupID(row, r.Result)
	conv, err := readConversation(row.Path)
	switch {
	case errors.Is(err, os.ErrNotExist) && r.Result.Prompt.SHA256 == "":
		// never briefed (a boot failure): in its group, without a conversation
	case err != nil:
		return r, err
	default:
		r.Conv = conv
	}
	return r, nil
}

// GroupID names a rollout's group: its instance per system, model and policy settings. In an eval
// suite that is the episode id without its sample part (Row.Group holds the settings tag); elsewhere
// robot, suite:task, seed, arm, runtime and model (one episode is a group of one unless others share
// them).
func GroupID(row runs.Row, res agent.Result) string {
	g := fmt.Sprintf("%s/%s/%d/%s/%s-%s", row.Robot, row.Task, row.Seed, row.Arm, res.Runtime, res.Model)
	if row.Group != "" {
		g += "/" + filepath.Base(row.Group)
	}
	return g
}

// setAdvantages sets each rollout's group-normalised advantage.
func setAdvantages(rs []Rollout) {
	by := map[string][]int{}
	for i, r := range rs {
		by[r.Group] = append(by[r.Group], i)
	}
	for _, idx := range by {
		rewards := make([]float64, len(idx))
		for k, i := range idx {
			rewards[k] = rs[i].Reward
		}
		mean, std := meanStd(rewards)
		for _, i := range idx {
			if std > 0 {
				rs[i].Advantage = (rs[i].Reward - mean) / std
			}
		}
	}
}

// meanStd is the mean and the sample standard deviation (N-1; 0 for fewer than two values).
func meanStd(v []float64) (mean, std float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, 0
	}
	ss := 0.0
	for _, x := range v {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(v)-1))
}

// Sample is the rollout's place in its group (nil: a lone episode).
func (r Rollout) Sample() *spec.Sample { return r.Result.Sample }

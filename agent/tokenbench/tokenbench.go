// Package tokenbench measures what the two arms cost in input tokens on the same solutions: each
// task's reference solution is replayed through the cells arm (one python call per solution cell) and
// through the tools arm (one tool call per primitive call that solution made, from its ledger), both
// driven by the production OpenAI runtime against a scripted endpoint (endpoint.go), which counts every
// request's input tokens with a real BPE tokenizer.
package tokenbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/agent/runtimes"
	"github.com/pyrualean/pyrualean/agent/tokencount"
	"github.com/pyrualean/pyrualean/robotapi"
	"github.com/pyrualean/pyrualean/spec"
)

// Options configure a benchmark run.
type Options struct {
	Robot    string   // default tabletop
	Tasks    []string // default: every task of the robot
	Seed     int
	Encoding string // tokencount.O200k (default) or tokencount.CL100k
	Out      string // where the run folders go (default: a temporary directory, removed after)
	Images   string // image policy for both arms (default on-motion)
	Logger   *slog.Logger
}

// TaskResult is one task's row.
type TaskResult struct {
	Task             string  `json:"task"`
	CellsCalls       int     `json:"cells_calls"`
	ToolsCalls       int     `json:"tools_calls"`
	CellsInputTokens int     `json:"cells_input_tokens"`
	ToolsInputTokens int     `json:"tools_input_tokens"`
	Ratio            float64 `json:"ratio"` // cells / tools input tokens
	CellsSolved      bool    `json:"cells_solved"`
	ToolsSolved      bool    `json:"tools_solved"`
	CellsStatus      string  `json:"cells_status"`
	ToolsStatus      string  `json:"tools_status"`
	PrimitiveCalls   int     `json:"primitive_calls"`
}

// Report is the whole benchmark.
type Report struct {
	Robot        string       `json:"robot"`
	Seed         int          `json:"seed"`
	Encoding     string       `json:"encoding"`
	Images       string       `json:"images"`
	Tasks        []TaskResult `json:"tasks"`
	CellsTokens  int          `json:"cells_input_tokens"`
	ToolsTokens  int          `json:"tools_input_tokens"`
	CellsCalls   int          `json:"cells_calls"`
	ToolsCalls   int          `json:"tools_calls"`
	OverallRatio float64      `json:"overall_ratio"` // sum cells / sum tools input tokens
	WallS        float64      `json:"wall_s"`
}

// Run replays every task through both arms.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	if o.Robot == "" {
		o.Robot = robotapi.DefaultRobot
	}
	if o.Encoding == "" {
		o.Encoding = tokencount.O200k
	}
	if o.Images == "" {
		o.Images = spec.ImagesOnMotion
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	counter, err := tokencount.New(o.Encoding)
	if err != nil {
		return nil, err
	}
	if len(o.Tasks) == 0 {
		tasks, err := robotapi.Tasks(ctx, o.Robot)
		if err != nil {
			return nil, err
		}
		for _, t := range tasks {
			o.Tasks = append(o.Tasks, t.Name)
		}
	}
	if o.Out == "" {
		dir, err := os.MkdirTemp("", "pyrualean-bench-tokens-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.Out = dir
	}
	rep := &Report{Robot: o.Robot, Seed: o.Seed, Encoding: o.Encoding, Images: o.Images, Tasks: []TaskResult{}}
	for _, task := range o.Tasks {
		tr, err := runTask(ctx, o, counter, task)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", task, err)
		}
		rep.Tasks = append(rep.Tasks, *tr)
		rep.CellsTokens += tr.CellsInputTokens
		rep.ToolsTokens += tr.ToolsInputTokens
		rep.CellsCalls += tr.CellsCalls
		rep.ToolsCalls += tr.ToolsCalls
	}
	if rep.ToolsTokens > 0 {
		rep.OverallRatio = agent.Round(float64(rep.CellsTokens)/float64(rep.ToolsTokens), 4)
	}
	rep.WallS = agent.Round(time.Since(start).Seconds(), 4)
	return rep, nil
}

func call(name string, args any) toolCall {
	b, _ := json.Marshal(args)
	return toolCall{Name: name, Arguments: string(b)}
}

func runTask(ctx context.Context, o Options, counter *tokencount.Counter, task string) (*TaskResult, error) {
	cells, err := robotapi.SolutionCells(o.Robot, task)
	if err != nil {
		return nil, err
	}
	var steps []toolCall
	for _, c := range cells {
		steps = append(steps, call("python", map[string]string{"code": c}))
	}
	steps = append(steps, call("finish", map[string]string{"status": "success", "summary": "reference solution"}))
	cellsDir := filepath.Join(o.Out, task+"-cells")
	cres, err := runArm(ctx, o, counter, task, spec.ArmCells, cellsDir, steps)
	if err != nil {
		return nil, err
	}
	ledger, err := readLedger(filepath.Join(cellsDir, "calls.jsonl"))
	if err != nil {
		return nil, err
	}
	steps = nil
	for _, rec := range ledger {
		steps = append(steps, call(rec.Tool, rec.Kwargs))
	}
	steps = append(steps, call("finish", map[string]string{"status": "success", "summary": "reference solution"}))
	tres, err := runArm(ctx, o, counter, task, spec.ArmTools, filepath.Join(o.Out, task+"-tools"), steps)
	if err != nil {
		return nil, err
	}
	tr := &TaskResult{
		Task: task, CellsCalls: cres.Generation.Turns, ToolsCalls: tres.Generation.Turns,
		CellsInputTokens: cres.Generation.InputTokens, ToolsInputTokens: tres.Generation.InputTokens,
		CellsSolved: solved(cres), ToolsSolved: solved(tres), CellsStatus: cres.Status, ToolsStatus: tres.Status,
		PrimitiveCalls: len(ledger),
	}
	if tr.ToolsInputTokens > 0 {
		tr.Ratio = agent.Round(float64(tr.CellsInputTokens)/float64(tr.ToolsInputTokens), 4)
	}
	return tr, nil
}

func solved(r *agent.Result) bool { return r.EnvironmentSuccess != nil && *r.EnvironmentSuccess }

func runArm(ctx context.Context, o Options, counter *tokencount.Counter, task, arm, out string, steps []toolCall) (*agent.Result, error) {
	srv, err := startEndpoint(counter, steps)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	s := spec.New()
	s.Robot, s.Task, s.Seed, s.Arm, s.Images, s.Out, s.Sealed = o.Robot, task, o.Seed, arm, o.Images, out, spec.SealOff
	s.Policy = spec.Policy{Runtime: "openai", Model: "scripted-" + o.Encoding}
	if err := s.Validate(ctx, &robotapi.Registry{}); err != nil {
		return nil, err
	}
	ep, err := agent.StartEpisode(ctx, s, agent.Host{Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	runErr := runtimes.RunOpenAI(ctx, ep, runtimes.OpenAIConfig{
		BaseURL: srv.baseURL(), APIKey: "bench", Model: "scripted-" + o.Encoding, Logger: o.Logger,
		Backoff: 10 * time.Millisecond, PlannerRetryWait: 10 * time.Millisecond,
	})
	res, err := ep.Finish(ctx, "", runErr)
	if err != nil {
		return nil, err
	}
	if runErr != nil {
		return nil, fmt.Errorf("%s arm: %w", arm, runErr)
	}
	return res, nil
}

type ledgerRecord struct {
	Tool   string         `json:"tool"`
	Kwargs map[string]any `json:"kwargs"`
}

func readLedger(path string) ([]ledgerRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ledgerRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r ledgerRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if r.Kwargs == nil {
			r.Kwargs = map[string]any{}
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// WriteTable prints the per-task table and the overall ratio.
func WriteTable(w io.Writer, r *Report) {
	fmt.Fprintf(w, "input tokens (%s, images %s), reference solutions replayed through both arms on %s seed %d\n", r.Encoding, r.Images, r.Robot, r.Seed)
	fmt.Fprintf(w, "%-24s %6s %6s %10s %10s %7s %s\n", "task", "cells", "tools", "cells_tok", "tools_tok", "ratio", "solved c/t")
	yn := map[bool]string{true: "Y", false: "N"}
	for _, t := range r.Tasks {
		fmt.Fprintf(w, "%-24s %6d %6d %10d %10d %7.3f %s/%s\n", t.Task, t.CellsCalls, t.ToolsCalls, t.CellsInputTokens, t.ToolsInputTokens, t.Ratio, yn[t.CellsSolved], yn[t.ToolsSolved])
	}
	fmt.Fprintf(w, "%-24s %6d %6d %10d %10d %7.3f\n", "overall", r.CellsCalls, r.ToolsCalls, r.CellsTokens, r.ToolsTokens, r.OverallRatio)
	fmt.Fprintf(w, "cells arm uses %.2fx the tools arm's input tokens (%.1fx fewer); wall %.1f s\n", r.OverallRatio, 1/max(r.OverallRatio, 1e-9), r.WallS)
}

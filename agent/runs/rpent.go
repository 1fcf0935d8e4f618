package runs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// RPentSystem is the system column of RPent's own tool-calling runs (its `rpent` CLI), which summarize
// shows beside ours and compare pairs with ours.
const RPentSystem = "rpent"

// PerceptionSimulatorMasks is the privileged perception a LIBERO episode records when segment() reads
// the simulator's masks instead of a SAM 3 server.
const PerceptionSimulatorMasks = "simulator-masks"

// An RPent run folder (RLinf/RPent, rpent/cli/main.py) holds transcript_<recipe>.json, the run record
// {**task_desc, model, elapsed_s, finish, stats, messages}, and states.json, the EnvState manifest
// {run_artifacts, steps: [{step_idx, terminated, truncated, ...}]}. As the original reads it: success is
// any step terminated; status is finish.status, or "no_finish" when the planner never called finish.
type rpentTranscript struct {
	// task_desc: LIBERO {suite, task, seed}; RoboCasa {task_name, split, seed}.
	Suite    string          `json:"suite"`
	Task     json.RawMessage `json:"task"`
	TaskName string          `json:"task_name"`
	Split    string          `json:"split"`
	Seed     int             `json:"seed"`
	Model    string          `json:"model"`
	ElapsedS float64         `json:"elapsed_s"`
	Finish   *struct {
		Status string `json:"status"`
	} `json:"finish"`
	Stats struct {
		TurnsUsed      int `json:"turns_used"`
		ToolCalls      int `json:"tool_calls"`
		InputTokens    int `json:"total_input_tokens"`
		OutputTokens   int `json:"total_output_tokens"`
		CacheReadToken int `json:"cache_read_tokens"`
		Requests       int `json:"requests"`
	} `json:"stats"`
}

type rpentStates struct {
	Steps []struct {
		Terminated bool `json:"terminated"`
	} `json:"steps"`
}

// rpentTranscripts lists dir's transcript_*.json files, newest name last.
func rpentTranscripts(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "transcript_*.json"))
	sort.Strings(m)
	return m
}

// isRPentRun says whether dir is an RPent run folder (a transcript and no result.json of ours).
func isRPentRun(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "result.json")); err == nil {
		return false
	}
	return len(rpentTranscripts(dir)) > 0
}

// loadRPentRun reads an RPent run folder as a row. RPent opens its transcript for appending, so a
// rerun into the same folder leaves several records one after another: the last one is the run.
func loadRPentRun(dir string) (Row, error) {
	files := rpentTranscripts(dir)
	path := files[len(files)-1]
	f, err := os.Open(path)
	if err != nil {
		return Row{}, err
	}
	defer f.Close()
	var t rpentTranscript
	dec := json.NewDecoder(f)
	for n := 0; ; n++ {
		var next rpentTranscript
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) && n > 0 {
			break
		}
		if err != nil {
			return Row{}, fmt.Errorf("%s is corrupt: %w", filepath.Base(path), err)
		}
		t = next
	}
	robot, suite, task := "libero", t.Suite, strings.Trim(string(t.Task), `"`)
	if t.TaskName != "" {
		robot, suite, task = "robocasa", t.Split, t.TaskName
	}
	status := "no_finish"
	if t.Finish != nil && t.Finish.Status != "" {
		status = t.Finish.Status
	}
	var ok *bool
	steps := 0
	if b, err := os.ReadFile(filepath.Join(dir, "states.json")); err == nil {
		var st rpentStates
		if err := json.Unmarshal(b, &st); err != nil {
			return Row{}, fmt.Errorf("states.json is corrupt: %w", err)
		}
		solved := false
		for _, s := range st.Steps {
			solved = solved || s.Terminated
		}
		ok, steps = &solved, len(st.Steps)
	}
	llm := t.Stats.Requests
	if llm == 0 {
		llm = t.Stats.TurnsUsed
	}
	return Row{
		Path: dir, System: RPentSystem + ":tools", Arm: "tools", Robot: robot, Suite: suite, Task: TaskKey(suite, task), Seed: t.Seed, Model: t.Model,
		OK: ok, Status: status, Turns: t.Stats.ToolCalls, Calls: t.Stats.ToolCalls, Steps: steps, WallS: t.ElapsedS,
		InTok: t.Stats.InputTokens, Cached: t.Stats.CacheReadToken, OutTok: t.Stats.OutputTokens, LLMCalls: llm,
	}, nil
}

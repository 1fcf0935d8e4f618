package notebooks

import (
	"maps"
	"strings"
)

// This file is the one home of pyrualean's trace metadata: CellMeta is a cell's metadata.pyrualean,
// EpisodeMeta the notebook's. Each has one encode (Map) and one decode (ParseCellMeta / CellMetaOf,
// ParseEpisodeMeta), used by the episode writer (agent), human cells, replay and the replay runtime.
// Keys a type does not know are kept in Extra, so a round trip loses nothing. To add a field: add it
// to the struct, to Map and to the parse function below, and to the table in meta_test.go.

// FinishMeta is the model's finish call, kept on its markdown cell.
type FinishMeta struct {
	Status  string `json:"status"`
	Summary string `json:"summary"`
}

// CellMeta is one cell's metadata.pyrualean.
type CellMeta struct {
	Author       string         // AuthorAgent, AuthorTool, AuthorHuman, AuthorSetup; "" for a plain notebook's cell
	Kind         string         // a setup markdown cell's kind: "task_card"
	Turn         int            // the tool call's number (1-based); 0: none
	Tool         string         // the tool that made the cell: python, a primitive (tools arm), finish
	Sandbox      *bool          // the cell ran under the sandbox (nil: not recorded)
	Status       string         // execute_reply status: ok | error | aborted
	ElapsedS     *float64       // wall time of the execute
	Args         map[string]any // a tools-arm primitive's keyword arguments
	ImagesSent   []string       // images the model was sent with the cell's feedback
	SandboxFlags []string       // what the sandbox flagged during the cell
	Finish       *FinishMeta    // the finish call (markdown cell of tool finish)
	MsgID        string         // the execute_request's msg_id (the live document finds a cell by it)
	HumanCell    int            // a person's cell: its number in the episode (1-based); 0: none
	AfterEnd     bool           // a person's cell run after the episode ended (play --serve-linger)
	Ledger       *CellLedger    // what the cell did to the robot (a person's cell: never charged to the agent)
	// InterruptedBy says who interrupted the cell ("person": from JupyterLab through the gateway).
	InterruptedBy string
	Extra         map[string]any // keys not listed above
}

// CellLedger is what one cell did to the robot: primitive calls, the stateful ones, simulator steps.
type CellLedger struct {
	Calls, StatefulCalls, EnvSteps int
}

// Cell tags (metadata.tags, read by JupyterLab and nbclient). A cell that raised carries
// TagRaisesException so Run All goes on past it; a person's cell carries TagHuman, and one run after
// the episode ended (in a kernel kept for people) TagAfterEnd too.
const (
	TagRaisesException = "raises-exception"
	TagHuman           = "human"
	TagAfterEnd        = "after-end"
)

// Map encodes m as the value of metadata.pyrualean (zero fields are left out).
func (m CellMeta) Map() map[string]any {
	out := maps.Clone(m.Extra)
	if out == nil {
		out = map[string]any{}
	}
	setStr(out, "author", m.Author)
	setStr(out, "kind", m.Kind)
	setStr(out, "tool", m.Tool)
	setStr(out, "status", m.Status)
	if m.Turn != 0 {
		out["turn"] = m.Turn
	}
	if m.Sandbox != nil {
		out["sandbox"] = *m.Sandbox
	}
	if m.ElapsedS != nil {
		out["elapsed_s"] = *m.ElapsedS
	}
	if m.Args != nil {
		out["args"] = m.Args
	}
	if len(m.ImagesSent) > 0 {
		out["images_sent"] = m.ImagesSent
	}
	if len(m.SandboxFlags) > 0 {
		out["sandbox_flags"] = m.SandboxFlags
	}
	if m.Finish != nil {
		out["finish"] = map[string]any{"status": m.Finish.Status, "summary": m.Finish.Summary}
	}
	setStr(out, "msg_id", m.MsgID)
	setStr(out, "interrupted_by", m.InterruptedBy)
	if m.HumanCell != 0 {
		out["human_cell"] = m.HumanCell
	}
	if m.AfterEnd {
		out["after_end"] = true
	}
	if l := m.Ledger; l != nil {
		out["calls"], out["stateful_calls"], out["env_steps"] = l.Calls, l.StatefulCalls, l.EnvSteps
	}
	return out
}

// ParseCellMeta decodes a metadata.pyrualean value (as read from a file or as Map made it).
func ParseCellMeta(v any) CellMeta {
	src, _ := v.(map[string]any)
	rest := maps.Clone(src)
	var m CellMeta
	m.Author = takeStr(rest, "author")
	m.Kind = takeStr(rest, "kind")
	m.Tool = takeStr(rest, "tool")
	m.Status = takeStr(rest, "status")
	if n, ok := takeNum(rest, "turn"); ok {
		m.Turn = int(n)
	}
	if b, ok := rest["sandbox"].(bool); ok {
		m.Sandbox = &b
		delete(rest, "sandbox")
	}
	if n, ok := takeNum(rest, "elapsed_s"); ok {
		m.ElapsedS = &n
	}
	if a, ok := rest["args"].(map[string]any); ok {
		m.Args = a
		delete(rest, "args")
	}
	m.ImagesSent = takeStrs(rest, "images_sent")
	m.SandboxFlags = takeStrs(rest, "sandbox_flags")
	if f, ok := rest["finish"].(map[string]any); ok {
		s, _ := f["status"].(string)
		sum, _ := f["summary"].(string)
		m.Finish = &FinishMeta{Status: s, Summary: sum}
		delete(rest, "finish")
	}
	m.MsgID = takeStr(rest, "msg_id")
	m.InterruptedBy = takeStr(rest, "interrupted_by")
	if n, ok := takeNum(rest, "human_cell"); ok {
		m.HumanCell = int(n)
	}
	if b, ok := rest["after_end"].(bool); ok {
		m.AfterEnd = b
		delete(rest, "after_end")
	}
	if _, ok := rest["calls"]; ok {
		l := &CellLedger{}
		for k, p := range map[string]*int{"calls": &l.Calls, "stateful_calls": &l.StatefulCalls, "env_steps": &l.EnvSteps} {
			if n, ok := takeNum(rest, k); ok {
				*p = int(n)
			}
		}
		m.Ledger = l
	}
	if len(rest) > 0 {
		m.Extra = rest
	}
	return m
}

// CellMetaOf decodes a cell's metadata.pyrualean. A finish cell written before finish was structured
// metadata ({"tool": "finish", "status": ...} with the summary after the cell's first paragraph) is
// read the same way.
func CellMetaOf(c Cell) CellMeta {
	m := ParseCellMeta(c.Metadata[MetaKey])
	if m.Tool == "finish" && m.Finish == nil && c.CellType == CellMarkdown {
		summary := strings.TrimSpace(c.Source)
		if _, rest, ok := strings.Cut(summary, "\n\n"); ok {
			summary = strings.TrimSpace(rest)
		}
		m.Finish = &FinishMeta{Status: m.Status, Summary: summary}
		m.Status = ""
	}
	return m
}

// EpisodeBudgets is metadata.pyrualean.budgets; nil stands for unlimited.
type EpisodeBudgets struct {
	MaxTurns     *int
	BudgetS      *float64
	MaxEnvSteps  int
	CellTimeoutS float64
}

// EpisodeTotals are the counters written when the episode ends.
type EpisodeTotals struct {
	ToolTurns, LLMCalls, EnvSteps                int
	InputTokens, CachedInputTokens, OutputTokens int
	ReasoningOutputTokens, TotalTokens           int
	PolicyWallS                                  float64
}

// EpisodeEvent is one thing a person (or the gateway for them) did to a live episode: pause, resume,
// step, interrupt (of a cell), replan (a held cell dropped after a person's cells), linger.
type EpisodeEvent struct {
	At     string // RFC 3339 UTC
	Kind   string
	By     string // "person" (through the gateway); "" : the episode itself
	Turn   int    // the tool calls made when it happened
	Detail string
}

// EpisodeMeta is the notebook's metadata.pyrualean: what ran, under which budgets and versions, and
// how it ended. Success stays nil (written as null) until the environment says otherwise.
type EpisodeMeta struct {
	Robot, Suite, Task, Arm      string
	Seed                         int
	Model, Runtime               string
	Images, Feedback, Primitives string
	MaxTurns                     int     // 0: unlimited
	BudgetS                      float64 // 0: none
	Status                       string
	Success                      *bool // the environment's verdict (also written as environment_success)
	Budgets                      *EpisodeBudgets
	Versions                     map[string]any
	TaskLanguage, PromptSHA256   string
	Totals                       *EpisodeTotals // nil until the episode ends
	Error                        string
	Events                       []EpisodeEvent // what people did to the live episode, in order
	Extra                        map[string]any // keys not listed above (replay, ...)
}

// episodeKeys are the keys EpisodeMeta owns; anything else is Extra.
var episodeKeys = []string{"robot", "suite", "task", "seed", "arm", "model", "runtime", "images", "feedback",
	"primitives", "max_turns", "budget_s", "status", "success", "environment_success", "budgets", "versions",
	"task_language", "prompt_sha256", "tool_turns", "llm_calls", "input_tokens", "cached_input_tokens",
	"output_tokens", "reasoning_output_tokens", "total_tokens", "policy_wall_s", "env_steps", "error", "events"}

// Map encodes m as the value of the notebook's metadata.pyrualean.
func (m EpisodeMeta) Map() map[string]any {
	out := maps.Clone(m.Extra)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range map[string]any{"robot": m.Robot, "suite": m.Suite, "task": m.Task, "arm": m.Arm,
		"model": m.Model, "runtime": m.Runtime, "images": m.Images, "feedback": m.Feedback,
		"primitives": m.Primitives, "status": m.Status, "seed": m.Seed, "max_turns": m.MaxTurns, "budget_s": m.BudgetS} {
		out[k] = v
	}
	// success is the trace contract's key; environment_success is what result.json calls it.
	out["success"], out["environment_success"] = m.Success, m.Success
	if b := m.Budgets; b != nil {
		bm := map[string]any{"max_turns": nil, "budget_s": nil, "max_env_steps": b.MaxEnvSteps, "cell_timeout_s": b.CellTimeoutS}
		if b.MaxTurns != nil {
			bm["max_turns"] = *b.MaxTurns
		}
		if b.BudgetS != nil {
			bm["budget_s"] = *b.BudgetS
		}
		out["budgets"] = bm
	}
	if m.Versions != nil {
		out["versions"] = m.Versions
	}
	setStr(out, "task_language", m.TaskLanguage)
	setStr(out, "prompt_sha256", m.PromptSHA256)
	setStr(out, "error", m.Error)
	if len(m.Events) > 0 {
		evs := make([]any, len(m.Events))
		for i, e := range m.Events {
			ev := map[string]any{"at": e.At, "kind": e.Kind, "turn": e.Turn}
			setStr(ev, "by", e.By)
			setStr(ev, "detail", e.Detail)
			evs[i] = ev
		}
		out["events"] = evs
	}
	if t := m.Totals; t != nil {
		for k, v := range map[string]any{"tool_turns": t.ToolTurns, "llm_calls": t.LLMCalls, "env_steps": t.EnvSteps,
			"input_tokens": t.InputTokens, "cached_input_tokens": t.CachedInputTokens, "output_tokens": t.OutputTokens,
			"reasoning_output_tokens": t.ReasoningOutputTokens, "total_tokens": t.TotalTokens, "policy_wall_s": t.PolicyWallS} {
			out[k] = v
		}
	}
	return out
}

// ParseEpisodeMeta decodes a notebook's metadata.pyrualean (from nb.Metadata).
func ParseEpisodeMeta(nbMeta map[string]any) EpisodeMeta {
	src, _ := nbMeta[MetaKey].(map[string]any)
	var m EpisodeMeta
	str := func(k string) string { s, _ := src[k].(string); return s }
	m.Robot, m.Suite, m.Task, m.Arm = str("robot"), str("suite"), str("task"), str("arm")
	m.Model, m.Runtime, m.Images, m.Feedback = str("model"), str("runtime"), str("images"), str("feedback")
	m.Primitives, m.Status, m.TaskLanguage = str("primitives"), str("status"), str("task_language")
	m.PromptSHA256, m.Error = str("prompt_sha256"), str("error")
	if n, ok := toFloat(src["seed"]); ok {
		m.Seed = int(n)
	}
	if n, ok := toFloat(src["max_turns"]); ok {
		m.MaxTurns = int(n)
	}
	m.BudgetS, _ = toFloat(src["budget_s"])
	for _, k := range []string{"success", "environment_success"} {
		if s, ok := src[k].(bool); ok {
			m.Success = &s
			break
		}
		if p, ok := src[k].(*bool); ok && p != nil {
			s := *p
			m.Success = &s
			break
		}
	}
	if b, ok := src["budgets"].(map[string]any); ok {
		eb := &EpisodeBudgets{}
		if n, ok := toFloat(b["max_turns"]); ok {
			mt := int(n)
			eb.MaxTurns = &mt
		}
		if n, ok := toFloat(b["budget_s"]); ok {
			eb.BudgetS = &n
		}
		if n, ok := toFloat(b["max_env_steps"]); ok {
			eb.MaxEnvSteps = int(n)
		}
		eb.CellTimeoutS, _ = toFloat(b["cell_timeout_s"])
		m.Budgets = eb
	}
	if v, ok := src["versions"].(map[string]any); ok {
		m.Versions = maps.Clone(v)
	}
	if _, ok := src["tool_turns"]; ok {
		t := &EpisodeTotals{}
		ints := map[string]*int{"tool_turns": &t.ToolTurns, "llm_calls": &t.LLMCalls, "env_steps": &t.EnvSteps,
			"input_tokens": &t.InputTokens, "cached_input_tokens": &t.CachedInputTokens, "output_tokens": &t.OutputTokens,
			"reasoning_output_tokens": &t.ReasoningOutputTokens, "total_tokens": &t.TotalTokens}
		for k, p := range ints {
			if n, ok := toFloat(src[k]); ok {
				*p = int(n)
			}
		}
		t.PolicyWallS, _ = toFloat(src["policy_wall_s"])
		m.Totals = t
	}
	if evs, ok := src["events"].([]any); ok {
		for _, v := range evs {
			ev, _ := v.(map[string]any)
			if ev == nil {
				continue
			}
			e := EpisodeEvent{}
			e.At, _ = ev["at"].(string)
			e.Kind, _ = ev["kind"].(string)
			e.By, _ = ev["by"].(string)
			e.Detail, _ = ev["detail"].(string)
			if n, ok := toFloat(ev["turn"]); ok {
				e.Turn = int(n)
			}
			m.Events = append(m.Events, e)
		}
	}
	rest := maps.Clone(src)
	for _, k := range episodeKeys {
		delete(rest, k)
	}
	if len(rest) > 0 {
		m.Extra = rest
	}
	return m
}

func setStr(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func takeStr(m map[string]any, k string) string {
	s, ok := m[k].(string)
	if ok {
		delete(m, k)
	}
	return s
}

func takeStrs(m map[string]any, k string) []string {
	var out []string
	switch l := m[k].(type) {
	case []string:
		out = append(out, l...)
	case []any:
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	default:
		return nil
	}
	delete(m, k)
	return out
}

func takeNum(m map[string]any, k string) (float64, bool) {
	n, ok := toFloat(m[k])
	if ok {
		delete(m, k)
	}
	return n, ok
}

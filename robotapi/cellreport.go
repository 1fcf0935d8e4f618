package robotapi

import (
	"encoding/json"
	"fmt"
)

// CellReportExpr is the user expression that asks the robot for its cell_report(): evaluated with
// every agent cell (the ledger, state and verdict of that cell) and after a replay (its outcome).
const CellReportExpr = "__import__('pyrualean_robot').cell_report()"

// CellReport is cell_report()'s JSON: what the robot saw during one cell. This is the one Go-side
// list of its keys; the Python side is pyrualean_robot's cell_report.
type CellReport struct {
	Moved           bool             `json:"moved"`
	EnvSteps        int              `json:"env_steps"`
	EnvStepsTotal   int              `json:"env_steps_total"`
	Calls           []map[string]any `json:"calls"`
	CallsOmitted    int              `json:"calls_omitted"` // older records of the window not listed (a size bound)
	State           map[string]any   `json:"state"`
	Done            bool             `json:"done"`
	Success         *bool            `json:"success"` // nil: the robot has no verdict
	EpisodeFinished *string          `json:"episode_finished"`
	SandboxFlags    []string         `json:"sandbox_flags"`

	// The same state and calls as read, key order kept, for text that shows them in the robot's order.
	RawState json.RawMessage   `json:"-"`
	RawCalls []json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the report and keeps its state and calls raw as well.
func (r *CellReport) UnmarshalJSON(b []byte) error {
	type plain CellReport
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	var raw struct {
		State json.RawMessage   `json:"state"`
		Calls []json.RawMessage `json:"calls"`
	}
	if err := json.Unmarshal(b, &raw); err == nil {
		r.RawState, r.RawCalls = raw.State, raw.Calls
	}
	return nil
}

// DecodeCellReport reads the report from an execute_reply's user_expressions entry key.
func DecodeCellReport(ue map[string]json.RawMessage, key string) (*CellReport, error) {
	j, err := UserExpressionJSON(ue, key)
	if err != nil {
		return nil, err
	}
	var r CellReport
	if err := json.Unmarshal(j, &r); err != nil {
		return nil, fmt.Errorf("cell report: %w", err)
	}
	return &r, nil
}

// UserExpressionJSON reads one user_expressions entry's application/json value (an IPython.display
// JSON object), or says why there is none (missing, failed with ename: evalue, no JSON).
func UserExpressionJSON(ue map[string]json.RawMessage, key string) ([]byte, error) {
	raw, ok := ue[key]
	if !ok {
		return nil, fmt.Errorf("user expression %q: missing from execute_reply", key)
	}
	var v struct {
		Status string                     `json:"status"`
		Data   map[string]json.RawMessage `json:"data"`
		Ename  string                     `json:"ename"`
		Evalue string                     `json:"evalue"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("user expression %q: %w", key, err)
	}
	if v.Status != "ok" {
		return nil, fmt.Errorf("user expression %q failed: %s: %s", key, v.Ename, v.Evalue)
	}
	j, ok := v.Data["application/json"]
	if !ok {
		return nil, fmt.Errorf("user expression %q: no application/json in its data", key)
	}
	return j, nil
}

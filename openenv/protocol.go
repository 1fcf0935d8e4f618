package openenv

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pyrualean/pyrualean/agent"
)

// Error codes of OpenEnv's error frames (openenv.core.env_server.types.WSErrorCode), so a client
// can tell them apart.
const (
	CodeInvalidJSON     = "INVALID_JSON"
	CodeUnknownType     = "UNKNOWN_TYPE"
	CodeValidation      = "VALIDATION_ERROR"
	CodeExecution       = "EXECUTION_ERROR"
	CodeCapacityReached = "CAPACITY_REACHED"
	CodeSessionError    = "SESSION_ERROR"
)

// inFrame is a client frame: {"type": "reset"|"step"|"state"|"close", "data": {...}}.
type inFrame struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// outFrame is a server frame: observation (answering reset and step), state, or error.
type outFrame struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// StepData is an observation frame's data, as OpenEnv's serialize_observation shapes it: the
// observation's own fields, with reward, done and metadata beside them (metadata also inside the
// observation, as OpenEnv keeps it for typed clients).
type StepData struct {
	Observation Observation    `json:"observation"`
	Reward      *float64       `json:"reward"`
	Done        bool           `json:"done"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// Observation is what the policy reads: after reset, the prompt (text, the task card's images) and
// the arm's tools; after a step, exactly the tool result the agent gets in play (agent.ToolResult).
type Observation struct {
	Text   string  `json:"text"`
	Images []Image `json:"images"`
	// Tools are the episode's tools as OpenAI function tools (reset only): what a chat model is given.
	Tools []map[string]any `json:"tools,omitempty"`
	// IsError: the call was refused (unknown tool, bad arguments, budget) or failed; Text says why.
	IsError bool `json:"is_error"`
	// EpisodeDone: the robot ended the episode (task predicate, step budget); the policy may still
	// call finish, as in play.
	EpisodeDone bool           `json:"episode_done"`
	Metadata    map[string]any `json:"metadata"`
}

// Image is one PNG of an observation, base64-encoded.
type Image struct {
	Name     string `json:"name"`
	MimeType string `json:"mime_type"`
	Data     string `json:"data"`
}

func images(ims []agent.Image) []Image {
	out := make([]Image, 0, len(ims))
	for _, im := range ims {
		out = append(out, Image{Name: im.Name, MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(im.PNG)})
	}
	return out
}

// protoError is a protocol failure answered with an error frame (not an observation): the client's
// frame could not be acted on, and OpenEnv's client raises it.
type protoError struct {
	code string
	msg  string
}

func (e *protoError) Error() string { return e.msg }

func errFrame(code, format string, args ...any) error {
	return &protoError{code: code, msg: fmt.Sprintf(format, args...)}
}

// errorData is an error frame's data for err: its code when it is a protoError, else
// EXECUTION_ERROR.
func errorData(err error) map[string]any {
	var pe *protoError
	if errors.As(err, &pe) {
		return map[string]any{"message": pe.msg, "code": pe.code}
	}
	return map[string]any{"message": err.Error(), "code": CodeExecution}
}

// Action is a step's data: a tool call of the episode's arm, {"tool": NAME, "arguments": {...}}, or
// {"code": SOURCE}, read as the python call (OpenEnv's coding environment's action).
type Action struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Code      *string         `json:"code"`
}

// parseAction reads a step's data. A frame that is not an action at all is a protocol error; a tool
// the arm lacks or arguments it refuses are not: the episode's toolkit answers those, as in play.
func parseAction(data json.RawMessage) (name string, args json.RawMessage, err error) {
	var a Action
	if len(data) == 0 || string(data) == "null" {
		return "", nil, errFrame(CodeValidation, `step needs data: {"tool": NAME, "arguments": {...}} or {"code": "..."}`)
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return "", nil, errFrame(CodeValidation, `step data is not an action object ({"tool": NAME, "arguments": {...}} or {"code": "..."}): %v`, err)
	}
	switch {
	case a.Code != nil && a.Tool != "":
		return "", nil, errFrame(CodeValidation, `step data has both "code" and "tool": send one`)
	case a.Code != nil:
		b, _ := json.Marshal(map[string]string{"code": *a.Code})
		return "python", b, nil
	case a.Tool == "":
		return "", nil, errFrame(CodeValidation, `step data names no tool: {"tool": NAME, "arguments": {...}} or {"code": "..."}`)
	}
	args = a.Arguments
	var text string
	switch {
	case len(args) == 0 || string(args) == "null":
		args = json.RawMessage("{}")
	case json.Unmarshal(args, &text) == nil:
		// OpenAI's tool calls carry their arguments as JSON text: the toolkit reads the text, and
		// answers text that is not a JSON object as play does.
		args = json.RawMessage(text)
	}
	return a.Tool, args, nil
}

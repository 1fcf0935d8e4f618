package openenv

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/pyrualean/pyrualean/agent"
)

// The routes that describe the environment, as OpenEnv's server answers them in its production mode
// (sessions over /ws only: no stateless /reset, /step or /state), so OpenEnv's runtime validator
// (`openenv.cli._validation.validate_running_environment`) and tools that read /schema find what they
// expect. They hold no secret and start nothing: serve mounts them without the token, as /health must be.

// APIVersion is the OpenEnv HTTP profile these routes follow (the validator's "openenv-http/1.x").
const APIVersion = "1.0.0"

// stateDoc is the state a session answers (result.json as on disk, and these).
type stateDoc struct {
	agent.Result
	EpisodeID string `json:"episode_id" jsonschema:"the episode's id (its run folder's name)"`
	StepCount int    `json:"step_count" jsonschema:"steps taken, refused calls included"`
	RunDir    string `json:"run_dir" jsonschema:"the run folder on the server"`
	Done      bool   `json:"done" jsonschema:"the episode has ended"`
}

var anyJSON = &jsonschema.Schema{} // json.RawMessage: any JSON value

// Schemas are the JSON schemas of an action, an observation and a state (/schema's answer).
func Schemas() (map[string]any, error) {
	opts := &jsonschema.ForOptions{IgnoreInvalidTypes: true,
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[json.RawMessage](): anyJSON}}
	// An action is one of two shapes (Action reads either): a union the inference cannot say.
	out := map[string]any{"action": &jsonschema.Schema{
		Description: "a tool call of the episode's arm, or a python cell as OpenEnv's coding environment takes it",
		OneOf: []*jsonschema.Schema{
			{Type: "object", Required: []string{"tool"}, AdditionalProperties: &jsonschema.Schema{Not: anyJSON},
				Properties: map[string]*jsonschema.Schema{
					"tool":      {Type: "string", Description: "python, a primitive (tools arm), run_program or finish"},
					"arguments": {Type: "object", Description: "the tool's arguments (its schema is in the reset observation's tools)"}}},
			{Type: "object", Required: []string{"code"}, AdditionalProperties: &jsonschema.Schema{Not: anyJSON},
				Properties: map[string]*jsonschema.Schema{"code": {Type: "string", Description: "a python cell"}}},
		}}}
	for name, t := range map[string]reflect.Type{"observation": reflect.TypeFor[StepData](), "state": reflect.TypeFor[stateDoc]()} {
		s, err := jsonschema.ForType(t, opts)
		if err != nil {
			return nil, err
		}
		out[name] = s
	}
	out["reset_observation"] = out["observation"]
	return out, nil
}

// Describe is the environment's description: /health, /metadata, /schema, /openapi.json and /mcp, keyed
// by method patterns for a mux.
func Describe(version string) map[string]http.Handler {
	schemas := sync.OnceValues(Schemas)
	return map[string]http.Handler{
		"GET /health": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"status": "healthy"})
		}),
		"GET /metadata": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"name": "pyrualean",
				"description": "A robot controlled by code: each session is one sealed episode (robot × task × seed × arm) " +
					"whose actions are the arm's tool calls (python cells, the robot's primitives, run_program, finish) " +
					"and whose observations are the feedback an agent gets, traced as a notebook.",
				"version": version, "author": "pyrualean", "documentation_url": "https://github.com/pyrualean/pyrualean"})
		}),
		"GET /schema": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, err := schemas()
			if err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]any{"detail": err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, s)
		}),
		"GET /openapi.json": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, openAPI(version))
		}),
		"POST /mcp": http.HandlerFunc(mcp),
	}
}

// openAPI is the routes' OpenAPI document (production mode: no /reset, /step, /state).
func openAPI(version string) map[string]any {
	get := func(summary string) map[string]any {
		return map[string]any{"get": map[string]any{"summary": summary,
			"responses": map[string]any{"200": map[string]any{"description": "OK"}}}}
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "pyrualean OpenEnv environment", "version": APIVersion, "x-pyrualean-version": version},
		"paths": map[string]any{
			"/ws":       get("An environment session (OpenEnv's WebSocket protocol: reset, step, state, close); token auth"),
			"/health":   get("Health check"),
			"/metadata": get("Environment metadata"),
			"/schema":   get("JSON schemas of the action, observation and state"),
			"/mcp": map[string]any{"post": map[string]any{"summary": "JSON-RPC 2.0; the episodes' tools are served per session over /ws",
				"responses": map[string]any{"200": map[string]any{"description": "a JSON-RPC response"}}}},
		},
	}
}

// mcp answers JSON-RPC 2.0 without acting: an environment session's tools are its episode's, reached
// through /ws (a stateless call has no episode), and an MCP client drives one episode with `pyrualean mcp`.
func mcp(w http.ResponseWriter, r *http.Request) {
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	id := json.RawMessage("null")
	code, msg := -32700, "parse error: the body is not JSON"
	if err == nil && json.Unmarshal(body, &req) == nil {
		if len(req.ID) > 0 {
			id = req.ID
		}
		code, msg = -32600, `invalid request: want {"jsonrpc": "2.0", "method": ..., "id": ...}`
		if req.JSONRPC == "2.0" && req.Method != "" {
			code, msg = -32601, "method "+req.Method+" not found: this environment's tools belong to a session's episode; "+
				"open one over /ws (OpenEnv's EnvClient), or drive one episode over MCP with `pyrualean mcp`"
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Package scripted is a test fixture: local HTTP model servers that speak the APIs the agent CLIs call
// (the OpenAI Responses API with SSE for Codex, the Anthropic Messages API with SSE for Claude Code) and
// answer from a fixed script of tool calls and texts. The code under test stays the real CLI; only the
// model is scripted. Every request is recorded so tests can check what reached the model (tool results,
// images, errors).
package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Step is one scripted model reply.
type Step struct {
	Tool  string         // call this tool (bare name: "python", "finish"); matched against the request's tool list
	Args  map[string]any // its arguments
	Text  string         // a final text reply (when Tool is empty), or text sent before the tool call
	Usage Usage          // the usage reported for this reply (zero: defaults)
	Delay time.Duration  // wait this long before answering (a slow model)
	Fail  int            // answer with this HTTP status and an API error instead (a failing provider)
	Times int            // a Fail step answers this many requests (a CLI's own immediate retries; default 1)
}

// failMessage is the error message a Fail step sends.
const failMessage = "scripted provider failure"

// Usage is what the server reports for one reply.
type Usage struct {
	Input, Cached, CacheWrite, Output, Reasoning int
}

// DefaultUsage is reported when a step sets none.
var defaultUsage = Usage{Input: 1000, Cached: 200, Output: 50, Reasoning: 20}

// Request is one recorded model request.
type Request struct {
	Path      string
	Body      json.RawMessage
	Tools     []string     // tool names offered to the model
	Results   []ToolResult // tool results present in the request's input, in order
	Step      int          // the script index answered, or -1 for an unscripted request
	Scripted  bool
	UserAgent string
}

// ToolResult is one tool result found in a request (what the CLI forwarded from our MCP server).
type ToolResult struct {
	CallID  string
	Text    string
	Images  int
	IsError bool
}

// Server is a running scripted model server.
type Server struct {
	URL string // base URL, e.g. http://127.0.0.1:1234 (Codex wants URL+"/v1", Claude Code URL)

	ts     *httptest.Server
	mu     sync.Mutex
	steps  []Step
	next   int
	repeat int // requests answered by the current step so far
	reqs   []Request
	callID int
}

// Requests returns the recorded requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// ScriptedRequests returns only the requests answered from the script (the agent loop's turns).
func (s *Server) ScriptedRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Scripted {
			out = append(out, r)
		}
	}
	return out
}

// Close stops the server; in-flight (delayed) replies are abandoned.
func (s *Server) Close() { s.ts.CloseClientConnections(); s.ts.Close() }

// take returns the next scripted step, or ok=false once the script is used up.
func (s *Server) take(tools []string) (int, Step, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !offersOurTools(tools, s.steps) || s.next >= len(s.steps) {
		return -1, Step{}, false
	}
	i := s.next
	s.repeat++
	if st := s.steps[i]; st.Fail == 0 || s.repeat >= max(st.Times, 1) {
		s.next++
		s.repeat = 0
	}
	return i, s.steps[i], true
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
}

func (s *Server) newCallID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.callID++
	return fmt.Sprintf("%s%03d", prefix, s.callID)
}

// offersOurTools says whether a request is an agent-loop turn: one that offers a tool the script calls.
// CLIs also make side requests (titles, summaries, warm-ups) that must not consume the script.
func offersOurTools(tools []string, steps []Step) bool {
	for _, st := range steps {
		if st.Tool != "" && resolveTool(tools, st.Tool) != "" {
			return true
		}
	}
	return false
}

// resolveTool finds the client's name for a bare tool name: "python" may be offered as "python",
// "mcp__pyrualean__python" or "pyrualean__python".
func resolveTool(tools []string, bare string) string {
	for _, t := range tools {
		if t == bare || strings.HasSuffix(t, "__"+bare) || strings.HasSuffix(t, "."+bare) {
			return t
		}
	}
	return ""
}

func newServer(steps []Step, h func(s *Server) http.Handler) *Server {
	s := &Server{steps: steps}
	s.ts = httptest.NewServer(h(s))
	s.URL = s.ts.URL
	return s
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func mustJSON(v any) string {
	if v == nil {
		return "{}"
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (u Usage) orDefault() Usage {
	if u == (Usage{}) {
		return defaultUsage
	}
	return u
}

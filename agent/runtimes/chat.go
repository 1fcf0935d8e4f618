package runtimes

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"

	"github.com/pyrualean/pyrualean/agent"
)

// Chat is one model backend: given the conversation so far and the tools, it returns the model's
// next assistant message. It keeps no conversation state of its own (the loop owns the history), so
// one Chat may serve many episodes at once. Its errors are final unless wrapped by Retryable.
type Chat interface {
	Reply(ctx context.Context, req ChatRequest) (Reply, error)
}

// ChatRequest is one model call.
type ChatRequest struct {
	Messages []Message
	Tools    []agent.ToolSpec
	// Tokens asks for the reply's token ids and log-probabilities (Reply.Tokens), where the endpoint
	// gives them (--record-tokens).
	Tokens bool
	// Extra is merged into this request's body, after the backend's own extra body (an endpoint's
	// extensions, such as the embedded server's code_block_start); backends without a JSON body ignore it.
	Extra map[string]any
}

// Role is who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool" // a tool's result, answering one of the previous assistant message's calls
)

// Message is one entry of the backend-neutral conversation.
type Message struct {
	Role  Role
	Parts []Part // text and images in order (an assistant message: its text)
	// ToolCalls are an assistant message's calls; ToolCallID is the call a tool message answers.
	ToolCalls  []ToolCall
	ToolCallID string
	IsError    bool // a tool message whose call failed (refused, bad arguments)
	// Raw is an assistant message in its backend's own form (Reply.Raw), for backends that must send
	// a reply back as it came (Anthropic's thinking blocks and their signatures); others ignore it.
	Raw json.RawMessage
}

// Part is a piece of a message: text, or an image.
type Part struct {
	Text  string
	Image *agent.Image
	b64   *encoded // the image's base64, made once: the history is sent again on every call
}

type encoded struct {
	once sync.Once
	s    string
}

// imagePart is a part holding im.
func imagePart(im *agent.Image) Part { return Part{Image: im, b64: &encoded{}} }

// Base64 is the part's image in base64 (standard encoding), as both APIs send it.
func (p Part) Base64() string {
	if p.b64 == nil {
		return base64.StdEncoding.EncodeToString(p.Image.PNG)
	}
	p.b64.once.Do(func() { p.b64.s = base64.StdEncoding.EncodeToString(p.Image.PNG) })
	return p.b64.s
}

// Text is the message's text parts joined.
func (m Message) Text() string {
	s := ""
	for _, p := range m.Parts {
		if p.Image == nil {
			s += p.Text
		}
	}
	return s
}

// ToolCall is one call the model made.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text, as the model wrote it
}

// Reply is one assistant message and what the backend knows about the call that produced it.
type Reply struct {
	Text         string
	Reasoning    string // the model's reasoning text, where the endpoint returns it
	ToolCalls    []ToolCall
	FinishReason string
	Usage        agent.Usage // one call's tokens (Calls is set by the loop)
	// Attempts is how many HTTP attempts the call took (also set on an error).
	Attempts int
	Timings  *agent.ServerTimings // the server's own account of the reply (llama.cpp)
	// Effort is the reasoning effort the request asked for ("" : none sent).
	Effort string
	// Sampling is what the request's body asked of the sampler (nil: the backend sends none of its own).
	Sampling *agent.Sampling
	Tokens   *Tokens // token ids and log-probabilities, when asked for and given
	// Nudge, on a reply without tool calls, is what the model is told next instead of the loop's
	// generic nudge: why the reply was not a call (a Chat that reads calls out of the text sets it).
	Nudge string
	Raw   json.RawMessage // the reply in the backend's own form, kept in the history (Message.Raw)
}

// Tokens are one LLM call's token-level trajectory: the completion's tokens (and the prompt's, where
// the endpoint gives them), one line of tokens.jsonl. IDs are absent where the endpoint gives only
// token strings (OpenAI itself); logprobs are natural logarithms.
type Tokens struct {
	CompletionIDs      []int      `json:"completion_ids,omitempty"`
	Completion         []string   `json:"completion_tokens"`
	CompletionLogprobs []float64  `json:"completion_logprobs"`
	PromptIDs          []int      `json:"prompt_ids,omitempty"`
	Prompt             []string   `json:"prompt_tokens,omitempty"`
	PromptLogprobs     []*float64 `json:"prompt_logprobs,omitempty"` // null for a token without one (the first)
}

// retryable marks a provider or network failure.
type retryable struct{ error }

func (r retryable) Unwrap() error { return r.error }

// Retryable marks err as a failure of the provider or the network (an HTTP error status, a reset, an
// empty reply): the loop tries the call again while the model has made no tool call yet. Any other
// error a Chat returns ends the episode at once (the request itself is wrong: no retry will help).
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return retryable{err}
}

// IsRetryable says whether err was marked by Retryable.
func IsRetryable(err error) bool {
	var r retryable
	return errors.As(err, &r)
}

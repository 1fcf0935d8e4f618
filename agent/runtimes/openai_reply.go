package runtimes

import (
	"encoding/json"

	"github.com/pyrualean/pyrualean/agent"
)

// rawCompletion is the part of a chat completion response read from the raw bytes, because servers
// differ: vLLM/Ollama send `reasoning`, SGLang/llama.cpp `reasoning_content`; SGLang puts
// reasoning_tokens at the top of usage (go-openai drops it); llama.cpp adds timings.cache_n.
type rawCompletion struct {
	Choices []struct {
		Message struct {
			Reasoning        *string `json:"reasoning"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"message"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int  `json:"prompt_tokens"`
		CompletionTokens    int  `json:"completion_tokens"`
		ReasoningTokens     *int `json:"reasoning_tokens"`
		PromptTokensDetails *struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens *int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Timings *struct {
		CacheN *int `json:"cache_n"`
		agent.ServerTimings
	} `json:"timings"`
}

// parseRawCompletion extracts usage and reasoning text from a raw response body.
func parseRawCompletion(body []byte) (agent.Usage, string, *agent.ServerTimings) {
	var rc rawCompletion
	if err := json.Unmarshal(body, &rc); err != nil {
		return agent.Usage{}, "", nil
	}
	var timings *agent.ServerTimings
	if rc.Timings != nil {
		t := rc.Timings.ServerTimings
		if rc.Timings.CacheN != nil {
			t.CacheN = *rc.Timings.CacheN
		}
		timings = &t
	}
	u := agent.Usage{Calls: 1}
	if rc.Usage != nil {
		u.InputTokens = rc.Usage.PromptTokens
		u.OutputTokens = rc.Usage.CompletionTokens
		switch {
		case rc.Usage.PromptTokensDetails != nil && rc.Usage.PromptTokensDetails.CachedTokens != nil:
			u.CachedTokens = *rc.Usage.PromptTokensDetails.CachedTokens
		case rc.Timings != nil && rc.Timings.CacheN != nil:
			u.CachedTokens = *rc.Timings.CacheN
		}
		switch {
		case rc.Usage.CompletionTokensDetails != nil && rc.Usage.CompletionTokensDetails.ReasoningTokens != nil:
			u.ReasoningTokens = *rc.Usage.CompletionTokensDetails.ReasoningTokens
		case rc.Usage.ReasoningTokens != nil:
			u.ReasoningTokens = *rc.Usage.ReasoningTokens
		}
	}
	var reasoning string
	if len(rc.Choices) > 0 {
		m := rc.Choices[0].Message
		switch {
		case m.ReasoningContent != nil && *m.ReasoningContent != "":
			reasoning = *m.ReasoningContent
		case m.Reasoning != nil:
			reasoning = *m.Reasoning
		}
	}
	return u, reasoning, timings
}

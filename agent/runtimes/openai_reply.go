package runtimes

import (
	"encoding/json"
	"strconv"
	"strings"

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

// rawTokens is the token data of a chat completion, in each server's form: OpenAI's logprobs.content
// (token strings; llama.cpp adds each token's id, vLLM's return_tokens_as_token_ids writes the id as
// "token_id:N"), and vLLM's return_token_ids (choice token_ids, prompt_token_ids) and prompt_logprobs.
type rawTokens struct {
	PromptTokenIDs []int                    `json:"prompt_token_ids"`
	PromptLogprobs []map[string]vllmLogprob `json:"prompt_logprobs"`
	Choices        []struct {
		TokenIDs []int `json:"token_ids"`
		Logprobs *struct {
			Content []struct {
				ID      *int    `json:"id"`
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
			} `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
}

// vllmLogprob is one entry of vLLM's prompt_logprobs (keyed by token id).
type vllmLogprob struct {
	Logprob      float64 `json:"logprob"`
	DecodedToken string  `json:"decoded_token"`
}

// parseTokens reads the token data of a raw chat completion; nil when it holds none.
func parseTokens(body []byte) *Tokens {
	var rt rawTokens
	if json.Unmarshal(body, &rt) != nil || len(rt.Choices) == 0 {
		return nil
	}
	t := &Tokens{}
	ch := rt.Choices[0]
	if ch.Logprobs != nil {
		var ids []int
		for _, c := range ch.Logprobs.Content {
			t.Completion = append(t.Completion, c.Token)
			t.CompletionLogprobs = append(t.CompletionLogprobs, c.Logprob)
			if id, ok := tokenID(c.ID, c.Token); ok {
				ids = append(ids, id)
			}
		}
		if len(ids) == len(t.Completion) {
			t.CompletionIDs = ids
		}
	}
	if len(ch.TokenIDs) > 0 {
		t.CompletionIDs = ch.TokenIDs
	}
	t.PromptIDs = rt.PromptTokenIDs
	if len(rt.PromptLogprobs) == len(t.PromptIDs) {
		for i, id := range t.PromptIDs {
			e, ok := rt.PromptLogprobs[i][strconv.Itoa(id)]
			if !ok { // vLLM has none for the first token
				t.PromptLogprobs, t.Prompt = append(t.PromptLogprobs, nil), append(t.Prompt, "")
				continue
			}
			t.PromptLogprobs, t.Prompt = append(t.PromptLogprobs, &e.Logprob), append(t.Prompt, e.DecodedToken)
		}
	}
	if len(t.Completion) == 0 && len(t.CompletionIDs) == 0 && len(t.PromptIDs) == 0 {
		return nil
	}
	return t
}

// tokenID is a token's id: the server's field (llama.cpp), else the "token_id:N" form vLLM writes
// with return_tokens_as_token_ids.
func tokenID(field *int, token string) (int, bool) {
	if field != nil {
		return *field, true
	}
	if s, ok := strings.CutPrefix(token, "token_id:"); ok {
		if id, err := strconv.Atoi(s); err == nil {
			return id, true
		}
	}
	return 0, false
}

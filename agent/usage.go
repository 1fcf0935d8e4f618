package agent

// Usage is one LLM call's (or one episode's) token accounting. InputTokens includes cached tokens
// (the original's §5); ReasoningTokens are part of OutputTokens.
type Usage struct {
	Calls           int `json:"calls"`
	InputTokens     int `json:"input_tokens"`
	CachedTokens    int `json:"cached_input_tokens"`
	OutputTokens    int `json:"output_tokens"`
	ReasoningTokens int `json:"reasoning_output_tokens"`
}

// Add accumulates o into u.
func (u *Usage) Add(o Usage) {
	u.Calls += o.Calls
	u.InputTokens += o.InputTokens
	u.CachedTokens += o.CachedTokens
	u.OutputTokens += o.OutputTokens
	u.ReasoningTokens += o.ReasoningTokens
}

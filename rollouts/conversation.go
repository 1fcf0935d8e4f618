package rollouts

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pyrualean/pyrualean/agent"
)

// Conversation is a rollout's conversation, format-neutral: the prompt, then the policy's messages
// and the results of its calls, in order.
type Conversation struct {
	Prompt   Message
	Messages []Message
	Tools    []map[string]any // tools.json: the tools offered, OpenAI function tools
}

// Message is one message. Images are files of the run folder (relative paths).
type Message struct {
	Role      string // user | assistant | tool
	Text      string
	Reasoning string // an assistant's reasoning text, where the endpoint returned it
	Images    []Image
	Calls     []Call // an assistant's tool calls
	CallID    string // a tool message: the call it answers
	Tool      string // a tool message: the tool's name
	IsError   bool   // a tool message: the call was refused or failed
	Tokens    *TokenData
}

// Image is an image file of the run folder.
type Image struct {
	Name string
	File string // relative to the run folder
}

// Call is one tool call.
type Call struct {
	ID        string
	Name      string
	Arguments json.RawMessage // a JSON object, or a JSON string holding what the model wrote when it was not one
}

// readConversation rebuilds the conversation from the run folder: prompt.txt and the card's images
// (card.json), tools.json, turns.jsonl (each LLM call's reply text), exchanges.jsonl (each call and
// exactly what it returned) and tokens.jsonl (when recorded). A call is the reply of the LLM turn
// recorded last before it (Exchange.LLMTurn); calls before any LLM turn (an outside policy: replay,
// OpenEnv) are one assistant message each.
func readConversation(dir string) (*Conversation, error) {
	prompt, err := os.ReadFile(filepath.Join(dir, "prompt.txt"))
	if err != nil {
		return nil, err
	}
	c := &Conversation{Prompt: Message{Role: "user", Text: string(prompt), Images: cardImages(dir)}}
	if b, err := os.ReadFile(filepath.Join(dir, agent.ToolsFile)); err == nil {
		if err := json.Unmarshal(b, &c.Tools); err != nil {
			return nil, fmt.Errorf("%s: %w", agent.ToolsFile, err)
		}
	}
	xs, err := agent.ReadExchanges(filepath.Join(dir, agent.ExchangesFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	turns, err := agent.ReadTurns(filepath.Join(dir, "turns.jsonl"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	tokens, err := readTokens(filepath.Join(dir, TokensFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	byTurn := map[int][]agent.Exchange{}
	for _, x := range xs {
		byTurn[x.LLMTurn] = append(byTurn[x.LLMTurn], x)
	}
	for _, x := range byTurn[0] { // calls of a policy outside (no LLM turn recorded)
		c.add(Message{Role: "assistant"}, []agent.Exchange{x})
	}
	for i, t := range turns {
		calls := byTurn[i+1]
		if t.Error != "" && len(calls) == 0 && t.Content == "" {
			continue // a failed LLM call: no reply
		}
		m := Message{Role: "assistant", Text: t.Content, Reasoning: t.Reasoning}
		if tk, ok := tokens[t.Turn]; ok {
			m.Tokens = &tk
		}
		c.add(m, calls)
	}
	return c, nil
}

// add appends an assistant message with calls, then each call's result (its images in a user message
// after the results, as the runtimes send them by default).
func (c *Conversation) add(m Message, calls []agent.Exchange) {
	var images []Image
	for _, x := range calls {
		m.Calls = append(m.Calls, Call{ID: fmt.Sprintf("call_%d", x.N), Name: x.Tool, Arguments: x.Arguments})
	}
	c.Messages = append(c.Messages, m)
	for _, x := range calls {
		text := x.Text
		if x.Error != "" && text == "" {
			text = "error: " + x.Error
		}
		c.Messages = append(c.Messages, Message{Role: "tool", CallID: fmt.Sprintf("call_%d", x.N), Tool: x.Tool, Text: text, IsError: x.IsError || x.Error != ""})
		for _, im := range x.Images {
			if im.File != "" {
				images = append(images, Image{Name: im.Name, File: im.File})
			}
		}
	}
	if len(images) > 0 {
		names := make([]string, len(images))
		for i, im := range images {
			names[i] = im.Name
		}
		c.Messages = append(c.Messages, Message{Role: "user", Text: "Images from the tool results: " + strings.Join(names, ", "), Images: images})
	}
}

// cardImages are the task card's images the prompt carries (card.json's images, files under card/).
func cardImages(dir string) []Image {
	var res agent.Result
	if b, err := os.ReadFile(filepath.Join(dir, "result.json")); err == nil {
		_ = json.Unmarshal(b, &res)
	}
	var out []Image
	for _, name := range res.Prompt.Images {
		file := filepath.ToSlash(filepath.Join("card", filepath.Base(name)))
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			out = append(out, Image{Name: name, File: file})
		}
	}
	return out
}

// readTokens reads tokens.jsonl by LLM turn.
func readTokens(path string) (map[int]TokenData, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[int]TokenData{}
	for n, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var t TokenData
		if err := json.Unmarshal([]byte(line), &t); err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", path, n+1, err)
		}
		out[t.Turn] = t
	}
	return out, nil
}

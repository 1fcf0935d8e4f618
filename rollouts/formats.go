package rollouts

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pyrualean/pyrualean/atomicfile"
)

// Formats of the export, each the input of a training library (README "Training" names versions):
//
//	chat       OpenAI chat-completions messages (tool_calls with JSON-text arguments, role "tool"
//	           results, images as image_url parts): any chat/SFT pipeline; loads with `datasets`.
//	trl        TRL's conversational prompt-completion rows ("prompt", "completion", "tools",
//	           "images"; tool-call arguments as objects, images as {"type": "image"} placeholders
//	           with an "images" column of files, as transformers' chat templates and TRL take them).
//	verifiers  verifiers' saved rollouts (traces.jsonl: one Episode per line with its Trace of
//	           MessageNodes, the group, rewards; token ids, logprobs and advantages on sampled nodes).
var Formats = []string{"chat", "trl", "verifiers"}

// Options are an export's.
type Options struct {
	Format string
	Out    string // the JSONL file; images go to <Out without .jsonl>.images/<rollout>/
}

// Export writes one record per rollout with a conversation to o.Out (atomically) and copies the images
// the records name. It returns how many records it wrote.
func Export(rs []Rollout, o Options) (int, error) {
	if !slices.Contains(Formats, o.Format) {
		return 0, fmt.Errorf("format %q: want one of %s", o.Format, strings.Join(Formats, ", "))
	}
	imgDir := strings.TrimSuffix(o.Out, filepath.Ext(o.Out)) + ".images"
	var b strings.Builder
	w := bufio.NewWriter(&b)
	n := 0
	textOnly := true // trl: one content form for the whole file (datasets wants one type per column)
	for _, r := range rs {
		if r.Conv != nil && r.Conv.hasImages() {
			textOnly = false
		}
	}
	for i, r := range rs {
		if r.Conv == nil {
			continue
		}
		id := fmt.Sprintf("%04d_%s", i, safe(filepath.Base(r.Dir)))
		ex := exporter{r: r, id: id, imgRel: filepath.ToSlash(filepath.Join(filepath.Base(imgDir), id)), imgDir: filepath.Join(imgDir, id)}
		var rec any
		var err error
		switch o.Format {
		case "chat":
			rec, err = ex.chat()
		case "trl":
			rec, err = ex.trl(textOnly)
		case "verifiers":
			rec, err = ex.verifiers()
		}
		if err != nil {
			return n, fmt.Errorf("%s: %w", r.Dir, err)
		}
		if err := writeLine(w, rec); err != nil {
			return n, err
		}
		n++
	}
	if err := w.Flush(); err != nil {
		return n, err
	}
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return n, err
	}
	return n, atomicfile.Write(o.Out, []byte(b.String()))
}

func writeLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// exporter makes one rollout's record and copies its images.
type exporter struct {
	r      Rollout
	id     string
	imgRel string // the images' folder as the records name it (relative to the JSONL's folder)
	imgDir string
}

// image copies a run-folder image to the export and returns the path the record names.
func (ex exporter) image(im Image) (string, error) {
	src := filepath.Join(ex.r.Dir, filepath.FromSlash(im.File))
	name := safe(strings.ReplaceAll(im.File, "/", "_"))
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(ex.imgDir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(ex.imgDir, name), b, 0o644); err != nil {
		return "", err
	}
	return ex.imgRel + "/" + name, nil
}

// meta is what every format's record carries about the rollout.
func (ex exporter) meta() map[string]any {
	r := ex.r
	m := map[string]any{
		"id": ex.id, "run_dir": r.Dir, "group": r.Group, "reward": r.Reward, "reward_parts": r.Parts, "advantage": r.Advantage,
		"success": r.Reward == 1, "status": r.Row.Status, "robot": r.Row.Robot, "task": r.Row.Task, "seed": r.Row.Seed,
		"arm": r.Row.Arm, "model": r.Row.Model, "runtime": r.Result.Runtime, "sample": nil, "sampling_seed": nil,
	}
	if s := r.Sample(); s != nil {
		m["sample"], m["sampling_seed"] = s.Index, s.Seed
	}
	return m
}

// tokens lists the recorded token data of the assistant messages (index into the record's messages).
func tokensOf(msgs []Message, offset int) []map[string]any {
	var out []map[string]any
	for i, m := range msgs {
		if m.Tokens == nil {
			continue
		}
		t := m.Tokens
		out = append(out, map[string]any{"message_index": i + offset, "turn": t.Turn, "completion_ids": t.CompletionIDs,
			"completion_tokens": t.Completion, "completion_logprobs": t.CompletionLogprobs, "prompt_ids": t.PromptIDs,
			"prompt_logprobs": t.PromptLogprobs})
	}
	return out
}

// chat is the OpenAI chat-completions form: messages as a chat endpoint takes them.
func (ex exporter) chat() (map[string]any, error) {
	c := ex.r.Conv
	msgs := []map[string]any{}
	all := append([]Message{c.Prompt}, c.Messages...)
	for _, m := range all {
		om := map[string]any{"role": m.Role}
		switch {
		case len(m.Images) > 0:
			parts := []map[string]any{{"type": "text", "text": m.Text}}
			for _, im := range m.Images {
				p, err := ex.image(im)
				if err != nil {
					return nil, err
				}
				parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": p}})
			}
			om["content"] = parts
		default:
			om["content"] = m.Text
		}
		if m.Reasoning != "" {
			om["reasoning_content"] = m.Reasoning
		}
		if len(m.Calls) > 0 {
			var calls []map[string]any
			for _, cl := range m.Calls {
				calls = append(calls, map[string]any{"id": cl.ID, "type": "function",
					"function": map[string]any{"name": cl.Name, "arguments": argumentsText(cl.Arguments)}})
			}
			om["tool_calls"] = calls
		}
		if m.Role == "tool" {
			om["tool_call_id"], om["name"] = m.CallID, m.Tool
		}
		msgs = append(msgs, om)
	}
	rec := ex.meta()
	rec["messages"], rec["tools"] = msgs, c.Tools
	if t := tokensOf(all, 0); t != nil {
		rec["tokens"] = t
	}
	return rec, nil
}

// trl is TRL's conversational prompt-completion row.
func (ex exporter) trl(textOnly bool) (map[string]any, error) {
	c := ex.r.Conv
	var images []string
	conv := func(ms []Message) ([]map[string]any, error) {
		var out []map[string]any
		for _, m := range ms {
			om := map[string]any{"role": m.Role}
			if textOnly {
				om["content"] = m.Text
			} else {
				parts := []map[string]any{}
				for _, im := range m.Images {
					p, err := ex.image(im)
					if err != nil {
						return nil, err
					}
					images = append(images, p)
					parts = append(parts, map[string]any{"type": "image", "text": nil})
				}
				om["content"] = append(parts, map[string]any{"type": "text", "text": m.Text})
			}
			if len(m.Calls) > 0 {
				var calls []map[string]any
				for _, cl := range m.Calls {
					calls = append(calls, map[string]any{"type": "function",
						"function": map[string]any{"name": cl.Name, "arguments": argumentsObject(cl.Arguments)}})
				}
				om["tool_calls"] = calls
			}
			if m.Role == "tool" {
				om["name"] = m.Tool
			}
			out = append(out, om)
		}
		return out, nil
	}
	prompt, err := conv([]Message{c.Prompt})
	if err != nil {
		return nil, err
	}
	completion, err := conv(c.Messages)
	if err != nil {
		return nil, err
	}
	rec := ex.meta()
	rec["prompt"], rec["completion"], rec["tools"] = prompt, completion, c.Tools
	if !textOnly {
		rec["images"] = images
	}
	if t := tokensOf(c.Messages, 0); t != nil {
		rec["tokens"] = t // message_index: into completion
	}
	return rec, nil
}

// argumentsText is a call's arguments as the JSON text an OpenAI tool call carries.
func argumentsText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil { // kept as the text the model wrote (not a JSON object)
		return s
	}
	return string(raw)
}

// argumentsObject is a call's arguments as an object (chat templates render them); arguments that
// were not a JSON object are kept under "_raw".
func argumentsObject(raw json.RawMessage) map[string]any {
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil && m != nil {
		return m
	}
	return map[string]any{"_raw": argumentsText(raw)}
}

func (c *Conversation) hasImages() bool {
	if len(c.Prompt.Images) > 0 {
		return true
	}
	for _, m := range c.Messages {
		if len(m.Images) > 0 {
			return true
		}
	}
	return false
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}

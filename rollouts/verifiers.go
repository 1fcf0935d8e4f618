package rollouts

import (
	"time"

	"github.com/pyrualean/pyrualean/agent/runs"
)

// verifiers is one line of verifiers' traces.jsonl (verifiers 0.4.0, verifiers.v1.episode.Episode
// with one Trace): the conversation as a chain of MessageNodes (each node's parent the one before),
// the tools on the root node, the group, the reward as rewards["success"] and the advantage as a
// metric. An assistant node is "sampled" (the policy produced it); with token data recorded, its
// token_ids, mask and logprobs are the completion's and its advantages the rollout's advantage on
// every sampled token. Input nodes carry no token ids: the chat template's scaffold is the trainer's
// to render, so a node path is not a token prefix here, unlike a trace verifiers recorded itself.
func (ex exporter) verifiers() (map[string]any, error) {
	r, c := ex.r, ex.r.Conv
	now := float64(time.Now().Unix())
	taskData := map[string]any{"id": r.Group, "name": r.Row.Task, "robot": r.Row.Robot, "seed": r.Row.Seed, "arm": r.Row.Arm}
	task := map[string]any{"type": "PyrualeanEpisode", "data": taskData, "key": r.Group}
	var nodes []map[string]any
	all := append([]Message{c.Prompt}, c.Messages...)
	for i, m := range all {
		msg := map[string]any{"role": m.Role}
		content, err := ex.vfContent(m)
		if err != nil {
			return nil, err
		}
		switch m.Role {
		case "assistant":
			msg["content"] = m.Text
			if m.Reasoning != "" {
				msg["reasoning_content"] = m.Reasoning
			}
			if len(m.Calls) > 0 {
				var calls []map[string]any
				for _, cl := range m.Calls {
					calls = append(calls, map[string]any{"id": cl.ID, "type": "function", "name": cl.Name, "arguments": argumentsText(cl.Arguments)})
				}
				msg["tool_calls"] = calls
			}
		case "tool":
			msg["content"], msg["tool_call_id"], msg["name"] = content, m.CallID, m.Tool
		default:
			msg["content"] = content
		}
		node := map[string]any{"message": msg, "sampled": m.Role == "assistant", "timestamp": now}
		if i > 0 {
			node["parent"] = i - 1
		} else {
			node["tools"] = vfTools(c.Tools)
		}
		if t := m.Tokens; t != nil && len(t.CompletionIDs) == len(t.CompletionLogprobs) && len(t.CompletionIDs) > 0 {
			mask := make([]bool, len(t.CompletionIDs))
			adv := make([]float64, len(t.CompletionIDs))
			for k := range mask {
				mask[k], adv[k] = true, r.Advantage
			}
			node["token_ids"], node["mask"], node["logprobs"], node["advantages"] = t.CompletionIDs, mask, t.CompletionLogprobs, adv
		}
		nodes = append(nodes, node)
	}
	ok := runs.Infra(r.Row) == "" // the episode ran to its end (an infrastructure failure is not ok)
	trace := map[string]any{
		"id": ex.id, "task": task,
		"agent": map[string]any{"config": map[string]any{"model": r.Row.Model}, "name": "agent"},
		"tools": vfTools(c.Tools), "nodes": nodes,
		"rewards":      map[string]any{"success": map[string]any{"score": r.Reward}},
		"metrics":      map[string]any{"advantage": r.Advantage},
		"info":         ex.meta(),
		"is_completed": true, "ok": ok, "stop_condition": r.Row.Status,
	}
	return map[string]any{
		"id": ex.id, "env": map[string]any{"id": "pyrualean", "name": r.Row.Robot}, "task": task,
		"group": map[string]any{"id": r.Group}, "ok": ok, "traces": []any{trace},
	}, nil
}

// vfContent is a message's content: its text, or text and image_url parts (files) when it has images.
func (ex exporter) vfContent(m Message) (any, error) {
	if len(m.Images) == 0 {
		return m.Text, nil
	}
	parts := []map[string]any{{"type": "text", "text": m.Text}}
	for _, im := range m.Images {
		p, err := ex.image(im)
		if err != nil {
			return nil, err
		}
		parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": p}})
	}
	return parts, nil
}

// vfTools are OpenAI function tools in verifiers' flat Tool form.
func vfTools(tools []map[string]any) []map[string]any {
	out := []map[string]any{}
	for _, t := range tools {
		fn, _ := t["function"].(map[string]any)
		if fn == nil {
			continue
		}
		out = append(out, map[string]any{"type": "function", "name": fn["name"], "description": fn["description"], "parameters": fn["parameters"]})
	}
	return out
}

package runtimes

import (
	"fmt"
	"strings"

	"github.com/pyrualean/pyrualean/agent"
)

// The loop's messages, whatever the backend: what the model reads, and where images go.

// textParts is text as message parts ("" : none).
func textParts(s string) []Part {
	if s == "" {
		return nil
	}
	return []Part{{Text: s}}
}

func imageParts(images []agent.Image) []Part {
	parts := make([]Part, 0, len(images))
	for i := range images {
		parts = append(parts, imagePart(&images[i]))
	}
	return parts
}

// notShown is the note that stands for images a text-only model cannot take.
func notShown(n int, what string) string {
	return fmt.Sprintf("[%d %s not shown: this model takes no images]", n, what)
}

// firstUserMessage holds the prompt text and the task card's images.
func firstUserMessage(p agent.Prompt, textOnly bool) Message {
	if textOnly && len(p.Images) > 0 {
		p.Text += "\n" + notShown(len(p.Images), "task card image(s)") + "\n"
		p.Images = nil
	}
	parts := textParts(p.Text)
	for i, im := range p.Images {
		parts = append(parts, Part{Text: "Task card image: " + im.Name}, imagePart(&p.Images[i]))
	}
	return Message{Role: RoleUser, Parts: parts}
}

// humanMessage tells the model what people did in its kernel, with their fresh camera images.
func humanMessage(u agent.PeopleUpdate, textOnly bool) Message {
	if len(u.Images) > 0 && textOnly {
		return Message{Role: RoleUser, Parts: textParts(u.Text + "\n" + notShown(len(u.Images), "image(s)"))}
	}
	return Message{Role: RoleUser, Parts: append([]Part{{Text: u.Text}}, imageParts(u.Images)...)}
}

// toolMessage is a tool result for the call id, and the parts to show in a user message after all
// of the reply's tool results (its images, unless they go inside the tool message).
func toolMessage(id string, res agent.ToolResult, cfg LoopConfig) (Message, []Part) {
	text := res.Text
	if text == "" {
		text = "(no output)"
	}
	m := Message{Role: RoleTool, ToolCallID: id, IsError: res.IsError, Parts: textParts(text)}
	switch {
	case len(res.Images) == 0:
		return m, nil
	case cfg.TextOnly:
		m.Parts = textParts(text + "\n" + notShown(len(res.Images), "image(s)"))
		return m, nil
	case cfg.ImagesInToolMessages:
		m.Parts = append(m.Parts, imageParts(res.Images)...)
		return m, nil
	}
	names := make([]string, len(res.Images))
	for i, im := range res.Images {
		names[i] = im.Name
	}
	m.Parts = textParts(text + fmt.Sprintf("\n[%d image(s) attached below: %s]", len(res.Images), strings.Join(names, ", ")))
	follow := append([]Part{{Text: fmt.Sprintf("Images from call %s: %s", id, strings.Join(names, ", "))}}, imageParts(res.Images)...)
	return m, follow
}

const droppedImageNote = "[older image removed to save context]"

// dropOldImages replaces all but the newest keep images of the history with a short text note (one
// note for a run of dropped images).
func dropOldImages(msgs []Message, keep int) {
	seen := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		parts := msgs[i].Parts
		for j := len(parts) - 1; j >= 0; j-- {
			if parts[j].Image == nil {
				continue
			}
			seen++
			if seen <= keep {
				continue
			}
			if j == len(parts)-1 || parts[j+1].Text != droppedImageNote {
				parts[j] = Part{Text: droppedImageNote}
			} else {
				parts = append(parts[:j], parts[j+1:]...)
			}
		}
		msgs[i].Parts = parts
	}
}

func countImages(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Image != nil {
				n++
			}
		}
	}
	return n
}

// requestChars is the size of a request in characters (text, call arguments, tool specs), from
// which the local runtime sets the reply's deadline.
func requestChars(msgs []Message, tools []agent.ToolSpec) int {
	n := 0
	for _, m := range msgs {
		for _, p := range m.Parts {
			n += len(p.Text)
		}
		for _, tc := range m.ToolCalls {
			n += len(tc.Arguments)
		}
	}
	for _, t := range tools {
		n += len(t.Description) + len(t.Parameters)
	}
	return n
}

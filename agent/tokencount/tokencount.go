// Package tokencount counts tokens with a real BPE tokenizer (OpenAI's o200k_base or cl100k_base),
// embedded in the binary: nothing is downloaded at run time.
package tokencount

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"strings"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// Encodings this package embeds.
const (
	O200k  = "o200k_base"
	CL100k = "cl100k_base"
)

// Counter counts text tokens with BPE and image tokens with OpenAI's published high-detail formula.
type Counter struct {
	name string
	enc  *tiktoken.Tiktoken
}

// New loads an embedded encoding (O200k or CL100k).
func New(encoding string) (*Counter, error) {
	if encoding != O200k && encoding != CL100k {
		return nil, fmt.Errorf("tokencount: encoding %q (want %s or %s)", encoding, O200k, CL100k)
	}
	// The offline loader reads the BPE ranks embedded in tiktoken-go-loader instead of fetching them.
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	enc, err := tiktoken.GetEncoding(encoding)
	if err != nil {
		return nil, fmt.Errorf("tokencount: %w", err)
	}
	return &Counter{name: encoding, enc: enc}, nil
}

// Name is the encoding's name.
func (c *Counter) Name() string { return c.name }

// Count returns the number of BPE tokens in text (special-token strings count as ordinary text).
func (c *Counter) Count(text string) int { return len(c.enc.EncodeOrdinary(text)) }

// CountImage returns an image's input tokens (high detail: 85 + 170 per 512-pixel tile).
func (c *Counter) CountImage(png []byte) int { return ImageTokens(png) }

// ImageTokens is OpenAI's published cost of one high-detail image: fit in 2048x2048, scale the
// shortest side to 768, then 170 tokens per 512-pixel tile plus 85.
func ImageTokens(pngBytes []byte) int {
	cfg, err := png.DecodeConfig(bytes.NewReader(pngBytes))
	if err != nil {
		return 85
	}
	w, h := float64(cfg.Width), float64(cfg.Height)
	if m := max(w, h); m > 2048 {
		w, h = w*2048/m, h*2048/m
	}
	if m := min(w, h); m > 768 {
		w, h = w*768/m, h*768/m
	}
	tiles := int((w+511)/512) * int((h+511)/512)
	return 85 + 170*tiles
}

// TextImageCounter counts text and image tokens (*Counter is one).
type TextImageCounter interface {
	Count(text string) int
	CountImage(pngBytes []byte) int
}

// ChatRequest counts a chat completions request's input tokens as a server would bill them: every
// message (text parts and images, plus 4 tokens of framing each) and the tool schemas. Cached tokens
// model a prefix cache: the messages identical to the start of prev, the previous request's messages
// as returned in cur.
func ChatRequest(c TextImageCounter, body map[string]any, prev []string) (total, cached int, cur []string) {
	msgs, _ := body["messages"].([]any)
	prefix := true
	for i, m := range msgs {
		mm, _ := m.(map[string]any)
		b, _ := json.Marshal(mm)
		cur = append(cur, string(b))
		t := 4 + messageTokens(c, mm)
		if prefix && i < len(prev) && prev[i] == string(b) {
			cached += t
		} else {
			prefix = false
		}
		total += t
	}
	if tools, ok := body["tools"]; ok {
		b, _ := json.Marshal(tools)
		tt := c.Count(string(b))
		total += tt
		if len(prev) > 0 && cached > 0 {
			cached += tt // tools precede messages in the rendered prompt
		}
	}
	return total, cached, cur
}

func messageTokens(c TextImageCounter, m map[string]any) int {
	n := 0
	switch content := m["content"].(type) {
	case string:
		n += c.Count(content)
	case []any:
		for _, p := range content {
			pm, _ := p.(map[string]any)
			switch pm["type"] {
			case "text":
				t, _ := pm["text"].(string)
				n += c.Count(t)
			case "image_url":
				iu, _ := pm["image_url"].(map[string]any)
				u, _ := iu["url"].(string)
				if _, data, ok := strings.Cut(u, ";base64,"); ok {
					if b, err := base64.StdEncoding.DecodeString(data); err == nil {
						n += c.CountImage(b)
					}
				}
			}
		}
	}
	if tcs, ok := m["tool_calls"].([]any); ok {
		b, _ := json.Marshal(tcs)
		n += c.Count(string(b))
	}
	return n
}

package agent

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
)

// Card is the episode card the robot reports (episode_card()): what the model is told about the task.
type Card struct {
	Robot          string            `json:"robot"`
	Suite          string            `json:"suite"`
	Task           string            `json:"task"`
	Seed           int               `json:"seed"`
	TaskLanguage   string            `json:"task_language"`
	ObjectNames    []string          `json:"object_names"`
	EEFPos         []float64         `json:"eef_pos"`
	EEFQuat        []float64         `json:"eef_quat"`
	GripperOpening *float64          `json:"gripper_opening"`
	MaxEnvSteps    int               `json:"max_env_steps"`
	RawFacts       json.RawMessage   `json:"facts"`
	Knowledge      string            `json:"knowledge"`
	Images         map[string]string `json:"images"` // name -> base64 PNG
	Facts          []string          `json:"-"`
}

// parseCard decodes episode_card()'s JSON; facts may be a list or an object.
func parseCard(b []byte) (Card, error) {
	var c Card
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("episode card: %w", err)
	}
	var list []any
	var obj map[string]any
	switch {
	case len(c.RawFacts) == 0:
	case json.Unmarshal(c.RawFacts, &list) == nil:
		for _, f := range list {
			c.Facts = append(c.Facts, fmt.Sprint(f))
		}
	case json.Unmarshal(c.RawFacts, &obj) == nil:
		for _, k := range sortedKeys(obj) {
			c.Facts = append(c.Facts, fmt.Sprintf("%s: %v", k, obj[k]))
		}
	}
	return c, nil
}

// images decodes the card's images, in name order.
func (c Card) images() ([]Image, error) {
	var out []Image
	for _, n := range sortedKeys(c.Images) {
		b, err := base64.StdEncoding.DecodeString(c.Images[n])
		if err != nil {
			return nil, fmt.Errorf("card image %s: %w", n, err)
		}
		name := n
		if len(name) < 4 || name[len(name)-4:] != ".png" {
			name += ".png"
		}
		out = append(out, Image{Name: name, PNG: b})
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

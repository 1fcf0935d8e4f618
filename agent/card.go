package agent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"sort"
	"strings"

	"github.com/pyrualean/pyrualean/pylit"
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
	Cameras        []string          `json:"cameras"`          // what robo.show() takes
	MotionCameras  []string          `json:"on_motion_images"` // attached after a motion
	RawFacts       json.RawMessage   `json:"facts"`
	Knowledge      string            `json:"knowledge"`
	Images         map[string]string `json:"images"` // name -> base64 PNG
	Facts          []string          `json:"-"`
	Perception     string            `json:"-"` // facts' "perception" (LIBERO: "sam3" or "simulator-masks")
}

// parseCard decodes episode_card()'s JSON; facts may be a list or an object.
func parseCard(b []byte) (Card, error) {
	var c Card
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("episode card: %w", err)
	}
	// Facts keep the robot's order (the original renders them as "- key: value" in dict order).
	if len(c.RawFacts) > 0 {
		v, err := decodeOrdered(c.RawFacts)
		if err != nil {
			return c, fmt.Errorf("episode card facts: %w", err)
		}
		switch t := v.(type) {
		case []any:
			for _, f := range t {
				c.Facts = append(c.Facts, pylit.Text(f))
			}
		case *jsonObject:
			for i, k := range t.keys {
				c.Facts = append(c.Facts, fmt.Sprintf("%s: %s", k, pylit.Text(t.vals[i])))
				if p, ok := t.vals[i].(string); ok && k == "perception" {
					c.Perception = p
				}
			}
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

// pngName is the file name an image is attached under.
func pngName(name string) string {
	if strings.HasSuffix(name, ".png") {
		return name
	}
	return name + ".png"
}

// cameraOf maps a card image name (agentview_high, wrist.png) to its camera.
func cameraOf(name string) string {
	name = strings.TrimSuffix(name, ".png")
	for _, suffix := range []string{"_high", "_low"} {
		name = strings.TrimSuffix(name, suffix)
	}
	return name
}

// pngSize reads the width and height of a base64 PNG without decoding its pixels.
func pngSize(b64 string) (w, h int, ok bool) {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return 0, 0, false
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}

package openenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/spec"
)

// Runtime is the runtime name an OpenEnv session's result.json records: the policy acts from outside,
// through this server.
const Runtime = "openenv"

// DefaultSettings are the settings a client may give at reset unless the server says otherwise:
// which episode (robot, suite, task, seed, arm), what the policy sees (images, feedback, prompt
// profile, primitives, guides), its budgets within the server's caps, and the model's name for the
// record. Sealing, the run folder and robot options (endpoints reach the network) stay the server's.
var DefaultSettings = []string{"robot", "suite", "task", "seed", "arm", "images", "feedback", "prompt-profile", "primitives",
	"guides", "max-turns", "budget-s", "cell-timeout-s", "max-programs", "program-timeout-s", "max-episode-steps", "model"}

// Limits are what a client may choose: the settings it may give and the caps on its budgets. A cap
// also replaces "no limit" (0): a client's episode is always bounded by the server.
type Limits struct {
	Settings        []string // names as in spec.Settings; nil: DefaultSettings
	MaxTurns        int      // the most calls an episode may allow; 0: no cap
	MaxBudgetS      float64  // the most wall-clock seconds of policy time; 0: no cap
	MaxCellTimeoutS float64  // the longest one cell may run; 0: no cap
	// MaxSteps bounds an episode's steps, refused calls included (they do not count against
	// max_turns, so a policy that only makes bad calls would otherwise go on until its budget); the
	// episode ends at the limit as a model that stopped calling tools does in play; 0: no limit.
	MaxSteps int
}

// resetKeys are reset data keys that are not settings: OpenEnv's own episode_id names the run folder.
const keyEpisodeID = "episode_id"

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.=+-]{0,99}$`)

// episodeSpec builds the spec of a reset: the server's base spec, the client's settings through
// spec.Episode.Set (the one table of settings), then the caps. The run folder is named by the client's
// episode_id or by the time and the episode. Validate comes after (it asks the robot registry).
func (s *Server) episodeSpec(data json.RawMessage, seq int64) (spec.Episode, error) {
	ep := s.cfg.Base
	ep.RobotOptions = cloneMap(ep.RobotOptions)
	var kv map[string]json.RawMessage
	if len(bytes.TrimSpace(data)) > 0 && string(data) != "null" {
		if err := json.Unmarshal(data, &kv); err != nil {
			return ep, errFrame(CodeValidation, "reset data is not a JSON object: %v", err)
		}
	}
	allowed := s.cfg.Limits.Settings
	if allowed == nil {
		allowed = DefaultSettings
	}
	id := ""
	given := map[string]bool{}
	for _, k := range sortedKeys(kv) {
		v, isNull, err := settingValue(kv[k])
		if err != nil {
			return ep, errFrame(CodeValidation, "reset %s: %v", k, err)
		}
		if k == keyEpisodeID {
			if !isNull && !idRE.MatchString(v) {
				return ep, errFrame(CodeValidation, "reset episode_id %q: want 1-100 letters, digits and _.=+- (it names the run folder)", v)
			}
			id = v
			continue
		}
		name := strings.ReplaceAll(k, "_", "-")
		if !slices.Contains(allowed, name) {
			return ep, errFrame(CodeValidation, "reset %s: not a setting this server lets a client choose (allowed: episode_id, %s)",
				k, strings.ReplaceAll(strings.Join(allowed, ", "), "-", "_"))
		}
		if isNull {
			continue
		}
		if err := ep.Set(name, v); err != nil {
			return ep, errFrame(CodeValidation, "reset: %v", err)
		}
		given[name] = true
	}
	if err := s.capBudgets(&ep, given); err != nil {
		return ep, err
	}
	ep.Policy.Runtime = Runtime
	if id == "" {
		task := ep.Task
		if task == "" {
			task = "default"
		}
		id = fmt.Sprintf("%s-%s-%s-%d", time.Now().UTC().Format("20060102T150405"), safe(task), ep.Arm, seq)
	}
	ep.Out = filepath.Join(s.cfg.Out, id)
	if _, err := os.Lstat(ep.Out); err == nil {
		return ep, errFrame(CodeValidation, "reset episode_id %q: a run folder of that name exists (%s)", id, ep.Out)
	}
	return ep, nil
}

// capBudgets holds the budgets to the server's caps: "none" (0) becomes the cap, more is refused when
// the client asked for it and lowered to the cap when it is the server's own default.
func (s *Server) capBudgets(ep *spec.Episode, given map[string]bool) error {
	l := s.cfg.Limits
	turns, maxTurns := float64(ep.MaxCalls), float64(l.MaxTurns)
	for _, c := range []struct {
		name string
		v    *float64
		cap  float64
	}{
		{"budget-s", &ep.BudgetS, l.MaxBudgetS},
		{"cell-timeout-s", &ep.CellTimeoutS, l.MaxCellTimeoutS},
		{"max-turns", &turns, maxTurns},
	} {
		switch {
		case c.cap <= 0:
		case *c.v == 0 || (*c.v > c.cap && !given[c.name]):
			*c.v = c.cap
		case *c.v > c.cap:
			return errFrame(CodeValidation, "reset %s %g: this server allows at most %g", strings.ReplaceAll(c.name, "-", "_"), *c.v, c.cap)
		}
	}
	ep.MaxCalls = int(turns)
	return nil
}

// settingValue is a reset value as a setting's text: strings as they are, numbers as written, booleans
// as true/false; null leaves the setting as it is.
func settingValue(raw json.RawMessage) (v string, isNull bool, err error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", true, nil
	case raw[0] == '"':
		err = json.Unmarshal(raw, &v)
		return v, false, err
	case string(raw) == "true" || string(raw) == "false":
		return string(raw), false, nil
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		if _, err := strconv.ParseFloat(string(raw), 64); err != nil {
			return "", false, fmt.Errorf("not a number: %s", raw)
		}
		return string(raw), false, nil
	}
	return "", false, fmt.Errorf("want a string, number or boolean, not %s", trim(string(raw), 40))
}

var unsafeRE = regexp.MustCompile(`[^A-Za-z0-9_.+=-]+`)

func safe(s string) string {
	s = strings.Trim(unsafeRE.ReplaceAllString(s, "_"), "._")
	if len(s) > 60 {
		s = s[:60]
	}
	if s == "" {
		return "_"
	}
	return s
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

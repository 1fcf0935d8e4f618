package eval

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pyrualean/pyrualean/spec"
)

// Episode is one expanded cell of the matrix.
type Episode struct {
	ID       string            `json:"id"` // robot/suite/task/seed/arm/model/settings: also its folder under episodes/
	Row      int               `json:"row"`
	Robot    string            `json:"robot"`
	Suite    string            `json:"suite,omitempty"`
	Task     string            `json:"task"`
	Family   string            `json:"family,omitempty"`
	Seed     int               `json:"seed"`
	Arm      string            `json:"arm"`
	Runtime  string            `json:"runtime"`
	Model    string            `json:"model,omitempty"`
	Settings map[string]string `json:"settings,omitempty"`
	// RobotOptions are the row's robot options (--robot-opt); part of the id's settings tag.
	RobotOptions map[string]string `json:"robot_options,omitempty"`
	Solution     string            `json:"solution,omitempty"` // the task's reference solution (repo-relative)
	// Sample is the episode's index in its group of Samples rollouts of the same instance (eval
	// --samples K > 1; both 0 otherwise, and the id has no sample part, as before samples existed).
	Sample  int `json:"sample,omitempty"`
	Samples int `json:"samples,omitempty"`
	// Spec is the episode itself (built from the row by Expand): what an executor runs, with the run
	// folder and the replayed script's path set where it runs (Job.Dir, the node's repository).
	Spec spec.Episode `json:"spec"`
}

var unsafeRE = regexp.MustCompile(`[^A-Za-z0-9_.+=-]+`)

// slug makes one path segment out of s (model names hold slashes and colons).
func slug(s string) string {
	s = strings.Trim(unsafeRE.ReplaceAllString(s, "_"), "._")
	if s == "" {
		return "_"
	}
	return s
}

// SettingsTag names a settings map in an id: "default" when empty, else a short hash of the sorted
// name=value pairs, so the same settings always give the same folder.
func SettingsTag(settings map[string]string) string {
	if len(settings) == 0 {
		return "default"
	}
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		fmt.Fprintf(h, "%s=%s\n", k, settings[k])
	}
	return "s-" + hex.EncodeToString(h.Sum(nil))[:10]
}

func (e Episode) makeID() string {
	suite := e.Suite
	if suite == "" {
		suite = "default"
	}
	model := e.Runtime
	if e.Model != "" {
		model += "-" + e.Model
	}
	tagged := e.Settings
	if len(e.RobotOptions) > 0 {
		tagged = maps.Clone(e.Settings)
		if tagged == nil {
			tagged = map[string]string{}
		}
		for k, v := range e.RobotOptions {
			tagged["robot-opt:"+k] = v
		}
	}
	id := strings.Join([]string{slug(e.Robot), slug(suite), slug(e.Task), fmt.Sprint(e.Seed), e.Arm, slug(model), SettingsTag(tagged)}, "/")
	if e.Samples > 1 {
		id += "/" + SamplePrefix + strconv.Itoa(e.Sample)
	}
	return id
}

// SamplePrefix starts an id's last part when the episode is one of a group's samples: .../sample-3.
const SamplePrefix = "sample-"

// Instance is the id of the episode's group of samples: the id without the sample part (the group id
// of pyrualean rollouts export). An episode without samples is a group of one.
func (e Episode) Instance() string {
	if e.Samples > 1 {
		return e.ID[:strings.LastIndex(e.ID, "/")]
	}
	return e.ID
}

// SamplingSeed is the sampling seed of the episode's sample: distinct within its group, the same on
// every run of the suite (a resumed sample asks the endpoint for the same seed).
func (e Episode) SamplingSeed() int64 {
	h := fnv.New64a()
	h.Write([]byte(e.Instance()))
	return int64((h.Sum64()>>33)+uint64(e.Sample)) & (1<<31 - 1)
}

// Dir is the episode's run folder under the eval folder.
func (e Episode) Dir(suiteDir string) string {
	return filepath.Join(suiteDir, "episodes", filepath.FromSlash(e.ID))
}

// PairKey is what a cells episode and its tools twin share: the id without the arm.
func (e Episode) PairKey() string {
	parts := strings.Split(e.ID, "/")
	return strings.Join(append(parts[:4:4], parts[5:]...), "/")
}

// Twin is the id of the same episode in the other arm.
func (e Episode) Twin() string {
	other := "tools"
	if e.Arm == "tools" {
		other = "cells"
	}
	parts := strings.Split(e.ID, "/")
	parts[4] = other
	return strings.Join(parts, "/")
}

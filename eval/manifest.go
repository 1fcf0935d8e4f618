package eval

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/pyrualean/pyrualean/atomicfile"
)

// ManifestSchema is manifest.json's schema name.
const ManifestSchema = "pyrualean-suite-v1"

// Episode states in the manifest besides the agent's result statuses.
const (
	StatePending = "pending" // planned, never started
	StateRunning = "running" // started by a runner (which may since have died)
)

// Manifest is the eval folder's index: the matrix, the versions, and each episode's state. The run
// folders' result.json stay the truth about an episode; the manifest says what the runner did.
type Manifest struct {
	Schema    string                   `json:"schema"`
	Matrix    Matrix                   `json:"matrix"`
	Versions  map[string]string        `json:"versions"`
	CreatedAt string                   `json:"created_at"`
	UpdatedAt string                   `json:"updated_at"`
	Runner    RunnerInfo               `json:"runner"` // the last (or current) eval process
	Order     []string                 `json:"order"`  // episode ids in plan order
	Episodes  map[string]*EpisodeState `json:"episodes"`
}

// RunnerInfo identifies the eval process that writes the manifest.
type RunnerInfo struct {
	PID       int    `json:"pid"`
	Host      string `json:"host"`
	Jobs      int    `json:"jobs"`
	Engine    string `json:"engine"`
	StartedAt string `json:"started_at"`
	EndedAt   string `json:"ended_at,omitempty"`
}

// EpisodeState is one episode's line in the manifest.
type EpisodeState struct {
	Episode
	Dir        string  `json:"dir"` // relative to the eval folder
	Status     string  `json:"status"`
	Success    *bool   `json:"environment_success"`
	Attempts   int     `json:"attempts"` // over every run of the suite
	Error      string  `json:"error,omitempty"`
	StartedAt  string  `json:"started_at,omitempty"`
	FinishedAt string  `json:"finished_at,omitempty"`
	WallS      float64 `json:"wall_s,omitempty"`
	InTok      int     `json:"input_tokens,omitempty"`
	LLMCalls   int     `json:"llm_calls,omitempty"`
	CostUSD    float64 `json:"cost_usd,omitempty"`
	Node       string  `json:"node,omitempty"` // the Ray node id of the attempt that ran it (--engine ray)
}

// ManifestPath is where a eval folder keeps its manifest.
func ManifestPath(dir string) string { return filepath.Join(dir, "manifest.json") }

// ReadManifest reads a eval folder's manifest.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(ManifestPath(dir))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: corrupt: %w", ManifestPath(dir), err)
	}
	if m.Schema != ManifestSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", ManifestPath(dir), m.Schema, ManifestSchema)
	}
	if m.Episodes == nil {
		m.Episodes = map[string]*EpisodeState{}
	}
	return &m, nil
}

// manifestFile serialises writes of one manifest: each write replaces the file atomically (temp file,
// fsync, rename), so a kill -9 leaves either the old or the new manifest, never half of one.
type manifestFile struct {
	mu  sync.Mutex
	dir string
	m   *Manifest
}

func (f *manifestFile) update(change func(m *Manifest)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.m)
	f.m.UpdatedAt = time.Now().UTC().Format(time.RFC3339)
	b, err := json.MarshalIndent(f.m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(ManifestPath(f.dir), append(b, '\n'))
}

// snapshot returns a copy of one episode's state.
func (f *manifestFile) state(id string) EpisodeState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.m.Episodes[id]
}

// BuildVersions are this binary's versions, recorded in the manifest (each trace also records the
// kernel's): Go, the module's, and the commit it was built from.
func BuildVersions() map[string]string {
	v := map[string]string{"go": runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v["pyrualean"] = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				v[s.Key] = s.Value
			}
		}
	}
	return v
}

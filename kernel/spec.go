package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ErrNoSuchKernel is returned by FindSpec for a name no kernelspec directory has.
var ErrNoSuchKernel = errors.New("kernel: no such kernelspec")

// Spec is a kernelspec (kernel.json plus where it was found).
type Spec struct {
	Name          string
	ResourceDir   string
	DisplayName   string
	Language      string
	InterruptMode string // "signal" (default) or "message"
	Argv          []string
	Env           map[string]string
	Metadata      map[string]any
}

// SpecDirs lists the kernelspec directories in jupyter_client's order of precedence: $JUPYTER_PATH,
// the user data dir, the environment prefix, then the system dirs. The first directory holding a
// name wins.
func SpecDirs() []string {
	var dirs []string
	if jp := os.Getenv("JUPYTER_PATH"); jp != "" {
		for _, p := range filepath.SplitList(jp) {
			if p != "" {
				dirs = append(dirs, filepath.Join(p, "kernels"))
			}
		}
	}
	dirs = append(dirs, filepath.Join(userDataDir(), "kernels"))
	// jupyter_client uses sys.prefix of its own interpreter; a Go program's nearest equivalent is the
	// active virtualenv or conda env.
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := os.Getenv(env); p != "" {
			dirs = append(dirs, filepath.Join(p, "share", "jupyter", "kernels"))
		}
	}
	return append(dirs, "/usr/local/share/jupyter/kernels", "/usr/share/jupyter/kernels")
}

func userDataDir() string {
	if d := os.Getenv("JUPYTER_DATA_DIR"); d != "" {
		return d
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "jupyter")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "jupyter")
}

// FindSpecs returns every kernelspec found, sorted by name. Unreadable kernel.json files are skipped
// (as jupyter_client does) so one broken spec does not hide the others.
func FindSpecs() ([]Spec, error) {
	seen := map[string]bool{}
	var specs []Spec
	for _, dir := range SpecDirs() {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := strings.ToLower(e.Name())
			if seen[name] || !validSpecName(name) {
				continue
			}
			s, err := readSpec(filepath.Join(dir, e.Name()), name)
			if err != nil {
				continue
			}
			seen[name] = true
			specs = append(specs, s)
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs, nil
}

// FindSpec returns the kernelspec with that name (case-insensitive).
func FindSpec(name string) (Spec, error) {
	lname := strings.ToLower(name)
	for _, dir := range SpecDirs() {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if strings.ToLower(e.Name()) != lname {
				continue
			}
			return readSpec(filepath.Join(dir, e.Name()), lname)
		}
	}
	return Spec{}, fmt.Errorf("%w: %q (looked in %s)", ErrNoSuchKernel, name, strings.Join(SpecDirs(), ", "))
}

func validSpecName(n string) bool {
	if n == "" {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

func readSpec(dir, name string) (Spec, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
	if err != nil {
		return Spec{}, fmt.Errorf("kernel: read kernelspec %s: %w", name, err)
	}
	var raw struct {
		Argv          []string          `json:"argv"`
		DisplayName   string            `json:"display_name"`
		Language      string            `json:"language"`
		InterruptMode string            `json:"interrupt_mode"`
		Env           map[string]string `json:"env"`
		Metadata      map[string]any    `json:"metadata"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Spec{}, fmt.Errorf("kernel: parse %s: %w", filepath.Join(dir, "kernel.json"), err)
	}
	if len(raw.Argv) == 0 {
		return Spec{}, fmt.Errorf("kernel: kernelspec %s has an empty argv", name)
	}
	if raw.InterruptMode == "" {
		raw.InterruptMode = "signal"
	}
	return Spec{
		Name: name, ResourceDir: dir, DisplayName: raw.DisplayName, Language: raw.Language,
		InterruptMode: raw.InterruptMode, Argv: raw.Argv, Env: raw.Env, Metadata: raw.Metadata,
	}, nil
}

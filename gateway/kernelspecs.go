package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The kernelspecs resource: GET /api/kernelspecs, /api/kernelspecs/{name}, /kernelspecs/{name}/{file}.

func (s *Server) defaultSpec(specs []specInfo) string {
	names := map[string]bool{}
	for _, sp := range specs {
		names[sp.Name] = true
	}
	for _, n := range []string{s.cfg.DefaultKernel, "pyrualean", "python3"} {
		if n != "" && names[n] {
			return n
		}
	}
	if len(specs) > 0 {
		return specs[0].Name
	}
	return s.cfg.DefaultKernel
}

func (s *Server) specModel(sp specInfo) map[string]any {
	env := sp.Env
	if env == nil {
		env = map[string]string{}
	}
	meta := sp.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	interrupt := sp.InterruptMode
	if interrupt == "" {
		interrupt = "signal"
	}
	resources := map[string]string{}
	if entries, err := os.ReadDir(sp.ResourceDir); err == nil {
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || n == "kernel.json" {
				continue
			}
			key := strings.TrimSuffix(n, filepath.Ext(n))
			resources[key] = s.cfg.BaseURL + "kernelspecs/" + url.PathEscape(sp.Name) + "/" + url.PathEscape(n)
		}
	}
	return map[string]any{
		"name": sp.Name,
		"spec": map[string]any{"argv": sp.Argv, "env": env, "display_name": sp.DisplayName, "language": sp.Language,
			"interrupt_mode": interrupt, "metadata": meta},
		"resources": resources,
	}
}

// liveSpecs are the specs of live kernels (AddLiveKernel), each with its base spec's language,
// resources and argv (never run: starting one connects to the live kernel).
func (s *Server) liveSpecs(installed []specInfo) []specInfo {
	var out []specInfo
	for _, mk := range s.kernels.all() {
		if mk.live == nil {
			continue
		}
		sp := specInfo{Name: mk.live.Name, DisplayName: mk.live.DisplayName, Language: "python",
			Metadata: map[string]any{"pyrualean": map[string]any{"live_kernel_id": mk.id}}}
		for _, b := range installed {
			if b.Name == mk.live.Base {
				sp.ResourceDir, sp.Language, sp.Argv, sp.InterruptMode = b.ResourceDir, b.Language, b.Argv, b.InterruptMode
			}
		}
		if sp.DisplayName == "" {
			sp.DisplayName = mk.live.Name
		}
		out = append(out, sp)
	}
	return out
}

// findSpec finds an installed or live spec by name.
func (s *Server) findSpec(name string) (specInfo, error) {
	sp, err := s.findInstalledSpec(name)
	if err == nil || !errors.Is(err, ErrNoSuchSpec) {
		return sp, err
	}
	specs, _ := s.cfg.specs()
	for _, ls := range s.liveSpecs(specs) {
		if strings.EqualFold(ls.Name, name) {
			return ls, nil
		}
	}
	return specInfo{}, err
}

func (s *Server) findInstalledSpec(name string) (specInfo, error) {
	specs, err := s.cfg.specs()
	if err != nil {
		return specInfo{}, err
	}
	for _, sp := range specs {
		if strings.EqualFold(sp.Name, name) {
			return sp, nil
		}
	}
	return specInfo{}, fmt.Errorf("%w: %q", ErrNoSuchSpec, name)
}

func (s *Server) handleSpecs(w http.ResponseWriter, r *http.Request) {
	specs, err := s.cfg.specs()
	if err != nil {
		writeError(w, 500, "listing kernelspecs: "+err.Error())
		return
	}
	all := map[string]any{}
	for _, sp := range append(specs, s.liveSpecs(specs)...) {
		all[sp.Name] = s.specModel(sp)
	}
	writeJSON(w, 200, map[string]any{"default": s.defaultSpec(specs), "kernelspecs": all})
}

func (s *Server) handleSpec(w http.ResponseWriter, r *http.Request) {
	sp, err := s.findSpec(r.PathValue("name"))
	if err != nil {
		s.specError(w, err)
		return
	}
	writeJSON(w, 200, s.specModel(sp))
}

func (s *Server) specError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNoSuchSpec) {
		writeError(w, 404, "kernelspec not found: "+err.Error())
		return
	}
	writeError(w, 500, err.Error())
}

var resourceNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (s *Server) handleSpecFile(w http.ResponseWriter, r *http.Request) {
	sp, err := s.findSpec(r.PathValue("name"))
	if err != nil {
		s.specError(w, err)
		return
	}
	file := r.PathValue("file")
	if !resourceNameRE.MatchString(file) {
		writeError(w, 404, "no such kernelspec resource")
		return
	}
	f, err := os.Open(filepath.Join(sp.ResourceDir, file))
	if err != nil {
		writeError(w, 404, fmt.Sprintf("kernelspec %s has no resource %s", sp.Name, file))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		writeError(w, 404, fmt.Sprintf("kernelspec %s has no resource %s", sp.Name, file))
		return
	}
	http.ServeContent(w, r, file, st.ModTime(), f)
}

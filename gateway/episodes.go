package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
)

func isNoSuchSpec(err error) bool { return errors.Is(err, ErrNoSuchSpec) }

// AddEpisode lists a live episode under /api/episodes. kernelID, when given, is the id AddKernel
// returned for the episode's kernel; `pyrualean attach` reads it from the episode model.
func (s *Server) AddEpisode(ec EpisodeController, kernelID ...string) {
	e := &episodeEntry{ctl: ec}
	if len(kernelID) > 0 {
		e.kernelID = kernelID[0]
	}
	s.mu.Lock()
	s.episodes[ec.ID()] = e
	s.mu.Unlock()
}

// RemoveEpisode stops listing an episode.
func (s *Server) RemoveEpisode(id string) {
	s.mu.Lock()
	delete(s.episodes, id)
	s.mu.Unlock()
}

// episodeJSON is the controller's Status() as a JSON object, plus "id" and "kernel_id" (when the
// status does not set them). A non-object status lands under "status".
func (s *Server) episodeJSON(e *episodeEntry) map[string]any {
	out := map[string]any{}
	st := e.ctl.Status()
	if raw, err := json.Marshal(st); err == nil {
		if json.Unmarshal(raw, &out) != nil {
			out = map[string]any{"status": json.RawMessage(raw)}
		}
	} else {
		out["status_error"] = err.Error()
	}
	if _, ok := out["id"]; !ok {
		out["id"] = e.ctl.ID()
	}
	if _, ok := out["kernel_id"]; !ok && e.kernelID != "" {
		out["kernel_id"] = e.kernelID
	}
	return out
}

func (s *Server) episode(id string) *episodeEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.episodes[id]
}

func (s *Server) handleEpisodes(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	list := make([]*episodeEntry, 0, len(s.episodes))
	for _, e := range s.episodes {
		list = append(list, e)
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].ctl.ID() < list[j].ctl.ID() })
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		out = append(out, s.episodeJSON(e))
	}
	writeJSON(w, 200, out)
}

func (s *Server) handleEpisode(w http.ResponseWriter, r *http.Request) {
	e := s.episode(r.PathValue("id"))
	if e == nil {
		writeError(w, 404, fmt.Sprintf("no such episode: %s", r.PathValue("id")))
		return
	}
	writeJSON(w, 200, s.episodeJSON(e))
}

func (s *Server) handleEpisodeAction(w http.ResponseWriter, r *http.Request) {
	e := s.episode(r.PathValue("id"))
	if e == nil {
		writeError(w, 404, fmt.Sprintf("no such episode: %s", r.PathValue("id")))
		return
	}
	switch r.PathValue("action") {
	case "pause":
		e.ctl.Pause()
	case "resume":
		e.ctl.Resume()
	case "step":
		e.ctl.Step()
	default:
		writeError(w, 404, fmt.Sprintf("unknown episode action %q (pause, resume, step)", r.PathValue("action")))
		return
	}
	writeJSON(w, 200, s.episodeJSON(e))
}

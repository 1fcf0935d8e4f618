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
	e := &episodeEntry{ctl: ec, gone: make(chan struct{})}
	if len(kernelID) > 0 {
		e.kernelID = kernelID[0]
	}
	s.mu.Lock()
	old := s.episodes[ec.ID()]
	s.episodes[ec.ID()] = e
	s.mu.Unlock()
	if old != nil {
		close(old.gone)
	}
	if e.kernelID != "" {
		s.wg.Add(1)
		go s.followAgent(e) // its kernel shows busy while the agent thinks (agentbusy.go)
	}
}

// RemoveEpisode stops listing an episode.
func (s *Server) RemoveEpisode(id string) {
	s.mu.Lock()
	e := s.episodes[id]
	delete(s.episodes, id)
	s.mu.Unlock()
	if e != nil {
		close(e.gone)
	}
}

// episodeJSON is the controller's Status() as a JSON object, plus "id" and "kernel_id" (when the
// status does not set them), and what the gateway knows of the episode's kernel: "kernel_name" (its
// spec as listed), "agent_session" (the session id of the agent's own kernel client: cells whose
// parent carries it are the agent's) and "refusals" (what the gateway refused to do to it, for
// JupyterLab to show). A non-object status lands under "status".
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
	if mk, err := s.kernel(e.kernelID); err == nil {
		out["kernel_name"] = mk.name
		out["agent_session"] = mk.handle().Client().Session()
		out["refusals"] = mk.refusalList()
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
	var err error
	switch r.PathValue("action") {
	case "pause":
		err = e.ctl.Pause()
	case "resume":
		err = e.ctl.Resume()
	case "step":
		err = e.ctl.Step()
	case "discard":
		d, ok := e.ctl.(EpisodeDiscarder)
		if !ok {
			writeError(w, 404, fmt.Sprintf("episode %s cannot discard a held cell", e.ctl.ID()))
			return
		}
		err = d.Discard()
	default:
		writeError(w, 404, fmt.Sprintf("unknown episode action %q (pause, resume, step, discard)", r.PathValue("action")))
		return
	}
	if err != nil {
		writeError(w, http.StatusConflict, fmt.Sprintf("episode %s: %s refused: %v", e.ctl.ID(), r.PathValue("action"), err))
		return
	}
	writeJSON(w, 200, s.episodeJSON(e))
}

// handleEpisodeTrace serves the episode's trace notebook as it is now.
func (s *Server) handleEpisodeTrace(w http.ResponseWriter, r *http.Request) {
	e := s.episode(r.PathValue("id"))
	if e == nil {
		writeError(w, 404, fmt.Sprintf("no such episode: %s", r.PathValue("id")))
		return
	}
	tr, ok := e.ctl.(EpisodeTrace)
	if !ok {
		writeError(w, 404, fmt.Sprintf("episode %s does not serve its trace", e.ctl.ID()))
		return
	}
	b, err := tr.TraceJSON()
	if err != nil {
		writeError(w, 500, fmt.Sprintf("episode %s trace: %v", e.ctl.ID(), err))
		return
	}
	w.Header().Set("Content-Type", "application/x-ipynb+json")
	_, _ = w.Write(b)
}

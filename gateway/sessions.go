package gateway

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/google/uuid"
)

// sessionModel is a Jupyter session (path ↔ kernel), for clients that talk to the gateway directly.
// jupyter_server in gateway mode keeps its own sessions and never calls these.
type sessionModel struct {
	id, path, name, typ string
	kernelID            string
}

type sessionJSON struct {
	ID       string         `json:"id"`
	Path     string         `json:"path"`
	Name     string         `json:"name"`
	Type     string         `json:"type"`
	Kernel   *kernelModel   `json:"kernel"`
	Notebook map[string]any `json:"notebook"`
}

type sessionRequest struct {
	Path   string `json:"path"`
	Name   string `json:"name"`
	Type   string `json:"type"`
	Kernel *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"kernel"`
}

func (s *Server) sessionJSON(sm *sessionModel) sessionJSON {
	out := sessionJSON{ID: sm.id, Path: sm.path, Name: sm.name, Type: sm.typ,
		Notebook: map[string]any{"path": sm.path, "name": sm.name}}
	if mk, err := s.kernel(sm.kernelID); err == nil {
		m := mk.model()
		out.Kernel = &m
	}
	return out
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	list := make([]*sessionModel, 0, len(s.sessions))
	for _, sm := range s.sessions {
		list = append(list, sm)
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	out := make([]sessionJSON, 0, len(list))
	for _, sm := range list {
		out = append(out, s.sessionJSON(sm))
	}
	writeJSON(w, 200, out)
}

func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var req sessionRequest
	if err := decodeBody(r, &req); err != nil {
		writeBodyError(w, err)
		return
	}
	if req.Path == "" {
		writeError(w, 400, "session needs a path")
		return
	}
	if req.Type == "" {
		req.Type = "notebook"
	}
	s.mu.Lock()
	for _, sm := range s.sessions {
		if sm.path == req.Path {
			s.mu.Unlock()
			writeJSON(w, http.StatusCreated, s.sessionJSON(sm)) // same path → the existing session
			return
		}
	}
	s.mu.Unlock()
	var kernelID string
	switch {
	case req.Kernel != nil && req.Kernel.ID != "":
		if _, err := s.kernel(req.Kernel.ID); err != nil {
			s.kernelError(w, err)
			return
		}
		kernelID = req.Kernel.ID
	default:
		name := ""
		if req.Kernel != nil {
			name = req.Kernel.Name
		}
		mk, err := s.startKernel(r.Context(), name, nil, "")
		if err != nil {
			if isNoSuchSpec(err) {
				writeError(w, http.StatusNotImplemented, err.Error()) // jupyter_server answers 501 here
				return
			}
			s.kernelError(w, err)
			return
		}
		kernelID = mk.id
	}
	sm := &sessionModel{id: uuid.NewString(), path: req.Path, name: req.Name, typ: req.Type, kernelID: kernelID}
	s.mu.Lock()
	s.sessions[sm.id] = sm
	s.mu.Unlock()
	w.Header().Set("Location", s.cfg.BaseURL+"api/sessions/"+sm.id)
	writeJSON(w, http.StatusCreated, s.sessionJSON(sm))
}

// session finds the session named in the path, answering 404 itself when there is none.
func (s *Server) session(w http.ResponseWriter, r *http.Request) *sessionModel {
	id := r.PathValue("id")
	s.mu.Lock()
	sm := s.sessions[id]
	s.mu.Unlock()
	if sm == nil {
		writeError(w, 404, fmt.Sprintf("no such session: %s", id))
	}
	return sm
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request) {
	if sm := s.session(w, r); sm != nil {
		writeJSON(w, 200, s.sessionJSON(sm))
	}
}

func (s *Server) handlePatchSession(w http.ResponseWriter, r *http.Request) {
	sm := s.session(w, r)
	if sm == nil {
		return
	}
	var req sessionRequest
	if err := decodeBody(r, &req); err != nil {
		writeBodyError(w, err)
		return
	}
	if req.Kernel != nil && req.Kernel.ID != "" {
		if _, err := s.kernel(req.Kernel.ID); err != nil {
			s.kernelError(w, err)
			return
		}
	}
	s.mu.Lock()
	if req.Path != "" {
		sm.path = req.Path
	}
	if req.Name != "" {
		sm.name = req.Name
	}
	if req.Type != "" {
		sm.typ = req.Type
	}
	if req.Kernel != nil && req.Kernel.ID != "" {
		sm.kernelID = req.Kernel.ID
	}
	s.mu.Unlock()
	writeJSON(w, 200, s.sessionJSON(sm))
}

func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	sm := s.session(w, r)
	if sm == nil {
		return
	}
	s.mu.Lock()
	delete(s.sessions, sm.id)
	s.mu.Unlock()
	// Deleting a session shuts its kernel down, unless the kernel belongs to a live episode.
	if mk, err := s.kernel(sm.kernelID); err == nil && !mk.external {
		_ = s.ShutdownKernel(r.Context(), mk.id)
	}
	w.WriteHeader(http.StatusNoContent)
}

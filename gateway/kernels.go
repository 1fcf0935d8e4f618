package gateway

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
)

// The kernels resource: /api/kernels and /api/kernels/{id}[/interrupt|/restart|/channels], plus the
// Go API (StartKernel, ShutdownKernel, AddKernel, RemoveKernel) and idle culling. The set of kernels
// is the registry (registry.go); one served kernel is a managedKernel (managed.go).

type kernelModel struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	LastActivity   string `json:"last_activity"`
	ExecutionState string `json:"execution_state"`
	Connections    int    `json:"connections"`
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func (s *Server) kernel(id string) (*managedKernel, error) { return s.kernels.get(id) }

func (s *Server) listKernels() []kernelModel {
	ks := s.kernels.all()
	out := make([]kernelModel, 0, len(ks))
	for _, k := range ks {
		out = append(out, k.model())
	}
	return out
}

type startRequest struct {
	Name     string         `json:"name"`
	Env      map[string]any `json:"env"`
	KernelID string         `json:"kernel_id"`
	Path     string         `json:"path"`
}

func (s *Server) handleListKernels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, s.listKernels())
}

func (s *Server) handleStartKernel(w http.ResponseWriter, r *http.Request) {
	var req startRequest
	if err := decodeBody(r, &req); err != nil {
		writeBodyError(w, err)
		return
	}
	mk, err := s.startKernel(r.Context(), req.Name, req.Env, req.KernelID)
	if err != nil {
		s.kernelError(w, err)
		return
	}
	w.Header().Set("Location", s.cfg.BaseURL+"api/kernels/"+mk.id)
	writeJSON(w, http.StatusCreated, mk.model())
}

// StartKernel launches a kernel of the named spec (default spec when empty) with a filtered client
// environment, starts serving it and returns its id. kernelID, when set, must be an unused UUID
// (jupyter_server allows client-supplied ids).
func (s *Server) StartKernel(ctx context.Context, name string, reqEnv map[string]any, kernelID string) (string, error) {
	mk, err := s.startKernel(ctx, name, reqEnv, kernelID)
	if err != nil {
		return "", err
	}
	return mk.id, nil
}

func (s *Server) startKernel(ctx context.Context, name string, reqEnv map[string]any, kernelID string) (*managedKernel, error) {
	specs, err := s.cfg.specs()
	if err != nil {
		return nil, fmt.Errorf("listing kernelspecs: %w", err)
	}
	if name == "" {
		name = s.defaultSpec(specs)
	}
	if mk := s.liveKernel(name); mk != nil {
		// A live kernel's own spec: "starting" it connects to the live kernel (Lab's launcher tile).
		return mk, nil
	}
	var spec specInfo
	found := false
	for _, sp := range specs {
		if strings.EqualFold(sp.Name, name) {
			spec, found = sp, true
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrNoSuchSpec, name)
	}
	env, dropped, err := s.env.filter(reqEnv)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	if len(dropped) > 0 {
		s.log.Debug("ignoring environment names outside the allow-list", "names", dropped)
	}
	if kernelID != "" && !uuidRE.MatchString(kernelID) {
		return nil, fmt.Errorf("%w: kernel_id %q is not a UUID", errBadRequest, kernelID)
	}
	release, err := s.kernels.reserve(kernelID)
	if err != nil {
		return nil, err
	}
	defer release()
	s.mu.Lock()
	pool := s.pool
	s.mu.Unlock()

	dir := ""
	if d := env["KERNEL_WORKING_DIR"]; d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			dir = d
		}
	}
	var h Kernel
	if pool != nil && pool.spec == spec.Name && onlyInformational(env) && dir == "" {
		h = pool.take()
	}
	if h == nil {
		// Launch under the server's context so a client that hangs up does not orphan a half-started kernel.
		lctx, cancel := context.WithTimeout(s.ctx, 60*time.Second)
		h, err = s.cfg.launch(lctx, spec, env, dir)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("starting kernel %s: %w", spec.Name, err)
		}
	}
	if kernelID == "" {
		kernelID = uuid.NewString()
	}
	relaunch := func(ctx context.Context) (Kernel, error) { return s.cfg.launch(ctx, spec, env, dir) }
	return s.register(ctx, kernelID, spec.Name, h, relaunch), nil
}

// onlyInformational: the env carries nothing a pre-started kernel would lack (the gateway client always
// sends KERNEL_USERNAME and KERNEL_LAUNCH_TIMEOUT, which only inform launchers).
func onlyInformational(env map[string]string) bool {
	for k := range env {
		if k != "KERNEL_USERNAME" && k != "KERNEL_LAUNCH_TIMEOUT" {
			return false
		}
	}
	return true
}

// register serves h under id. relaunch (nil for an added kernel, which is not the gateway's) starts
// a replacement process when the kernel is dead.
func (s *Server) register(ctx context.Context, id, name string, h Kernel, relaunch func(context.Context) (Kernel, error)) *managedKernel {
	external := relaunch == nil
	mk := newManagedKernel(id, name, h, external, s.log, s.cfg.BacklogMessages, s.cfg.BacklogBytes)
	mk.relaunch, mk.autoRestart = relaunch, s.cfg.AutoRestart
	mk.start(ctx)
	s.kernels.add(mk)
	s.log.Info("kernel serving", "id", id, "name", name, "pid", h.Pid(), "external", external)
	return mk
}

func (s *Server) handleGetKernel(w http.ResponseWriter, r *http.Request) {
	mk, err := s.kernel(r.PathValue("id"))
	if err != nil {
		s.kernelError(w, err)
		return
	}
	writeJSON(w, 200, mk.model())
}

func (s *Server) handleDeleteKernel(w http.ResponseWriter, r *http.Request) {
	if err := s.ShutdownKernel(r.Context(), r.PathValue("id")); err != nil {
		s.kernelError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ShutdownKernel stops serving a kernel the gateway started and shuts its process down.
func (s *Server) ShutdownKernel(ctx context.Context, id string) error {
	mk, err := s.kernel(id)
	if err != nil {
		return err
	}
	if mk.external {
		// A person closing JupyterLab (or its server shutting down) must not kill an agent's kernel:
		// the request succeeds, the kernel stays (the episode removes it with RemoveKernel).
		_ = mk.refuse("shutdown", "it keeps running for the agent")
		return nil
	}
	s.kernels.remove(id)
	s.mu.Lock()
	for sid, sess := range s.sessions {
		if sess.kernelID == id {
			delete(s.sessions, sid)
		}
	}
	s.mu.Unlock()
	mk.close(websocket.CloseNormalClosure, "kernel shut down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := mk.handle().Shutdown(sctx); err != nil {
		s.log.Warn("kernel shutdown", "id", id, "err", err)
	}
	s.log.Info("kernel shut down", "id", id)
	return nil
}

func (s *Server) handleInterrupt(w http.ResponseWriter, r *http.Request) {
	mk, err := s.kernel(r.PathValue("id"))
	if err != nil {
		s.kernelError(w, err)
		return
	}
	if err := mk.handle().Interrupt(r.Context()); err != nil {
		writeError(w, 500, fmt.Sprintf("interrupting kernel %s: %v", mk.id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRestart(w http.ResponseWriter, r *http.Request) {
	mk, err := s.kernel(r.PathValue("id"))
	if err != nil {
		s.kernelError(w, err)
		return
	}
	if mk.external {
		s.kernelError(w, mk.refuse("restart", "restarting it would lose the robot"))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 60*time.Second)
	defer cancel()
	if err := mk.restart(ctx); err != nil {
		writeError(w, 500, err.Error())
		return
	}
	writeJSON(w, 200, mk.model())
}

// handleChannels upgrades to the kernel's WebSocket. Auth and origin are checked before the upgrade,
// so a refused client gets an HTTP error with a JSON body, not a dropped connection.
func (s *Server) handleChannels(w http.ResponseWriter, r *http.Request) {
	mk, err := s.kernel(r.PathValue("id"))
	if err != nil {
		s.kernelError(w, err)
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		writeError(w, 400, "this endpoint is a WebSocket: send an Upgrade request")
		return
	}
	if !s.originAllowed(r) {
		writeError(w, 403, fmt.Sprintf("origin %q not allowed (see --allow-origin)", r.Header.Get("Origin")))
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader already answered
	}
	session := r.URL.Query().Get("session_id")
	if session == "" {
		session = uuid.NewString() // no resume for anonymous clients
	}
	v1 := ws.Subprotocol() == ProtocolV1
	c := newWSConn(ws, session, v1, ackHold(r), s.cfg.SocketQueue, s.log.With("kernel", mk.id))
	go c.writeLoop()
	mk.attach(c)
	s.log.Info("websocket open", "kernel", mk.id, "session", session, "v1", v1, "ack_hold", ackHold(r))
	c.readLoop(mk, s.cfg.MaxMessageBytes)
	mk.detach(c)
	close(c.gone)
	<-c.writerDone // the writer has flushed what it could and said goodbye; only then is the connection closed
	c.ws.Close()
	s.log.Info("websocket closed", "kernel", mk.id, "session", session)
}

// AddKernel serves a kernel started elsewhere (a live episode's) under a fresh id. The gateway never
// restarts or shuts it down; the caller does (and calls RemoveKernel).
func (s *Server) AddKernel(k Kernel, name string) string {
	id := uuid.NewString()
	s.register(s.ctx, id, name, k, nil)
	return id
}

// LiveSpec is the kernelspec an added kernel is listed under: a name of its own, so JupyterLab lists
// it apart from the kernels its launcher starts (Running panel, "Connect to Existing Kernel"), and
// starting a kernel of that spec connects to the live kernel instead of launching one. Base is the
// installed spec whose language and logos it shares.
type LiveSpec struct {
	Name, DisplayName, Base string
}

var specNameRE = regexp.MustCompile(`^[a-z0-9._-]+$`)

// AddLiveKernel is AddKernel with a spec of the kernel's own (see LiveSpec); the name must be a valid
// kernelspec name (lowercase letters, digits, '.', '_', '-') that no installed spec has.
func (s *Server) AddLiveKernel(k Kernel, spec LiveSpec) (string, error) {
	if !specNameRE.MatchString(spec.Name) {
		return "", fmt.Errorf("live kernel spec name %q: want lowercase letters, digits, '.', '_' or '-'", spec.Name)
	}
	if _, err := s.findInstalledSpec(spec.Name); err == nil {
		return "", fmt.Errorf("live kernel spec name %q is an installed kernelspec's", spec.Name)
	}
	if s.liveKernel(spec.Name) != nil {
		return "", fmt.Errorf("%w: a live kernel is already listed as %q", errConflict, spec.Name)
	}
	id := uuid.NewString()
	mk := newManagedKernel(id, spec.Name, k, true, s.log, s.cfg.BacklogMessages, s.cfg.BacklogBytes)
	sp := spec
	mk.live = &sp
	mk.start(s.ctx)
	s.kernels.add(mk)
	s.log.Info("kernel serving", "id", id, "name", spec.Name, "pid", k.Pid(), "external", true)
	return id, nil
}

// liveKernel is the added kernel listed under spec name (nil: none).
func (s *Server) liveKernel(name string) *managedKernel {
	for _, mk := range s.kernels.all() {
		if mk.live != nil && strings.EqualFold(mk.live.Name, name) {
			return mk
		}
	}
	return nil
}

// RemoveKernel stops serving a kernel added with AddKernel (sockets are told it is dead).
func (s *Server) RemoveKernel(id string) {
	if mk := s.kernels.remove(id); mk != nil {
		mk.mu.Lock()
		mk.st.set(StateDead)
		mk.broadcastLocked(mk.syntheticStatusLocked(StateDead))
		mk.mu.Unlock()
		mk.close(websocket.CloseNormalClosure, "kernel removed")
	}
}

func (s *Server) cullLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.CullInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			for _, mk := range s.kernels.all() {
				idle, cullable := mk.idleFor(now)
				if cullable && idle > s.cfg.CullIdle {
					s.log.Info("culling idle kernel", "id", mk.id, "idle", idle.Round(time.Second))
					_ = s.ShutdownKernel(s.ctx, mk.id)
				}
			}
		}
	}
}

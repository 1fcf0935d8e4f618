// Package gateway serves running kernels over Jupyter Server's kernel HTTP + WebSocket API, so that
// `jupyter server|lab --gateway-url`, JupyterLab and raw clients attach to the kernels an agent drives.
// One kernel client per kernel is fanned out to every socket; replies go to the socket that asked,
// IOPub to all, and a bounded per-kernel backlog resends what a reconnecting session_id has not
// acknowledged.
//
// Files, by their jupyter_server counterpart:
//   - server.go: the ServerApp (Config, routes as method patterns, Host/auth/CORS, JSON errors, Serve).
//   - kernels.go, kernelspecs.go, sessions.go, episodes.go: one file per REST resource (handlers).
//   - registry.go: MultiKernelManager's bookkeeping (kernels by id, the max_kernels count).
//   - managed.go: one served kernel (KernelManager + ZMQChannelsWebsocketConnection's fan-out,
//     restart and relaunch of a dead kernel, the restarter); state.go its execution_state.
//   - ws.go, wire.go: one WebSocket (writer, acknowledgements by ping/pong) and the legacy/v1 codecs.
//   - backlog.go: the reconnect buffer (buffer_offline_messages, by acknowledged sequence number).
//   - backend.go, kernel_adapter.go: the Kernel interface over the kernel package; launch, prespawn.
//   - env.go: the client-environment allow-list; attach.go: `pyrualean attach` (Jupyter Server sessions).
package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Config configures a Server. The zero value is usable: token auth with a random token, listing on,
// 32 MiB messages, a backlog of at most 1024 messages or 16 MiB per kernel.
type Config struct {
	Token         string   // required token; empty with NoAuth false → a random one (see Server.Token)
	NoAuth        bool     // serve without authentication (only for trusted networks)
	BaseURL       string   // path prefix, e.g. "/gw/"; default "/"
	AllowOrigins  []string // extra origins allowed for CORS and the WebSocket upgrade ("*" = any)
	AllowHosts    []string // Host names accepted besides IP literals and localhost ("*" = any): DNS rebinding guard
	MaxKernels    int      // 0 = unlimited
	CullIdle      time.Duration
	CullInterval  time.Duration // default 60 s (or CullIdle/2 when shorter)
	EnvAllow      []string      // environment names a client may set besides KERNEL_*
	DefaultKernel string        // default kernelspec name; default "pyrualean", else "python3", else the first
	AutoRestart   bool          // relaunch a kernel that died on its own (jupyter_server's restarter); off: it stays dead until POST …/restart

	MaxMessageBytes int64 // largest client frame; default 32 MiB
	BacklogMessages int   // per-kernel reconnect backlog length; default 1024
	BacklogBytes    int   // per-kernel reconnect backlog size; default 16 MiB
	SocketQueue     int   // frames queued per socket before a slow client is dropped; default BacklogMessages+256

	Logger *slog.Logger

	// launch and specs default to the real kernel package (kernel_adapter.go); tests keep them real too.
	launch launchFunc
	specs  func() ([]specInfo, error)
}

// EpisodeController is a live episode the gateway exposes under /api/episodes. An action the episode
// refuses (it is over) returns an error, which the client gets as a 409 with the error's message.
type EpisodeController interface {
	ID() string
	Status() any // JSON-marshalled into the episode model
	Pause() error
	Resume() error
	Step() error
}

// EpisodeDiscarder is an EpisodeController that can drop the agent's held cell (POST
// /api/episodes/{id}/discard): not run, the agent told, the episode still paused.
type EpisodeDiscarder interface {
	Discard() error
}

// EpisodeTrace is an EpisodeController that can hand out its trace notebook (.ipynb bytes), served as
// GET /api/episodes/{id}/trace: a live document on another machine starts from it.
type EpisodeTrace interface {
	TraceJSON() ([]byte, error)
}

// Server is the gateway: an http.Handler plus the kernels it serves.
type Server struct {
	cfg      Config
	log      *slog.Logger
	token    string
	env      envPolicy
	mux      *http.ServeMux
	public   map[string]bool // mux patterns served without the token (HandlePublic)
	handler  http.Handler
	upgrader websocket.Upgrader

	kernels *kernelRegistry

	mu       sync.Mutex // guards sessions, episodes, pool
	sessions map[string]*sessionModel
	episodes map[string]*episodeEntry
	pool     *prespawnPool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type episodeEntry struct {
	ctl      EpisodeController
	kernelID string
	gone     chan struct{} // closed by RemoveEpisode
}

// New builds a Server; it starts no kernel until asked (Prespawn, POST /api/kernels, AddKernel).
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 32 << 20
	}
	if cfg.BacklogMessages <= 0 {
		cfg.BacklogMessages = 1024
	}
	if cfg.BacklogBytes <= 0 {
		cfg.BacklogBytes = 16 << 20
	}
	if cfg.SocketQueue <= 0 {
		cfg.SocketQueue = cfg.BacklogMessages + 256
	}
	if cfg.CullInterval <= 0 {
		cfg.CullInterval = 60 * time.Second
		if cfg.CullIdle > 0 && cfg.CullIdle/2 < cfg.CullInterval {
			cfg.CullInterval = max(cfg.CullIdle/2, 100*time.Millisecond)
		}
	}
	cfg.BaseURL = "/" + strings.Trim(cfg.BaseURL, "/")
	if cfg.BaseURL != "/" {
		cfg.BaseURL += "/"
	}
	if cfg.launch == nil {
		cfg.launch = launchKernel
	}
	if cfg.specs == nil {
		cfg.specs = findSpecs
	}
	s := &Server{cfg: cfg, log: cfg.Logger, env: newEnvPolicy(cfg.EnvAllow),
		kernels: newKernelRegistry(cfg.MaxKernels), sessions: map[string]*sessionModel{}, episodes: map[string]*episodeEntry{}}
	if !cfg.NoAuth {
		s.token = cfg.Token
		if s.token == "" {
			b := make([]byte, 24)
			_, _ = rand.Read(b)
			s.token = hex.EncodeToString(b)
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.upgrader = websocket.Upgrader{
		Subprotocols: []string{ProtocolV1},
		CheckOrigin:  s.originAllowed,
		// Small per-connection buffers and a shared write-buffer pool: memory per idle socket stays low.
		ReadBufferSize:  4 << 10,
		WriteBufferSize: 8 << 10,
		WriteBufferPool: &sync.Pool{},
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			writeError(w, status, reason.Error())
		},
	}
	s.routes()
	if cfg.CullIdle > 0 {
		s.wg.Add(1)
		go s.cullLoop()
	}
	return s
}

// Token is the token clients must present ("" when authentication is off).
func (s *Server) Token() string { return s.token }

// Handle serves pattern (a method pattern, as in routes) with h behind the gateway's own checks: Host,
// CORS, base URL and token (serve --openenv mounts OpenEnv's /ws here).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// HandlePublic is Handle without the token check (Host, CORS and base URL still apply): for routes that
// describe a service and hold no secret, which clients probe before they have a token (an OpenEnv
// environment's /health, /metadata, /schema). Call it before serving.
func (s *Server) HandlePublic(pattern string, h http.Handler) {
	if s.public == nil {
		s.public = map[string]bool{}
	}
	s.public[pattern] = true
	s.mux.Handle(pattern, h)
}

// OriginAllowed is the gateway's WebSocket origin check, for a handler mounted with Handle.
func (s *Server) OriginAllowed(r *http.Request) bool { return s.originAllowed(r) }

// BaseURL is the normalised path prefix ("/" or "/x/").
func (s *Server) BaseURL() string { return s.cfg.BaseURL }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// routes maps each endpoint to its handler; the method is part of the pattern, so a wrong method
// gets the mux's 405 (with Allow), which dispatch answers in JSON like every other error.
func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /api", s.handleAPI)
	m.HandleFunc("GET /api/status", s.handleStatus)
	m.HandleFunc("GET /api/kernelspecs", s.handleSpecs)
	m.HandleFunc("GET /api/kernelspecs/{name}", s.handleSpec)
	m.HandleFunc("GET /kernelspecs/{name}/{file}", s.handleSpecFile)
	m.HandleFunc("GET /api/kernels", s.handleListKernels)
	m.HandleFunc("POST /api/kernels", s.handleStartKernel)
	m.HandleFunc("GET /api/kernels/{id}", s.handleGetKernel)
	m.HandleFunc("DELETE /api/kernels/{id}", s.handleDeleteKernel)
	m.HandleFunc("POST /api/kernels/{id}/interrupt", s.handleInterrupt)
	m.HandleFunc("POST /api/kernels/{id}/restart", s.handleRestart)
	m.HandleFunc("GET /api/kernels/{id}/channels", s.handleChannels)
	m.HandleFunc("GET /api/sessions", s.handleListSessions)
	m.HandleFunc("POST /api/sessions", s.handleCreateSession)
	m.HandleFunc("GET /api/sessions/{id}", s.handleGetSession)
	m.HandleFunc("PATCH /api/sessions/{id}", s.handlePatchSession)
	m.HandleFunc("DELETE /api/sessions/{id}", s.handleDeleteSession)
	m.HandleFunc("GET /api/episodes", s.handleEpisodes)
	m.HandleFunc("GET /api/episodes/{id}", s.handleEpisode)
	m.HandleFunc("GET /api/episodes/{id}/trace", s.handleEpisodeTrace)
	m.HandleFunc("POST /api/episodes/{id}/{action}", s.handleEpisodeAction)
	s.mux = m
	s.handler = http.HandlerFunc(s.dispatch)
}

// dispatch is what every request goes through: panic guard, CORS, Host check, base URL, auth, route.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			s.log.Error("handler panic", "path", r.URL.Path, "panic", v)
			writeError(w, http.StatusInternalServerError, fmt.Sprint(v))
		}
	}()
	if !s.hostAllowed(r.Host) {
		// DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends Host: evil.example.
		writeError(w, http.StatusForbidden, fmt.Sprintf("host %q not allowed (see --allow-host)", r.Host))
		return
	}
	s.cors(w, r)
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if s.cfg.BaseURL != "/" {
		rest, ok := strings.CutPrefix(r.URL.Path, strings.TrimSuffix(s.cfg.BaseURL, "/"))
		if !ok || (rest != "" && rest[0] != '/') {
			s.notFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + strings.TrimPrefix(rest, "/")
		r2.URL.RawPath = ""
		r = r2
	}
	_, pattern := s.mux.Handler(r)
	if !s.public[pattern] && !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong token: send 'Authorization: token <token>' or ?token=<token>")
		return
	}
	if pattern == "" {
		// No route: the mux would answer 404, or 405 when another method matches; say it in JSON.
		rec := &allowRecorder{header: http.Header{}}
		h, _ := s.mux.Handler(r)
		h.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); rec.code == http.StatusMethodNotAllowed && allow != "" {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s not allowed here; use %s", r.Method, allow))
			return
		}
		s.notFound(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// allowRecorder captures the status and Allow header of the mux's own not-found/not-allowed answer.
type allowRecorder struct {
	header http.Header
	code   int
}

func (a *allowRecorder) Header() http.Header         { return a.header }
func (a *allowRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (a *allowRecorder) WriteHeader(code int)        { a.code = code }

// hostAllowed is jupyter_server's check_host: IP literals (a rebinding page cannot send one for another
// site), localhost and configured names pass; "*" turns the check off.
func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" || net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") {
		return true
	}
	for _, a := range s.cfg.AllowHosts {
		if a == "*" || strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// authorized checks the token from the Authorization header (token or Bearer) or ?token=.
func (s *Server) authorized(r *http.Request) bool {
	if s.token == "" {
		return true
	}
	got := r.URL.Query().Get("token")
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, v, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "token") || strings.EqualFold(scheme, "bearer") {
			got = strings.TrimSpace(v)
		}
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

// originAllowed is the WebSocket origin check: non-browser clients (no Origin), same host, or configured.
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return s.originListed(origin)
}

func (s *Server) originListed(origin string) bool {
	for _, o := range s.cfg.AllowOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

func (s *Server) cors(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin == "" || len(s.cfg.AllowOrigins) == 0 || !s.originListed(origin) {
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Vary", "Origin")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-XSRFToken")
	h.Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE, OPTIONS")
}

type errorBody struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Reason: http.StatusText(status), Message: msg})
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
}

func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	// jupyter_server's API version: clients compare it, so report the one whose API we serve.
	writeJSON(w, 200, map[string]string{"version": "2.14.0", "gateway": "pyrualean"})
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	ks := s.kernels.all()
	conns, last := 0, time.Time{}
	for _, k := range ks {
		k.mu.Lock()
		conns += len(k.conns)
		if k.lastActivity.After(last) {
			last = k.lastActivity
		}
		k.mu.Unlock()
	}
	writeJSON(w, 200, map[string]any{"started": jupyterTime(time.Now()), "last_activity": jupyterTime(last),
		"connections": conns, "kernels": len(ks)})
}

// maxBodyBytes bounds a REST request body (they are small JSON objects).
const maxBodyBytes = 1 << 20

// decodeBody reads an optional JSON object body; an empty body is an empty request.
func decodeBody(r *http.Request, into any) error {
	body := http.MaxBytesReader(nil, r.Body, maxBodyBytes)
	dec := json.NewDecoder(body)
	if err := dec.Decode(into); err != nil && !errors.Is(err, errEOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: request body over %d bytes", errTooLarge, mbe.Limit)
		}
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return fmt.Errorf("request field %q must be a JSON %s", ute.Field, jsonKind(ute.Type.Kind().String()))
		}
		return fmt.Errorf("request body is not valid JSON: %v", err)
	}
	return nil
}

// writeBodyError answers a body decodeBody refused: 413 when too large, else 400.
func writeBodyError(w http.ResponseWriter, err error) {
	if errors.Is(err, errTooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	writeError(w, http.StatusBadRequest, err.Error())
}

func jsonKind(k string) string {
	switch k {
	case "map", "struct":
		return "object"
	case "slice":
		return "array"
	}
	return k
}

func (s *Server) kernelError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNoSuchKernel):
		writeError(w, 404, err.Error())
	case errors.Is(err, ErrNoSuchSpec):
		writeError(w, 404, err.Error())
	case errors.Is(err, ErrTooManyKernel), errors.Is(err, ErrForbidden):
		writeError(w, 403, err.Error())
	case errors.Is(err, errBadRequest):
		writeError(w, 400, err.Error())
	case errors.Is(err, errConflict):
		writeError(w, 409, err.Error())
	default:
		writeError(w, 500, err.Error())
	}
}

var (
	errBadRequest = errors.New("bad request")
	errConflict   = errors.New("conflict")
	errTooLarge   = errors.New("request body too large")
)

// Close shuts down every kernel the gateway started (not added ones) and closes all sockets.
func (s *Server) Close() error {
	s.cancel()
	var ids []string
	var added []*managedKernel
	for _, mk := range s.kernels.all() {
		if mk.external {
			added = append(added, s.kernels.remove(mk.id))
		} else {
			ids = append(ids, mk.id)
		}
	}
	s.mu.Lock()
	pool := s.pool
	s.pool = nil
	s.mu.Unlock()
	for _, mk := range added {
		mk.close(websocket.CloseGoingAway, "gateway shutting down")
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.ShutdownKernel(context.Background(), id)
		}()
	}
	wg.Wait()
	if pool != nil {
		pool.close()
	}
	s.wg.Wait()
	return nil
}

// ListenAndServe serves on addr until ctx ends, then closes the server (and its kernels).
// ready, when non-nil, is called with the bound address (useful with port 0).
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("gateway listen %s: %w", addr, err)
	}
	return s.Serve(ctx, ln, ready)
}

// Serve is ListenAndServe on an existing listener.
func (s *Server) Serve(ctx context.Context, ln net.Listener, ready func(net.Addr)) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		_ = s.Close()
		return fmt.Errorf("gateway serve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return s.Close()
}

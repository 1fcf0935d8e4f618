// Package gateway serves running kernels over Jupyter Server's kernel HTTP + WebSocket API, so that
// `jupyter server|lab --gateway-url`, JupyterLab and raw clients attach to the kernels an agent drives.
// One kernel client per kernel is fanned out to every socket; replies go to the socket that asked,
// IOPub to all, and a bounded per-kernel backlog (backlog.go) resends what a reconnecting session_id has not acknowledged.
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
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
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

// EpisodeController is a live episode the gateway exposes under /api/episodes.
type EpisodeController interface {
	ID() string
	Status() any // JSON-marshalled into the episode model
	Pause()
	Resume()
	Step()
}

// Server is the gateway: an http.Handler plus the kernels it serves.
type Server struct {
	cfg      Config
	log      *slog.Logger
	token    string
	env      envPolicy
	mux      *http.ServeMux
	handler  http.Handler
	upgrader websocket.Upgrader

	mu       sync.Mutex
	kernels  map[string]*managedKernel
	starting int // kernels being launched, counted against MaxKernels
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
		kernels: map[string]*managedKernel{}, sessions: map[string]*sessionModel{}, episodes: map[string]*episodeEntry{}}
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
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong token: send 'Authorization: token <token>' or ?token=<token>")
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
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

// ---- models and errors

type kernelModel struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	LastActivity   string `json:"last_activity"`
	ExecutionState string `json:"execution_state"`
	Connections    int    `json:"connections"`
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
	s.mu.Lock()
	ks := make([]*managedKernel, 0, len(s.kernels))
	for _, k := range s.kernels {
		ks = append(ks, k)
	}
	s.mu.Unlock()
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

// ---- kernelspecs

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

func (s *Server) findSpec(name string) (specInfo, error) {
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
	for _, sp := range specs {
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

// ---- kernels

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func (s *Server) kernel(id string) (*managedKernel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if mk := s.kernels[id]; mk != nil {
		return mk, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNoSuchKernel, id)
}

func (s *Server) listKernels() []kernelModel {
	s.mu.Lock()
	ks := make([]*managedKernel, 0, len(s.kernels))
	for _, k := range s.kernels {
		ks = append(ks, k)
	}
	s.mu.Unlock()
	out := make([]kernelModel, 0, len(ks))
	for _, k := range ks {
		out = append(out, k.model())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
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
	s.mu.Lock()
	if kernelID != "" && s.kernels[kernelID] != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: kernel %s already exists", errConflict, kernelID)
	}
	if s.cfg.MaxKernels > 0 && len(s.kernels)+s.starting >= s.cfg.MaxKernels {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w (%d): shut one down first", ErrTooManyKernel, s.cfg.MaxKernels)
	}
	s.starting++
	pool := s.pool
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.starting--
		s.mu.Unlock()
	}()

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
	s.mu.Lock()
	s.kernels[id] = mk
	s.mu.Unlock()
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
		s.log.Info("not shutting down a live episode's kernel", "id", id)
		return nil
	}
	s.mu.Lock()
	delete(s.kernels, id)
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
		s.kernelError(w, fmt.Errorf("%w: kernel %s belongs to a live episode; restarting it would lose the robot", ErrForbidden, mk.id))
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
	c := newWSConn(ws, session, v1, s.cfg.SocketQueue, s.log.With("kernel", mk.id))
	go c.writeLoop()
	mk.attach(c)
	s.log.Info("websocket open", "kernel", mk.id, "session", session, "v1", v1)
	c.readLoop(mk, s.cfg.MaxMessageBytes)
	mk.detach(c)
	close(c.gone)
	s.log.Info("websocket closed", "kernel", mk.id, "session", session)
}

// AddKernel serves a kernel started elsewhere (a live episode's) under a fresh id. The gateway never
// restarts or shuts it down; the caller does (and calls RemoveKernel).
func (s *Server) AddKernel(k Kernel, name string) string {
	id := uuid.NewString()
	s.register(s.ctx, id, name, k, nil)
	return id
}

// RemoveKernel stops serving a kernel added with AddKernel (sockets are told it is dead).
func (s *Server) RemoveKernel(id string) {
	s.mu.Lock()
	mk := s.kernels[id]
	delete(s.kernels, id)
	s.mu.Unlock()
	if mk != nil {
		mk.mu.Lock()
		mk.st.set(StateDead)
		mk.broadcastLocked(mk.syntheticStatusLocked(StateDead))
		mk.mu.Unlock()
		mk.close(websocket.CloseNormalClosure, "kernel removed")
	}
}

// Close shuts down every kernel the gateway started (not added ones) and closes all sockets.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	var ids []string
	var added []*managedKernel
	for id, mk := range s.kernels {
		if mk.external {
			added = append(added, mk)
			delete(s.kernels, id)
		} else {
			ids = append(ids, id)
		}
	}
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

func (s *Server) cullLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.CullInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.mu.Lock()
			ks := make([]*managedKernel, 0, len(s.kernels))
			for _, k := range s.kernels {
				ks = append(ks, k)
			}
			s.mu.Unlock()
			for _, mk := range ks {
				idle, cullable := mk.idleFor(now)
				if cullable && idle > s.cfg.CullIdle {
					s.log.Info("culling idle kernel", "id", mk.id, "idle", idle.Round(time.Second))
					_ = s.ShutdownKernel(s.ctx, mk.id)
				}
			}
		}
	}
}

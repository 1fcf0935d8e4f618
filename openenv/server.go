// Package openenv serves pyrualean episodes as an OpenEnv environment: the WebSocket session protocol
// of OpenEnv (PyPI openenv; its EnvClient / GenericEnvClient) at /ws, which RL trainers drive.
//
// One WebSocket is one session; a session runs one episode at a time. reset's data chooses the
// episode within the server's Limits (robot, task, seed, arm, images, max_turns, ...: spec.Settings
// names) and starts it sealed, like play (agent.StartEpisode with a validated spec); a step is one tool
// call of the episode's arm, and its observation is exactly the ToolResult the agent gets in play,
// with reward (the benchmark's success at the end; 0 before) and done; state is result.json. Each
// session's episode is a normal run folder with its trace.
//
// Protocol failures (a malformed frame, an oversize one, a step without an episode, capacity, an
// expired session) are error frames; what the policy did wrong (an unknown tool, bad arguments) is an
// observation carrying the error text, as the model reads it in play. A client that goes away
// mid-episode leaves it interrupted.
//
//	server.go   Config, Server: the /ws handler, the session count, Close
//	session.go  one session: frames in and out, idle timeout, the episode's start, steps and end
//	reset.go    reset data -> spec.Episode (allowed settings, the server's caps, the run folder)
//	protocol.go frames, observations, actions, error codes
package openenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/pyrualean/pyrualean/agent"
	"github.com/pyrualean/pyrualean/spec"
)

// Config configures a Server.
type Config struct {
	// Base is every episode's spec before the client's settings (spec.New() and the server's flags:
	// sealing, budgets, images, ...).
	Base   spec.Episode
	Limits Limits
	Out    string // the folder run folders go under (absolute)
	// Robots validates specs (the robot registry: robotapi.Registry).
	Robots spec.Robots
	Host   agent.Host // how episodes run here (logger, repository root)

	MaxSessions   int           // sessions at once (0: 4)
	IdleTimeout   time.Duration // a session without a frame this long expires (0: 10 min)
	MaxFrameBytes int64         // largest client frame (0: 1 MiB)
	// CheckOrigin decides a browser's WebSocket upgrade (nil: only clients without Origin, or the
	// same host).
	CheckOrigin func(*http.Request) bool
	// OnEpisode, when set, is told of each episode once it starts (serve lists its kernel in the
	// gateway); the func it returns is called when the episode has ended.
	OnEpisode func(ep *agent.Episode) (ended func())
	Logger    *slog.Logger
}

// Server is the /ws handler and its sessions.
type Server struct {
	cfg      Config
	log      *slog.Logger
	upgrader websocket.Upgrader

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seq    atomic.Int64

	mu       sync.Mutex
	sessions int
	closed   bool
}

// New builds a Server; Close ends its sessions.
func New(cfg Config) (*Server, error) {
	if cfg.Out == "" || cfg.Robots == nil {
		return nil, errors.New("openenv: Config needs Out and Robots")
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 4
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Host.Logger == nil {
		cfg.Host.Logger = cfg.Logger
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	check := cfg.CheckOrigin
	if check == nil {
		check = func(r *http.Request) bool {
			o := r.Header.Get("Origin")
			return o == "" || o == "http://"+r.Host || o == "https://"+r.Host
		}
	}
	s.upgrader = websocket.Upgrader{CheckOrigin: check, ReadBufferSize: 4 << 10, WriteBufferSize: 32 << 10,
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			http.Error(w, reason.Error(), status)
		}}
	return s, nil
}

// ServeHTTP upgrades a request to a session. Authentication is the caller's (serve mounts this
// behind the gateway's token check).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	conn, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	if !s.admit() {
		// As OpenEnv's server: an error frame, then the close; the client reads the queued frame.
		_ = conn.WriteJSON(outFrame{Type: "error", Data: map[string]any{
			"message": fmt.Sprintf("the server is at capacity: %d sessions at once (try again later)", s.cfg.MaxSessions),
			"code":    CodeCapacityReached, "max_sessions": s.cfg.MaxSessions}})
		closeConn(conn, websocket.ClosePolicyViolation, "capacity reached")
		return
	}
	s.wg.Add(1)
	defer s.wg.Done()
	defer s.release()
	newSession(s, conn).run()
}

func (s *Server) admit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.sessions >= s.cfg.MaxSessions {
		return false
	}
	s.sessions++
	return true
}

func (s *Server) release() {
	s.mu.Lock()
	s.sessions--
	s.mu.Unlock()
}

// Sessions is the number of sessions open now.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

// Close refuses new sessions, ends the open ones (their episodes interrupted) and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

func closeConn(conn *websocket.Conn, code int, reason string) {
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	_ = conn.Close()
}

package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where the streamable HTTP endpoint is mounted.
const Path = "/mcp"

// Handler returns the streamable HTTP handler for srv (sessions kept; SSE responses).
func Handler(srv *Server, logger *slog.Logger) http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv.Server },
		&sdk.StreamableHTTPOptions{Logger: logger})
}

// HTTPServer is a running streamable HTTP endpoint.
type HTTPServer struct {
	URL  string // e.g. http://127.0.0.1:41234/mcp
	hs   *http.Server
	done chan error
}

// ListenHTTP serves srv on addr (e.g. "127.0.0.1:0" for a free port) at Path and returns once it listens.
func ListenHTTP(srv *Server, addr string, logger *slog.Logger) (*HTTPServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mcp: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, Handler(srv, logger))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if logger != nil {
		hs.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	}
	s := &HTTPServer{URL: "http://" + ln.Addr().String() + Path, hs: hs, done: make(chan error, 1)}
	go func() {
		err := hs.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// Close stops accepting connections and closes open ones (long tool calls included).
func (s *HTTPServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.hs.Shutdown(ctx); err != nil {
		_ = s.hs.Close()
	}
	return <-s.done
}

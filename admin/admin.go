// Package admin serves brokernet's operator HTTP endpoints: /healthz, /readyz,
// /status (JSON), /metrics (Prometheus) and the live topology page at /.
package admin

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/metrics"
)

// Options configures the admin endpoints.
type Options struct {
	// Bridges lists the running bridges; it is called on every request.
	Bridges metrics.Source
	// Version is reported in /status and brokernet_build_info.
	Version string
	// Log receives the listener's own errors.
	Log zerolog.Logger
}

// Server is the admin HTTP server.
type Server struct {
	opts    Options
	srv     *http.Server
	ln      net.Listener
	mux     *http.ServeMux
	rates   *rates
	started time.Time
}

//go:embed ui
var uiFiles embed.FS

// Listen binds addr and returns a server ready to Serve.
func Listen(addr string, opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listener %s: %w", addr, err)
	}
	s := New(opts)
	s.ln = ln
	return s, nil
}

// New returns a server whose Handler serves the endpoints; Listen also binds it.
func New(opts Options) *Server {
	if opts.Bridges == nil {
		opts.Bridges = func() []metrics.Bridge { return nil }
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), rates: newRates(), started: time.Now()}
	reg := metrics.NewRegistry(opts.Bridges, opts.Version)
	s.mux.Handle("GET /metrics", metrics.Handler(reg))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Status())
	})
	ui, _ := fs.Sub(uiFiles, "ui")
	s.mux.Handle("GET /", http.FileServerFS(ui))
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 5 * time.Second}
	return s
}

// Handler serves every endpoint (for wrapping, e.g. with authentication).
func (s *Server) Handler() http.Handler { return s.mux }

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve serves until ctx ends. It samples the bridges' counters every second
// for the forwarding rates /status reports.
func (s *Server) Serve(ctx context.Context) error {
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				s.srv.Shutdown(sctx)
				return
			case now := <-t.C:
				s.rates.sample(now, s.opts.Bridges())
			}
		}
	}()
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// readyz answers 200 while every bridge is up, 503 with the reasons otherwise.
// A process with no bridges (a sidecar alone in its gossip cluster) is ready:
// nothing that should be up is down.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	reasons := Reasons(s.opts.Bridges())
	if len(reasons) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reasons": reasons})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true, "reasons": []Reason{}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

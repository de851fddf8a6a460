// Package admin serves brokernet's HTTP admin endpoints: /status (JSON) and
// /metrics (Prometheus text format), from snapshots of the running bridges.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// BridgeSnapshot is the state of one bridge at one moment.
type BridgeSnapshot struct {
	Connector     string `json:"connector"`
	Peer          string `json:"peer"`
	Bridge        string `json:"bridge"`
	Up            bool   `json:"up"`
	Forwarded     int64  `json:"forwarded"`
	DemandSubs    int64  `json:"demand_subscriptions"`
	Advisories    int64  `json:"advisories"`
	BadAdvisories int64  `json:"bad_advisories"`
	Sessions      int64  `json:"sessions"`
}

// Source returns the current snapshots.
type Source func() []BridgeSnapshot

// Server is the admin HTTP server.
type Server struct {
	srv *http.Server
	ln  net.Listener
	log zerolog.Logger
}

// Listen binds addr and returns a server ready to Serve.
func Listen(addr string, src Source, log zerolog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"bridges": src()})
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		WriteMetrics(w, src())
		// The process's goroutine count (Prometheus' standard name), so that a soak
		// run can see goroutines stay flat across reconnects.
		fmt.Fprintf(w, "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	return &Server{
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		ln:  ln,
		log: log,
	}, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve serves until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.srv.Shutdown(sctx)
	}()
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// WriteMetrics renders snapshots in the Prometheus text exposition format.
func WriteMetrics(w io.Writer, snaps []BridgeSnapshot) {
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].Bridge < snaps[j].Bridge })
	type metric struct {
		name, help, kind string
		val              func(BridgeSnapshot) int64
	}
	for _, m := range []metric{
		{"brokernet_bridge_up", "1 while both ends of the bridge are connected", "gauge", func(s BridgeSnapshot) int64 {
			if s.Up {
				return 1
			}
			return 0
		}},
		{"brokernet_forwarded_messages_total", "messages confirmed by the remote broker and acknowledged locally", "counter", func(s BridgeSnapshot) int64 { return s.Forwarded }},
		{"brokernet_demand_subscriptions", "demand subscriptions open on the local broker", "gauge", func(s BridgeSnapshot) int64 { return s.DemandSubs }},
		{"brokernet_advisories_total", "consumer advisories applied", "counter", func(s BridgeSnapshot) int64 { return s.Advisories }},
		{"brokernet_bad_advisories_total", "malformed advisories skipped", "counter", func(s BridgeSnapshot) int64 { return s.BadAdvisories }},
		{"brokernet_sessions_total", "successful connections of both ends", "counter", func(s BridgeSnapshot) int64 { return s.Sessions }},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.kind)
		for _, s := range snaps {
			fmt.Fprintf(w, "%s{connector=%s,peer=%s,bridge=%s} %d\n", m.name, quote(s.Connector), quote(s.Peer), quote(s.Bridge), m.val(s))
		}
	}
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func quote(s string) string { return `"` + labelEscaper.Replace(s) + `"` }

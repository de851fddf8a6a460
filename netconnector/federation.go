package netconnector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/config"
)

// Federation runs every network connector of a configuration and applies new
// configurations: connectors whose settings (or local broker) changed restart,
// removed ones stop, new ones start, and the others keep forwarding untouched.
type Federation struct {
	log zerolog.Logger
	ctx context.Context

	mu      sync.Mutex
	running map[string]*runningConnector
	wg      sync.WaitGroup
}

type runningConnector struct {
	cfg    config.NetworkConnector
	broker config.Broker
	conn   *Connector
	cancel context.CancelFunc
	done   chan struct{}
}

// NewFederation returns a federation whose connectors live until ctx ends.
func NewFederation(ctx context.Context, log zerolog.Logger) *Federation {
	return &Federation{log: log, ctx: ctx, running: make(map[string]*runningConnector)}
}

// Apply makes the running connectors match cfg. It returns the names of the
// connectors it started, restarted and stopped. A connector that cannot be built
// (for example a gossip port in use) is reported in the error; the others still
// apply. A changed connector whose new settings cannot be built was stopped and
// is not running: it is reported as stopped, never as restarted.
func (f *Federation) Apply(cfg *config.Config) (started, restarted, stopped []string, err error) {
	brokers := make(map[string]config.Broker, len(cfg.Brokers))
	for _, b := range cfg.Brokers {
		brokers[b.Name] = b
	}
	want := make(map[string]config.NetworkConnector, len(cfg.Connectors))
	for _, nc := range cfg.Connectors {
		want[nc.Name] = nc
	}

	f.mu.Lock()
	var stop []*runningConnector
	for name, rc := range f.running {
		nc, ok := want[name]
		if !ok {
			stop = append(stop, rc)
			delete(f.running, name)
			stopped = append(stopped, name)
			continue
		}
		if !rc.cfg.Equal(nc) || !sameBroker(rc.broker, brokers[nc.Broker]) {
			stop = append(stop, rc)
			delete(f.running, name)
			restarted = append(restarted, name)
		}
	}
	f.mu.Unlock()
	// Drain outside the lock, all at once.
	var wg sync.WaitGroup
	for _, rc := range stop {
		wg.Add(1)
		go func() { defer wg.Done(); rc.cancel(); <-rc.done }()
	}
	wg.Wait()

	var errs []error
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := f.running[name]; ok {
			continue
		}
		nc := want[name]
		b := brokers[nc.Broker]
		conn, err := New(nc, b, nil, f.log)
		if err != nil {
			errs = append(errs, err)
			if i := slices.Index(restarted, name); i >= 0 {
				restarted = slices.Delete(restarted, i, i+1)
				stopped = append(stopped, name)
			}
			continue
		}
		ctx, cancel := context.WithCancel(f.ctx)
		rc := &runningConnector{cfg: nc, broker: b, conn: conn, cancel: cancel, done: make(chan struct{})}
		f.running[name] = rc
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer close(rc.done)
			if err := conn.Run(ctx); err != nil {
				f.log.Error().Err(err).Str("connector", name).Msg("network connector failed")
			}
		}()
		if !slices.Contains(restarted, name) {
			started = append(started, name)
		}
	}
	sort.Strings(started)
	sort.Strings(restarted)
	sort.Strings(stopped)
	if len(errs) > 0 {
		err = fmt.Errorf("%d connector(s) failed to start: %w", len(errs), errors.Join(errs...))
	}
	return started, restarted, stopped, err
}

// Wait blocks until every connector has stopped (after the federation's ctx ended).
func (f *Federation) Wait() { f.wg.Wait() }

// Connectors returns the running connectors by name.
func (f *Federation) Connectors() map[string]*Connector {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]*Connector, len(f.running))
	for name, rc := range f.running {
		out[name] = rc.conn
	}
	return out
}

func sameBroker(a, b config.Broker) bool {
	if a.Name != b.Name || a.ID != b.ID || a.URI.Kind != b.URI.Kind || len(a.URI.URIs) != len(b.URI.URIs) {
		return false
	}
	return sameURIs(a.URI.URIs, b.URI.URIs)
}

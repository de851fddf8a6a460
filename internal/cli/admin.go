package cli

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/metrics"
	"github.com/brokernet/brokernet/netconnector"
)

// startAdmin serves the admin endpoints on addr until ctx ends; "" is off.
func startAdmin(ctx context.Context, addr string, src metrics.Source, log zerolog.Logger) error {
	if addr == "" {
		return nil
	}
	srv, err := admin.Listen(addr, admin.Options{Bridges: src, Version: Version, Log: log})
	if err != nil {
		return err
	}
	go func() {
		if err := srv.Serve(ctx); err != nil {
			log.Error().Err(err).Msg("admin listener failed")
		}
	}()
	log.Info().Str("addr", srv.Addr()).Msg("admin listener up (/, /status, /metrics, /healthz, /readyz)")
	return nil
}

// federationBridges lists every running bridge of fed with its connector and peer.
func federationBridges(fed *netconnector.Federation) []metrics.Bridge {
	var out []metrics.Bridge
	for name, c := range fed.Connectors() {
		for _, ps := range c.Status() {
			// A duplex peer's second bridge is the reverse direction
			// (netconnector.Connector.bridgeConfigs).
			for i, b := range c.Bridges(ps.Key) {
				out = append(out, metrics.Bridge{Connector: name, Peer: ps.Key, Reverse: i > 0, Bridge: b})
			}
		}
	}
	return out
}

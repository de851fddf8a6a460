package cli

import (
	"context"
	"flag"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/metrics"
	"github.com/brokernet/brokernet/netconnector"
)

// adminFlags are the admin endpoint flags of bridge and sidecar, the
// command-line form of the TOML [admin] table.
type adminFlags struct {
	listen, tokenFile, certFile, keyFile string
	insecure                             bool
}

func (a *adminFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.listen, "admin", "", "HOST:PORT serving /, /status, /metrics, /healthz, /readyz (default: off)")
	fs.StringVar(&a.tokenFile, "admin-token-file", "", "file holding a bearer token the admin endpoint requires")
	fs.StringVar(&a.certFile, "admin-cert-file", "", "PEM certificate: serve the admin endpoint over HTTPS")
	fs.StringVar(&a.keyFile, "admin-key-file", "", "PEM key of --admin-cert-file")
	fs.BoolVar(&a.insecure, "admin-insecure", false, "allow a non-loopback --admin without a token")
}

// name tells cf which flag sets each key of the [admin] table.
func (a *adminFlags) name(cf *config.Flags) {
	for key, fl := range map[string]string{"listen": "--admin", "tokenFile": "--admin-token-file",
		"certFile": "--admin-cert-file", "keyFile": "--admin-key-file", "insecure": "--admin-insecure"} {
		cf.Name("admin", key, fl)
	}
}

// config returns the flags as the [admin] table; warn notes a token file
// others can read.
func (a *adminFlags) config() (c config.Admin, warn string, err error) {
	c = config.Admin{Listen: a.listen, TokenFile: a.tokenFile, CertFile: a.certFile, KeyFile: a.keyFile, Insecure: a.insecure}
	if a.tokenFile != "" {
		c.Token, warn, err = config.ReadPasswordFile(a.tokenFile)
		if err != nil {
			return c, "", usagef("--admin-token-file: %v", err)
		}
	}
	return c, warn, nil
}

// startAdmin serves the admin endpoints as c says until ctx ends; an empty
// Listen is off. A listener other machines can reach needs a token (or
// Insecure), as admin.CheckExposure says.
func startAdmin(ctx context.Context, c config.Admin, src metrics.Source, log zerolog.Logger) error {
	if c.Listen == "" {
		return nil
	}
	if err := admin.CheckExposure(c.Listen, admin.Security{Token: c.Token, Insecure: c.Insecure}); err != nil {
		return usagef("%v", err)
	}
	srv, err := admin.Listen(c.Listen, admin.Options{Bridges: src, Version: Version, Log: log})
	if err != nil {
		return err
	}
	if err := srv.Protect(admin.Security{Token: c.Token, CertFile: c.CertFile, KeyFile: c.KeyFile, Insecure: c.Insecure}); err != nil {
		return usagef("%v", err)
	}
	go func() {
		if err := srv.Serve(ctx); err != nil {
			log.Error().Err(err).Msg("admin listener failed")
		}
	}()
	log.Info().Str("addr", srv.Addr()).Bool("token", c.Token != "").Bool("tls", c.CertFile != "").
		Msg("admin listener up (/, /status, /metrics, /healthz, /readyz)")
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

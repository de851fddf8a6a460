package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/metrics"
	"github.com/brokernet/brokernet/netconnector"
)

const runUsage = `Usage: brokernet run -c FILE [--procs N]

Runs the federation described by FILE (TOML): every [[networkConnector]] with its
discovery agent, one bridge per discovered peer. SIGHUP reloads FILE: connectors
whose settings changed restart, the others keep forwarding; an invalid file is
refused and the running configuration stays. SIGINT/SIGTERM drain and exit 0.

Flags:
`

const checkUsage = `Usage: brokernet check -c FILE

Validates FILE and reports every problem with its line, without connecting to anything.

Flags:
`

// loadConfigFlag parses "-c FILE" and the other flags registered on fs, and
// loads the file; its problems are usage errors.
func loadConfigFlag(e *env, fs *flag.FlagSet, usage string, args []string) (string, *config.Config, error) {
	path := fs.String("c", "", "configuration file")
	if _, err := parseFlags(e, fs, usage, args); err != nil {
		return "", nil, err
	}
	if *path == "" {
		return "", nil, usagef("-c FILE is required")
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return "", nil, usagef("%v", err)
	}
	return *path, cfg, nil
}

func runCheck(_ context.Context, e *env, args []string) error {
	path, cfg, err := loadConfigFlag(e, newFlagSet("check"), checkUsage, args)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	fmt.Fprintf(e.stdout, "%s: ok (%d broker(s), %d network connector(s))\n", path, len(cfg.Brokers), len(cfg.Connectors))
	return nil
}

func runRun(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("run")
	procs := registerProcs(fs)
	path, cfg, err := loadConfigFlag(e, fs, runUsage, args)
	if err != nil {
		return err
	}
	rt, err := chooseRuntime(*procs, os.Getenv)
	if err != nil {
		return err
	}
	log, err := newLogger(e.stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings {
		log.Warn().Msg(w)
	}
	applyRuntime(log, rt)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return serveFederation(ctx, log, cfg, func() (*config.Config, error) { return config.Load(path) }, hup)
}

// serveFederation runs cfg until ctx ends, reloading on every value from reload.
func serveFederation(ctx context.Context, log zerolog.Logger, cfg *config.Config, load func() (*config.Config, error), reload <-chan os.Signal) error {
	fed := netconnector.NewFederation(ctx, log)
	if err := startAdmin(ctx, cfg.Admin, func() []metrics.Bridge { return federationBridges(fed) }, log); err != nil {
		return err
	}
	started, _, _, err := fed.Apply(cfg)
	if err != nil {
		log.Error().Err(err).Msg("starting network connectors")
	}
	log.Info().Strs("connectors", started).Msg("federation running")
	for {
		select {
		case <-ctx.Done():
			log.Info().Msg("draining")
			fed.Wait()
			log.Info().Msg("stopped")
			return nil
		case <-reload:
			next, err := load()
			if err != nil {
				log.Error().Str("errors", err.Error()).Msg("reload refused: configuration invalid; keeping the running one")
				continue
			}
			started, restarted, stopped, err := fed.Apply(next)
			if err != nil {
				log.Error().Err(err).Msg("reload: some connectors did not start")
			}
			log.Info().Strs("started", started).Strs("restarted", restarted).Strs("stopped", stopped).Msg("configuration reloaded")
		}
	}
}

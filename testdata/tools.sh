#!/usr/bin/env bash
# Installs the tools the operations tests use besides the brokers (Debian
# packages): chromium (the topology page test renders /  in headless Chromium),
# systemd (systemd-analyze verifies deploy/systemd/brokernet.service) and
# strace (transport/endpoint's crash test slows a broker's fsyncs with it).
# Idempotent: does nothing when all are present. Needs root.
set -euo pipefail

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
command -v strace >/dev/null 2>&1 || need+=(strace)
if ((${#need[@]} == 0)); then
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${need[@]}"

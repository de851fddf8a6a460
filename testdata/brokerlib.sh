# brokerlib.sh: what activemq.sh and rabbitmq.sh share, sourced by both: a
# quiet Debian install that starts no service, keeping a system broker from
# running, and small process helpers. Each caller defines die().
# shellcheck shell=bash

# apt_install PKG...: apt-get update and install PKG... (no recommends) with
# output on stderr, keeping the packages' postinst from starting a service:
# policy-rc.d exit 101 makes invoke-rc.d / deb-systemd-invoke skip service
# starts. Dies if apt-get fails.
apt_install() {
	local policy=/usr/sbin/policy-rc.d created_policy=""
	if [[ ! -e "$policy" ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod +x "$policy"
		created_policy=1
	fi
	local rc=0
	{
		apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
	} >&2 || rc=$?
	if [[ -n "$created_policy" ]]; then
		rm -f "$policy"
	fi
	[[ $rc -eq 0 ]] || die "apt-get failed (exit $rc)"
}

# disable_service NAME PGREP-ARGS...: stops the system service NAME and keeps
# it from starting at boot (systemd or init.d), then SIGKILLs what
# `pgrep PGREP-ARGS...` finds of it. Tests must never see a stray system
# broker on the default ports.
disable_service() {
	local name="$1" p
	shift
	if command -v systemctl >/dev/null 2>&1; then
		systemctl disable --now "$name.service" >/dev/null 2>&1 || true
	fi
	if [[ -x "/etc/init.d/$name" ]]; then
		"/etc/init.d/$name" stop >/dev/null 2>&1 || true
		if command -v update-rc.d >/dev/null 2>&1; then
			update-rc.d "$name" disable >/dev/null 2>&1 || true
		fi
	fi
	for p in $(pgrep "$@" 2>/dev/null || true); do
		kill -KILL "$p" 2>/dev/null || true
	done
}

# port_open PORT: true if 127.0.0.1:PORT accepts a connection.
port_open() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# abs_path DIR: creates DIR and prints its absolute path, symlinks resolved.
abs_path() {
	mkdir -p "$1"
	(cd "$1" && pwd -P)
}

# read_pidfile FILE: prints the pid in FILE, nothing when there is none.
read_pidfile() {
	[[ -f "$1" ]] || return 0
	tr -dc '0-9' <"$1"
}

# parse_dir_args DEFAULT-TIMEOUT ARGS...: reads --dir DIR (required; made
# absolute, symlinks resolved, when it exists) and --timeout SECONDS (default
# DEFAULT-TIMEOUT) into DIR and TIMEOUT, and what follows "--" into REST.
parse_dir_args() {
	DIR="" TIMEOUT="$1"
	REST=()
	shift
	while [[ $# -gt 0 ]]; do
		case "$1" in
		--dir) DIR="$2"; shift 2 ;;
		--timeout) TIMEOUT="$2"; shift 2 ;;
		--) shift; REST=("$@"); break ;;
		*) die "unknown argument $1" ;;
		esac
	done
	[[ -n "$DIR" ]] || die "--dir is required"
	if [[ -d "$DIR" ]]; then
		DIR="$(cd "$DIR" && pwd -P)"
	fi
}

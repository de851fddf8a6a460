#!/usr/bin/env bash
# Test-broker tooling: installs Debian's RabbitMQ 3.10 and runs throw-away
# nodes out of arbitrary directories, beside each other and beside (a stopped)
# system node, never on a default port.
#
#   rabbitmq.sh install
#   rabbitmq.sh start --dir DIR --name NODE --amqp-port P --stomp-port P
#                     --mgmt-port P --dist-port P --epmd-port P
#                     [--conf 'key = value' ...] [--no-wait] [--timeout 90]
#   rabbitmq.sh stop   --dir DIR [--timeout 30]
#   rabbitmq.sh kill   --dir DIR
#   rabbitmq.sh status --dir DIR      (exit 0 and print the pid if running)
#   rabbitmq.sh ctl    --dir DIR -- ARGS...   (rabbitmqctl against that node)
#
# See testdata/README.md.
set -euo pipefail

# shellcheck source=brokerlib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/brokerlib.sh"

RMQ_LIB="${RABBITMQ_LIB:-/usr/lib/rabbitmq}"
RMQ_SERVER="$RMQ_LIB/bin/rabbitmq-server"
RMQ_CTL="$RMQ_LIB/bin/rabbitmqctl"
APT_PACKAGES=(rabbitmq-server)
# rabbitmq_federation is enabled for the benchmark's federated-queue anchor.
PLUGINS="[rabbitmq_stomp,rabbitmq_amqp1_0,rabbitmq_event_exchange,rabbitmq_management,rabbitmq_federation]."

die() {
	echo "rabbitmq.sh: $*" >&2
	exit 1
}

# stop_system_node: the Debian package starts a node as user rabbitmq on the
# default ports (5672, 61613 with STOMP enabled, 25672, epmd 4369) and enables
# it at boot. Tests must never see it, so none runs and none starts at boot.
stop_system_node() {
	# The system node runs as user rabbitmq with its mnesia under /var/lib/rabbitmq.
	disable_service rabbitmq-server -u rabbitmq -f 'beam|epmd'
}

cmd_install() {
	if [[ -x "$RMQ_SERVER" ]] && ls -d "$(plugins_dir)"/rabbitmq_event_exchange-* >/dev/null 2>&1; then
		return 0
	fi
	echo "rabbitmq.sh: installing rabbitmq-server" >&2
	apt_install "${APT_PACKAGES[@]}"
	stop_system_node
	[[ -x "$RMQ_SERVER" ]] || die "still missing after install: $RMQ_SERVER"
}

plugins_dir() {
	local d
	for d in "$RMQ_LIB"/lib/rabbitmq_server-*/plugins; do
		echo "$d"
		return 0
	done
	echo "$RMQ_LIB/plugins"
}

# ---- process helpers -------------------------------------------------------

# running PID: true if PID exists and is not a zombie.
running() {
	local pid="$1" line state
	[[ -n "$pid" && -r "/proc/$pid/stat" ]] || return 1
	read -r line <"/proc/$pid/stat" 2>/dev/null || return 1
	state="${line##*) }"
	state="${state%% *}"
	[[ -n "$state" && "$state" != "Z" && "$state" != "X" ]]
}

# group_alive PGID: true if any live process is in process group PGID (the
# node's shell wrapper, the Erlang VM and its helpers share it: setsid).
group_alive() {
	local pgid="$1" p
	[[ -n "$pgid" ]] || return 1
	for p in $(pgrep -g "$pgid" 2>/dev/null || true); do
		running "$p" && return 0
	done
	return 1
}

# alive PID DIR: true if PID is the live wrapper of the node in DIR (its
# environment carries RABBITMQ_MNESIA_BASE=DIR/mnesia: no stray signals after
# pid reuse).
alive() {
	running "$1" || return 1
	tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep -qxF -- "RABBITMQ_MNESIA_BASE=$2/mnesia"
}


log_tail() {
	local dir="$1" f
	for f in "$dir"/log/*.log "$dir/stdout.log"; do
		if [[ -s "$f" ]]; then
			echo "---- tail of $f ----" >&2
			tail -n 30 "$f" >&2 || true
		fi
	done
}

# wait_group_gone PGID SECONDS
wait_group_gone() {
	local pgid="$1" secs="$2"
	local deadline=$((SECONDS + secs))
	while group_alive "$pgid"; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# node_env DIR: exports the environment that makes the RabbitMQ scripts (server
# and CLI) use the node in DIR and nothing of the system installation.
node_env() {
	local dir="$1"
	# shellcheck disable=SC1091
	. "$dir/node.env"
	export HOME="$dir" \
		RABBITMQ_NODENAME="$NODE" \
		RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
		RABBITMQ_NODE_PORT="$AMQP_PORT" \
		RABBITMQ_DIST_PORT="$DIST_PORT" \
		ERL_EPMD_PORT="$EPMD_PORT" \
		ERL_EPMD_ADDRESS=127.0.0.1 \
		RABBITMQ_CONFIG_FILE="$dir/rabbitmq" \
		RABBITMQ_ADVANCED_CONFIG_FILE="$dir/advanced.config" \
		RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf" \
		RABBITMQ_MNESIA_BASE="$dir/mnesia" \
		RABBITMQ_LOG_BASE="$dir/log" \
		RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
		RABBITMQ_PID_FILE="$dir/beam.pid"
	# Two schedulers' worth of threads at most: the test machine is shared.
	export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+S 2:2 +A 8 +sbwt none +sbwtdcpu none +sbwtdio none"
}

cmd_start() {
	local dir="" name="" amqp="" stomp="" mgmt="" dist="" epmd="" nowait="" timeout=90
	local -a confs=()
	while [[ $# -gt 0 ]]; do
		case "$1" in
		--dir) dir="$2"; shift 2 ;;
		--name) name="$2"; shift 2 ;;
		--amqp-port) amqp="$2"; shift 2 ;;
		--stomp-port) stomp="$2"; shift 2 ;;
		--mgmt-port) mgmt="$2"; shift 2 ;;
		--dist-port) dist="$2"; shift 2 ;;
		--epmd-port) epmd="$2"; shift 2 ;;
		--conf) confs+=("$2"); shift 2 ;;
		--no-wait) nowait=1; shift ;;
		--timeout) timeout="$2"; shift 2 ;;
		*) die "start: unknown argument $1" ;;
		esac
	done
	[[ -n "$dir" ]] || die "start: --dir is required"
	[[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || die "start: --name must match [A-Za-z0-9_-]+ (got '$name')"
	local p
	for p in amqp stomp mgmt dist epmd; do
		[[ "${!p}" =~ ^[0-9]+$ ]] || die "start: --${p}-port is required (a number)"
	done
	# Default ports would collide with a system node or ActiveMQ (61613).
	for p in "$amqp" "$stomp" "$mgmt" "$dist" "$epmd"; do
		case "$p" in
		5672 | 5671 | 61613 | 61614 | 15672 | 25672 | 4369) die "start: port $p is a default port; pick a free one" ;;
		esac
	done
	[[ -x "$RMQ_SERVER" ]] || die "$RMQ_SERVER not found; run '$0 install' first"

	dir="$(abs_path "$dir")"
	local old
	old="$(read_pidfile "$dir/pid")"
	if alive "$old" "$dir"; then
		die "a node is already running in $dir (pid $old)"
	fi
	if group_alive "$old"; then
		wait_group_gone "$old" 15 || die "processes of the previous node in $dir do not exit (pgid $old)"
	fi
	local waited
	for p in "$amqp" "$stomp" "$mgmt" "$dist"; do
		waited=0
		while port_open "$p"; do
			((waited < 150)) || die "port $p on 127.0.0.1 is already in use"
			sleep 0.1
			waited=$((waited + 1))
		done
	done

	mkdir -p "$dir/mnesia" "$dir/log"
	cat >"$dir/node.env" <<EOF
NODE=$name@localhost
AMQP_PORT=$amqp
STOMP_PORT=$stomp
MGMT_PORT=$mgmt
DIST_PORT=$dist
EPMD_PORT=$epmd
EOF
	: >"$dir/rabbitmq-env.conf"
	printf '%s\n' "$PLUGINS" >"$dir/enabled_plugins"
	echo '[].' >"$dir/advanced.config"
	{
		echo "listeners.tcp.default = 127.0.0.1:$amqp"
		echo "stomp.listeners.tcp.1 = 127.0.0.1:$stomp"
		echo "management.tcp.ip = 127.0.0.1"
		echo "management.tcp.port = $mgmt"
		echo "log.file.level = info"
		echo "log.console = false"
		local c
		for c in "${confs[@]}"; do
			echo "$c"
		done
	} >"$dir/rabbitmq.conf"
	# Its own Erlang cookie (HOME=DIR): the CLI finds it there.
	if [[ ! -f "$dir/.erlang.cookie" ]]; then
		head -c 32 /dev/urandom | od -An -tx1 | tr -dc '0-9a-f' | head -c 20 >"$dir/.erlang.cookie"
		chmod 400 "$dir/.erlang.cookie"
	fi

	(
		node_env "$dir"
		# A private epmd on its own port: the node registers there, the CLI
		# looks there, and it dies with the node (kill/stop end it).
		if ! port_open "$EPMD_PORT"; then
			setsid nohup epmd -port "$EPMD_PORT" -address 127.0.0.1 </dev/null >>"$dir/epmd.log" 2>&1 &
			echo $! >"$dir/epmd.pid"
			local n=0
			while ! port_open "$EPMD_PORT"; do
				n=$((n + 1))
				((n < 100)) || die "epmd did not listen on $EPMD_PORT"
				sleep 0.05
			done
		fi
		echo "==== start $(date '+%F %T') ====" >>"$dir/stdout.log"
		# setsid: its own session and process group, so that kill reaches the
		# wrapper shell, the VM and its helpers at once, and signals to the
		# caller's group don't reach it. The wrapper turns SIGTERM into a clean
		# VM shutdown.
		setsid nohup "$RMQ_SERVER" </dev/null >>"$dir/stdout.log" 2>&1 &
		echo $! >"$dir/pid"
	)
	local pid
	pid="$(read_pidfile "$dir/pid")"
	# $! is the forked shell until setsid and nohup have exec'ed the wrapper;
	# only then does /proc/PID/environ show the node's environment (alive).
	# Callers must never see the process mid-exec.
	local n=0
	while ! alive "$pid" "$dir"; do
		if ! running "$pid"; then
			echo "rabbitmq.sh: node $name (pid $pid) died during start-up" >&2
			log_tail "$dir"
			kill_group "$dir"
			exit 1
		fi
		n=$((n + 1))
		((n < 200)) || die "pid $pid did not become the node wrapper of $dir"
		sleep 0.02
	done

	if [[ -z "$nowait" ]]; then
		local deadline=$((SECONDS + timeout))
		# The AMQP listener opens after the plugins (STOMP, management) have
		# started: all three open = node booted.
		while ! { port_open "$stomp" && port_open "$mgmt" && port_open "$amqp"; }; do
			if ! group_alive "$pid"; then
				echo "rabbitmq.sh: node $name (pid $pid) died during start-up" >&2
				log_tail "$dir"
				exit 1
			fi
			if ((SECONDS >= deadline)); then
				echo "rabbitmq.sh: node $name (pid $pid) not listening on $amqp/$stomp/$mgmt after ${timeout}s" >&2
				log_tail "$dir"
				kill_group "$dir"
				exit 1
			fi
			sleep 0.1
		done
	fi
	echo "$pid"
}

# kill_group DIR: SIGKILL to the node's process group and its epmd.
kill_group() {
	local dir="$1" pid epid
	pid="$(read_pidfile "$dir/pid")"
	if [[ -n "$pid" ]] && group_alive "$pid"; then
		kill -KILL -- "-$pid" 2>/dev/null || true
		wait_group_gone "$pid" 10 || die "processes of pgid $pid survive SIGKILL"
	fi
	stop_epmd "$dir"
	rm -f "$dir/pid"
}

stop_epmd() {
	local dir="$1" epid
	epid="$(read_pidfile "$dir/epmd.pid")"
	if [[ -n "$epid" ]] && running "$epid" &&
		[[ "$(tr '\0' ' ' <"/proc/$epid/cmdline" 2>/dev/null)" == *epmd* ]]; then
		kill -KILL "$epid" 2>/dev/null || true
	fi
	rm -f "$dir/epmd.pid"
}

cmd_stop() {
	parse_dir_args 30 "$@"
	[[ -d "$DIR" ]] || return 0
	local pid
	pid="$(read_pidfile "$DIR/pid")"
	if alive "$pid" "$DIR"; then
		kill -TERM "$pid" 2>/dev/null || true
		if ! wait_group_gone "$pid" "$TIMEOUT"; then
			echo "rabbitmq.sh: node in $DIR (pid $pid) did not stop in ${TIMEOUT}s, killing" >&2
		fi
	fi
	kill_group "$DIR"
}

cmd_kill() {
	parse_dir_args 30 "$@"
	[[ -d "$DIR" ]] || return 0
	kill_group "$DIR"
}

cmd_status() {
	parse_dir_args 30 "$@"
	local pid
	pid="$(read_pidfile "$DIR/pid")"
	if alive "$pid" "$DIR"; then
		echo "$pid"
		return 0
	fi
	return 1
}

cmd_ctl() {
	parse_dir_args 30 "$@"
	[[ -f "$DIR/node.env" ]] || die "no node in $DIR"
	node_env "$DIR"
	exec "$RMQ_CTL" -n "$NODE" "${REST[@]}"
}

[[ $# -ge 1 ]] || die "usage: $0 install|start|stop|kill|status|ctl ..."
cmd="$1"
shift
case "$cmd" in
install) cmd_install "$@" ;;
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
kill) cmd_kill "$@" ;;
status) cmd_status "$@" ;;
ctl) cmd_ctl "$@" ;;
*) die "unknown command $cmd" ;;
esac

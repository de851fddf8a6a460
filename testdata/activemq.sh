#!/usr/bin/env bash
# Test-broker tooling: installs Debian's ActiveMQ Classic 5.17 and runs
# throw-away broker instances out of arbitrary directories.
#
#   activemq.sh install
#   activemq.sh start --dir DIR --name NAME --id ID --stomp-port P --openwire-port P
#                     [--persistent] [--data-dir D] [--network-connector URI ...]
#                     [--network-ttl N] [--xmx 256m] [--no-wait] [--timeout 60]
#                     [--user NAME:PASSWORD ...] [--advisory-writers NAME,...]
#     --user turns on simpleAuthenticationPlugin with these users (group "users");
#     --advisory-writers adds an authorizationPlugin: users may use every queue and
#     read and create every topic, but only the named groups may write topics,
#     ActiveMQ.Advisory.> included
#                     [--stomp-options 'k=v&k=v'] [--openwire-options 'k=v&k=v']
#                     [--quick-jit] [--debian-defaults]
#                     [--network-attrs 'XML attributes'] [--network-xml 'XML']
#                     [--policy-entries '<policyEntry .../>...']
#                     [--broker-attrs 'XML attributes']
#     --broker-attrs adds attributes to <broker>, e.g. useVirtualDestSubs="true"
#     --network-attrs replaces the network connectors' duplex="false"; --network-xml
#     goes inside each <networkConnector>; --policy-entries fill a destinationPolicy
#     --debian-defaults runs the broker as Debian's package does: the JVM
#     options of /usr/share/activemq/activemq-options (-Xms512M -Xmx512M,
#     UseDedicatedTaskRunner=true, the JVM's default collector instead of
#     -XX:+UseSerialGC; --xmx is ignored), ActiveMQ's default systemUsage
#     (no limits of ours) and a plain KahaDB with --persistent. For benchmarks.
#     --quick-jit stops the JVM's compiler at C1 (-XX:TieredStopAtLevel=1): a
#     start costs 1.6 instead of 2.9 s of CPU here, and a short-lived test
#     broker never pays C2 for code it leaves soon. Not for benchmarks.
#   activemq.sh stop  --dir DIR [--timeout 20]
#   activemq.sh kill  --dir DIR
#   activemq.sh status --dir DIR      (exit 0 and print the pid if running)
#
# See testdata/README.md.
set -euo pipefail
# bash >= 5.2 expands '&' in ${var//pat/repl} to the match; we want it literal.
shopt -u patsub_replacement 2>/dev/null || true

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=brokerlib.sh
. "$SCRIPT_DIR/brokerlib.sh"
TEMPLATE="${ACTIVEMQ_TEMPLATE:-$SCRIPT_DIR/activemq.xml.tmpl}"
AMQ_HOME="${ACTIVEMQ_HOME:-/usr/share/activemq}"
AMQ_JAR="$AMQ_HOME/bin/activemq.jar"
JAVA="${JAVA:-java}"

# Jars needed for JSON/XML transformations over STOMP (advisories, map messages),
# looked for in /usr/share/java. Debian's xpp3.jar (libxpp3-java, a dependency of
# libxstream-java) already contains the org.xmlpull.v1 API, so a separate
# xmlpull.jar is linked only if one happens to be installed.
EXTRA_JARS=(xstream.jar jettison.jar xpp3.jar)
OPTIONAL_JARS=(xmlpull.jar)
APT_PACKAGES=(activemq libxstream-java libjettison-java libxpp3-java)

die() {
	echo "activemq.sh: $*" >&2
	exit 1
}

# find_jar NAME: prints the path of NAME in /usr/share/java (or a versioned variant).
find_jar() {
	local name="$1" base="${1%.jar}" f
	if [[ -e "/usr/share/java/$name" ]]; then
		echo "/usr/share/java/$name"
		return 0
	fi
	for f in /usr/share/java/"$base"-[0-9]*.jar; do
		if [[ -e "$f" ]]; then
			echo "$f"
			return 0
		fi
	done
	return 1
}

missing_bits() {
	local j
	[[ -f "$AMQ_JAR" ]] || echo "$AMQ_JAR"
	for j in "${EXTRA_JARS[@]}"; do
		find_jar "$j" >/dev/null || echo "$j"
	done
}

# stop_system_broker: the Debian package ships an init script / systemd unit for
# instances under /etc/activemq/instances-enabled. Tests must never see a stray
# broker on the default ports, so make sure none runs and none starts at boot.
stop_system_broker() {
	# Instances of the system package run as user "activemq" with a base under /var/lib/activemq.
	disable_service activemq -f -- '-Dactivemq.base=/var/lib/activemq'
}

cmd_install() {
	local missing
	missing="$(missing_bits)"
	if [[ -z "$missing" ]]; then
		return 0
	fi
	echo "activemq.sh: installing (missing: $(echo "$missing" | tr '\n' ' '))" >&2
	apt_install "${APT_PACKAGES[@]}"
	stop_system_broker
	missing="$(missing_bits)"
	[[ -z "$missing" ]] || die "still missing after install: $missing"
}

# ---- process helpers -------------------------------------------------------

# running PID: true if PID exists and is not a zombie (a zombie has closed its sockets).
running() {
	local pid="$1" state t
	[[ -n "$pid" && -r "/proc/$pid/stat" ]] || return 1
	# Every thread counts: after SIGKILL the JVM's main thread may already be a
	# zombie while others still tear down and hold the listening sockets.
	local line
	for t in /proc/"$pid"/task/*/stat; do
		read -r line <"$t" 2>/dev/null || continue
		state="${line##*) }"
		state="${state%% *}"
		if [[ -n "$state" && "$state" != "Z" && "$state" != "X" ]]; then
			return 0
		fi
	done
	return 1
}

# alive PID DIR: true if PID is a running process of the instance in DIR
# (its command line carries -Dactivemq.base=DIR).
alive() {
	running "$1" || return 1
	tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qxF -- "-Dactivemq.base=$2"
}

# exiting PID: running, but with an empty command line: the JVM is being torn
# down (its memory is already gone, its sockets may not be closed yet).
exiting() {
	running "$1" || return 1
	[[ -z "$(tr -d '\0' <"/proc/$1/cmdline" 2>/dev/null)" ]]
}

read_pid() {
	read_pidfile "$1/pid"
}

xml_escape() {
	local s="$1"
	s="${s//&/&amp;}"
	s="${s//</&lt;}"
	s="${s//>/&gt;}"
	s="${s//\"/&quot;}"
	printf '%s' "$s"
}

log_tail() {
	local dir="$1" f
	for f in "$dir/activemq.log" "$dir/stdout.log"; do
		if [[ -s "$f" ]]; then
			echo "---- tail of $f (Java stack frames omitted) ----" >&2
			grep -v -E '^[[:space:]]+(at |\.\.\. [0-9]+ more)' "$f" | tail -n 30 >&2 || true
		fi
	done
}

cmd_start() {
	local dir="" name="" id="" stomp_port="" ow_port="" persistent=false data_dir=""
	local ttl=1 xmx=256m nowait="" timeout=60 stomp_opts="" ow_opts=""
	local -a ncs=() users=()
	local adv_writers="" quickjit="" debian="" nc_attrs="" nc_xml="" policy="" broker_attrs=""
	while [[ $# -gt 0 ]]; do
		case "$1" in
		--dir) dir="$2"; shift 2 ;;
		--name) name="$2"; shift 2 ;;
		--id) id="$2"; shift 2 ;;
		--stomp-port) stomp_port="$2"; shift 2 ;;
		--openwire-port) ow_port="$2"; shift 2 ;;
		--persistent) persistent=true; shift ;;
		--data-dir) data_dir="$2"; shift 2 ;;
		--network-connector) ncs+=("$2"); shift 2 ;;
		--network-ttl) ttl="$2"; shift 2 ;;
		--network-attrs) nc_attrs="$2"; shift 2 ;;
		--network-xml) nc_xml="$2"; shift 2 ;;
		--policy-entries) policy="$2"; shift 2 ;;
		--broker-attrs) broker_attrs="$2"; shift 2 ;;
		--user) users+=("$2"); shift 2 ;;
		--advisory-writers) adv_writers="$2"; shift 2 ;;
		--stomp-options) stomp_opts="$2"; shift 2 ;;
		--openwire-options) ow_opts="$2"; shift 2 ;;
		--xmx) xmx="$2"; shift 2 ;;
		--no-wait) nowait=1; shift ;;
		--timeout) timeout="$2"; shift 2 ;;
		--quick-jit) quickjit=1; shift ;;
		--debian-defaults) debian=1; shift ;;
		*) die "start: unknown argument $1" ;;
		esac
	done
	[[ -n "$dir" ]] || die "start: --dir is required"
	[[ -n "$name" ]] || die "start: --name is required"
	[[ "$stomp_port" =~ ^[0-9]+$ ]] || die "start: --stomp-port is required"
	[[ "$ow_port" =~ ^[0-9]+$ ]] || die "start: --openwire-port is required"
	[[ "$ttl" =~ ^-?[0-9]+$ ]] || die "start: bad --network-ttl $ttl"
	[[ -n "$id" ]] || id="$name"
	[[ -f "$AMQ_JAR" ]] || die "$AMQ_JAR not found; run '$0 install' first"
	[[ -f "$TEMPLATE" ]] || die "template $TEMPLATE not found"

	dir="$(abs_path "$dir")"
	if [[ -z "$data_dir" ]]; then
		data_dir="$dir/data"
	fi
	data_dir="$(abs_path "$data_dir")"

	local old
	old="$(read_pid "$dir")"
	if alive "$old" "$dir"; then
		die "an instance is already running in $dir (pid $old)"
	fi
	if exiting "$old"; then
		wait_gone "$old" 10 || die "pid $old (previous instance) does not finish exiting"
	fi
	local p deadline
	for p in "$stomp_port" "$ow_port"; do
		# A broker of this instance that was just killed may still be closing its
		# sockets; give it 15 s before calling the port taken (by the clock: on a
		# loaded machine 150 rounds of connect and sleep 0.1 took over 30 s).
		deadline=$((SECONDS + 15))
		while port_open "$p"; do
			if ((SECONDS >= deadline)); then
				die "port $p on 127.0.0.1 is already in use"
			fi
			sleep 0.1
		done
	done

	mkdir -p "$dir/conf" "$dir/lib" "$dir/tmp"

	# Jars for JSON advisories / map messages over STOMP.
	local j path
	for j in "${EXTRA_JARS[@]}"; do
		path="$(find_jar "$j")" || die "$j not found in /usr/share/java; run '$0 install'"
		ln -sfn "$path" "$dir/lib/$j"
	done
	for j in "${OPTIONAL_JARS[@]}"; do
		if path="$(find_jar "$j")"; then
			ln -sfn "$path" "$dir/lib/$j"
		fi
	done

	# Network connectors.
	local ncxml="" i=0 uri
	if [[ ${#ncs[@]} -gt 0 ]]; then
		ncxml="<networkConnectors>"
		for uri in "${ncs[@]}"; do
			case "$uri" in
			static:* | masterslave:* | multicast:* | multicast6:* | simple:*) ;;
			*) uri="static:(${uri})?initialReconnectDelay=200&maxReconnectDelay=1000&useExponentialBackOff=false" ;;
			esac
			ncxml+=$'\n'"      <networkConnector name=\"nc${i}\" uri=\"$(xml_escape "$uri")\" networkTTL=\"${ttl}\" ${nc_attrs:-duplex=\"false\"}>${nc_xml}</networkConnector>"
			i=$((i + 1))
		done
		ncxml+=$'\n'"    </networkConnectors>"
	fi

	# Authentication and authorization.
	local auth="" u uname upass
	if [[ ${#users[@]} -gt 0 ]]; then
		auth="<simpleAuthenticationPlugin anonymousAccessAllowed=\"false\"><users>"
		for u in "${users[@]}"; do
			uname="${u%%:*}"
			upass="${u#*:}"
			auth+="<authenticationUser username=\"$(xml_escape "$uname")\" password=\"$(xml_escape "$upass")\" groups=\"users,$(xml_escape "$uname")\"/>"
		done
		auth+="</users></simpleAuthenticationPlugin>"
	fi
	if [[ -n "$adv_writers" ]]; then
		auth+="<authorizationPlugin><map><authorizationMap><authorizationEntries>"
		auth+="<authorizationEntry queue=\">\" read=\"users\" write=\"users\" admin=\"users\"/>"
		# ActiveMQ grants the union of every matching entry, so a write grant on
		# topic=">" would cover the advisory topics too: topics are writable only
		# by the advisory writers here (tests bridge queues).
		auth+="<authorizationEntry topic=\">\" read=\"users\" write=\"$(xml_escape "$adv_writers")\" admin=\"users\"/>"
		auth+="</authorizationEntries></authorizationMap></map></authorizationPlugin>"
	fi

	local persistence=""
	if [[ "$persistent" == true && -n "$debian" ]]; then
		persistence="<persistenceAdapter><kahaDB directory=\"$(xml_escape "$data_dir/kahadb")\"/></persistenceAdapter>"
	elif [[ "$persistent" == true ]]; then
		# Short lock retry interval: a shared-storage slave takes over ~1 s after the master dies.
		persistence="<persistenceAdapter>
      <kahaDB directory=\"$(xml_escape "$data_dir/kahadb")\" journalMaxFileLength=\"16mb\">
        <locker><shared-file-locker lockAcquireSleepInterval=\"500\"/></locker>
      </kahaDB>
    </persistenceAdapter>"
	fi

	local xml
	xml="$(<"$TEMPLATE")"
	xml="${xml//@BROKER_NAME@/$(xml_escape "$name")}"
	xml="${xml//@BROKER_ID@/$(xml_escape "$id")}"
	xml="${xml//@BROKER_ATTRS@/$broker_attrs}"
	xml="${xml//@PERSISTENT@/$persistent}"
	xml="${xml//@DATA_DIR@/$(xml_escape "$data_dir")}"
	xml="${xml//@TMP_DIR@/$(xml_escape "$dir/tmp")}"
	xml="${xml//@STOMP_PORT@/$stomp_port}"
	xml="${xml//@OPENWIRE_PORT@/$ow_port}"
	xml="${xml//@STOMP_OPTIONS@/${stomp_opts:+&amp;$(xml_escape "$stomp_opts")}}"
	xml="${xml//@OPENWIRE_OPTIONS@/${ow_opts:+&amp;$(xml_escape "$ow_opts")}}"
	xml="${xml//@PERSISTENCE_ADAPTER@/$persistence}"
	xml="${xml//@NETWORK_CONNECTORS@/$ncxml}"
	xml="${xml//@AUTH_PLUGINS@/$auth}"
	local policyxml=""
	if [[ -n "$policy" ]]; then
		policyxml="<destinationPolicy><policyMap><policyEntries>${policy}</policyEntries></policyMap></destinationPolicy>"
	fi
	xml="${xml//@DESTINATION_POLICY@/$policyxml}"
	local usage='<systemUsage>
      <systemUsage>
        <memoryUsage><memoryUsage limit="64 mb"/></memoryUsage>
        <storeUsage><storeUsage limit="1 gb"/></storeUsage>
        <tempUsage><tempUsage limit="1 gb"/></tempUsage>
      </systemUsage>
    </systemUsage>'
	if [[ -n "$debian" ]]; then
		usage=""
	fi
	xml="${xml//@SYSTEM_USAGE@/$usage}"
	printf '%s\n' "$xml" >"$dir/conf/activemq.xml"

	cat >"$dir/conf/log4j.properties" <<EOF
log4j.rootLogger=INFO, logfile
log4j.logger.org.apache.activemq.spring=WARN
log4j.logger.org.apache.activemq.web.handler=WARN
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
log4j.logger.org.apache.camel=WARN
log4j.appender.logfile=org.apache.log4j.FileAppender
log4j.appender.logfile.file=$dir/activemq.log
log4j.appender.logfile.append=true
log4j.appender.logfile.layout=org.apache.log4j.PatternLayout
log4j.appender.logfile.layout.ConversionPattern=%d{ISO8601} | %-5p | %m | %c | %t%n
EOF

	local -a jvm=("-Xmx${xmx}" -Xss512k -XX:+UseSerialGC)
	if [[ -n "$debian" ]]; then
		jvm=(-Xms512M -Xmx512M -Dorg.apache.activemq.UseDedicatedTaskRunner=true)
	fi
	jvm+=(
		-Xshare:auto
		-Djava.net.preferIPv4Stack=true
		-Djava.awt.headless=true
		"-Djava.io.tmpdir=$dir/tmp"
		"-Dactivemq.base=$dir"
		"-Dactivemq.home=$AMQ_HOME"
		"-Dactivemq.conf=$dir/conf"
		"-Dactivemq.data=$data_dir"
		"-Dlog4j.configuration=file:$dir/conf/log4j.properties"
	)
	if [[ -n "$quickjit" ]]; then
		jvm+=(-XX:TieredStopAtLevel=1)
	fi
	# Extra JVM options (e.g. for benchmarks); given last, so they win.
	if [[ -n "${ACTIVEMQ_JAVA_OPTS:-}" ]]; then
		local -a extra
		read -r -a extra <<<"$ACTIVEMQ_JAVA_OPTS"
		jvm+=("${extra[@]}")
	fi
	jvm+=(-jar "$AMQ_JAR" start "xbean:file:$dir/conf/activemq.xml")

	echo "==== start $(date '+%F %T') ====" >>"$dir/stdout.log"
	local pid
	# setsid: own session, so signals to the caller's process group don't reach it.
	setsid nohup "$JAVA" "${jvm[@]}" </dev/null >>"$dir/stdout.log" 2>&1 &
	pid=$!
	echo "$pid" >"$dir/pid"
	# $! is the forked shell until setsid and nohup have exec'ed the JVM; wait
	# for that, so that callers never look at the process mid-exec (its
	# command line reads empty then).
	local n=0
	while ! { [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */java ]] && alive "$pid" "$dir"; }; do
		if [[ ! -e "/proc/$pid" ]] || grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null; then
			echo "activemq.sh: broker $name (pid $pid) died during start-up" >&2
			log_tail "$dir"
			exit 1
		fi
		n=$((n + 1))
		((n < 200)) || die "pid $pid did not become the JVM of $dir"
		sleep 0.02
	done

	if [[ -z "$nowait" ]]; then
		local deadline=$((SECONDS + timeout))
		# Both connectors listening = broker started (a bind failure of the
		# second one would kill the JVM after the first one opened).
		while ! { port_open "$stomp_port" && port_open "$ow_port"; }; do
			if ! alive "$pid" "$dir"; then
				echo "activemq.sh: broker $name (pid $pid) died during start-up" >&2
				log_tail "$dir"
				exit 1
			fi
			if ((SECONDS >= deadline)); then
				echo "activemq.sh: broker $name (pid $pid) not listening on $stomp_port/$ow_port after ${timeout}s" >&2
				log_tail "$dir"
				kill -KILL "$pid" 2>/dev/null || true
				exit 1
			fi
			sleep 0.05
		done
		if ! alive "$pid" "$dir"; then
			echo "activemq.sh: broker $name (pid $pid) died during start-up" >&2
			log_tail "$dir"
			exit 1
		fi
	fi
	echo "$pid"
}

# wait_gone PID SECONDS: true once the process has exited (gone or zombie).
wait_gone() {
	local pid="$1" secs="$2"
	local deadline=$((SECONDS + secs))
	while running "$pid"; do
		((SECONDS < deadline)) || return 1
		sleep 0.05
	done
}

cmd_stop() {
	parse_dir_args 20 "$@"
	[[ -d "$DIR" ]] || return 0
	local pid
	pid="$(read_pid "$DIR")"
	if alive "$pid" "$DIR"; then
		kill -TERM "$pid" 2>/dev/null || true
		if ! wait_gone "$pid" "$TIMEOUT"; then
			echo "activemq.sh: pid $pid did not stop in ${TIMEOUT}s, killing" >&2
			kill -KILL "$pid" 2>/dev/null || true
			wait_gone "$pid" 10 || die "pid $pid survived SIGKILL"
		fi
	elif exiting "$pid"; then
		wait_gone "$pid" 10 || die "pid $pid does not finish exiting"
	fi
	rm -f "$DIR/pid"
}

cmd_kill() {
	parse_dir_args 20 "$@"
	[[ -d "$DIR" ]] || return 0
	local pid
	pid="$(read_pid "$DIR")"
	if alive "$pid" "$DIR"; then
		kill -KILL "$pid" 2>/dev/null || true
		wait_gone "$pid" 10 || die "pid $pid survived SIGKILL"
	elif exiting "$pid"; then
		wait_gone "$pid" 10 || die "pid $pid does not finish exiting"
	fi
	rm -f "$DIR/pid"
}

cmd_status() {
	parse_dir_args 20 "$@"
	local pid
	pid="$(read_pid "$DIR")"
	if alive "$pid" "$DIR"; then
		echo "$pid"
		return 0
	fi
	return 1
}

usage() {
	sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

[[ $# -ge 1 ]] || usage
sub="$1"
shift
case "$sub" in
install) cmd_install "$@" ;;
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
kill) cmd_kill "$@" ;;
status) cmd_status "$@" ;;
-h | --help | help) usage ;;
*) usage ;;
esac

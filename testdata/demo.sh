#!/usr/bin/env bash
# demo.sh: two local ActiveMQ brokers, a brokernet bridge between them, a consumer on
# the second broker and a producer on the first; shows the messages flowing and
# stops everything it started. Run through `make demo` (which installs and builds).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/bin/brokernet"
script="$root/testdata/activemq.sh"
count="${DEMO_COUNT:-1000}"
work="$(mktemp -d /tmp/brokernet-demo.XXXXXX)"
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	bash "$script" kill --dir "$work/A" >/dev/null 2>&1 || true
	bash "$script" kill --dir "$work/B" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 10000))
		if port_free "$p"; then echo "$p"; return; fi
	done
}

pa=$(free_port); oa=$(free_port); pb=$(free_port); ob=$(free_port)
echo "== starting ActiveMQ broker A (STOMP $pa) and B (STOMP $pb)"
bash "$script" start --dir "$work/A" --name A --id broker-A --stomp-port "$pa" --openwire-port "$oa" --persistent >/dev/null &
sa=$!
bash "$script" start --dir "$work/B" --name B --id broker-B --stomp-port "$pb" --openwire-port "$ob" --persistent >/dev/null
wait "$sa"

A="stomp://127.0.0.1:$pa"
B="stomp://127.0.0.1:$pb"
echo "== brokernet bridge $A $B"
"$bin" bridge "$A" "$B" 2>"$work/bridge.log" &
pids+=($!)

echo "== consumer on B: brokernet receive $B queue://demo.orders"
"$bin" receive --count "$count" --idle 20s "$B" queue://demo.orders >"$work/receive.log" &
recv=$!
pids+=($recv)

# The bridge creates demand on A once it sees the consumer on B.
for _ in $(seq 1 300); do
	grep -q "demand added" "$work/bridge.log" && break
	sleep 0.1
done
grep -q "demand added" "$work/bridge.log" || { echo "no demand seen; bridge log:"; cat "$work/bridge.log"; exit 1; }

echo "== producer on A: brokernet send --count $count --persistent $A queue://demo.orders"
"$bin" send --count "$count" --persistent "$A" queue://demo.orders

wait "$recv"
echo "== bridge log"
cat "$work/bridge.log"
echo "== consumer on B"
cat "$work/receive.log"
if grep -q "received $count messages" "$work/receive.log"; then
	echo "== OK: all $count messages sent to A were consumed on B through brokernet"
else
	echo "== FAILED: the consumer on B did not get all $count messages"
	exit 1
fi

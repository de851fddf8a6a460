# brokernet — see README.md.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/brokernet/brokernet/cmd/brokernet/internal/cli.Version=$(VERSION)

.PHONY: all build dist deps test unit bench soak demo fmt vet clean scale-sim scale-daemon scale

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/brokernet ./cmd/brokernet

# dist cross-builds static binaries (no cgo) with the version stamped, and
# their SHA256SUMS, into $(DIST)/.
DIST         ?= dist
DIST_TARGETS ?= linux/amd64 linux/arm64 darwin/arm64 windows/amd64
dist:
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for t in $(DIST_TARGETS); do \
		os=$${t%/*}; arch=$${t#*/}; ext=; [ $$os = windows ] && ext=.exe; \
		out=$(DIST)/brokernet-$(VERSION)-$$os-$$arch$$ext; \
		echo "building $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS) -s -w" -o $$out ./cmd/brokernet; \
	done
	cd $(DIST) && sha256sum brokernet-* > SHA256SUMS
	@cat $(DIST)/SHA256SUMS

# deps installs what the integration tests and the demo need (Debian packages):
# ActiveMQ, RabbitMQ, chromium and systemd-analyze for the operations tests, and
# strace for transport/endpoint's crash test.
deps:
	bash testdata/activemq.sh install
	bash testdata/rabbitmq.sh install
	bash testdata/tools.sh

# test runs every test: unit tests and integration tests against real brokers
# that the tests start themselves on free ports. On a 2-core machine the whole
# run took 7.5-15 min on clean clones (the machine's speed varies by the hour),
# of which the bridge package (its broker tests run two at a time, t.Parallel)
# 6.5-10.5; the timeout leaves room for a loaded machine.
test: deps vet
	$(GO) test -race -count=1 -timeout 40m ./...

# unit runs only the tests that need no broker.
unit:
	$(GO) test -race -count=1 -short ./...

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# bench compares brokernet with ActiveMQ's own networkConnector on this machine.
# Each benchmark runs every mode×path -bench.repeat times (default 3) in
# interleaved rounds and reports median and range; flags go in BENCHFLAGS after
# -args, e.g. BENCHFLAGS='-args -bench.repeat=5 -bench.paths=native,brokernet'
# (the full flag list heads internal/testkit/bench/bench_test.go).
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 120m ./internal/testkit/bench/ $(BENCHFLAGS)

# soak runs persistent streams for SOAK (default 30m), printing lost/duplicates and
# the bridge's RSS and goroutines (not part of test). SOAKMODE=chain (default): a
# chain of three brokers killed and restarted in turn, the consumer churning;
# SOAKMODE=isolation: a blocked destination, a frozen link and a consumer moving
# between two brokers.
# Short trial: make soak SOAK=2m SOAKFLAGS='-soak.restart 40s -soak.report 20s'
SOAK ?= 30m
SOAKMODE ?= chain
soak: deps
	$(GO) test -run '^TestSoak$$' -count=1 -v -timeout 0 ./internal/testkit/bench/ -soak $(SOAK) -soak.mode $(SOAKMODE) $(SOAKFLAGS)

# scale-sim simulates networks of 100, 300 and 1,000 brokers driving the real
# demand rules (internal/testkit/netsim) and writes the tables and plots of
# bench/SCALE.md (no broker; 34 min at load 25, under 1 GB). SCALESIMFLAGS="-n 20,50" for a
# try, SCALESIMFLAGS=-replot to redraw the plots from bench/scale/*.csv.
scale-sim:
	$(GO) run ./internal/testkit/netsim/cmd/scalesim -out bench $(SCALESIMFLAGS)

# scale-daemon measures one `brokernet run` process with 1, 10, 50 and 100
# connectors (RSS, goroutines, start-up, SIGHUP reload) against two ActiveMQ
# brokers, writing bench/scale/daemon.csv (not part of test).
scale-daemon: deps
	$(GO) test -run '^TestManyConnectors$$' -count=1 -v -timeout 60m ./internal/testkit/scale/ -scale.daemon -scale.out $(CURDIR)/bench/scale/daemon.csv $(SCALEFLAGS)

# scale starts SCALE_BROKERS (20) ActiveMQ brokers with 128 MiB heaps, one
# after the other, and for a ring, a random degree-3 graph and a gossip mesh of
# the first 8 a brokernet process next to each, measuring convergence, demand
# propagation 5 hops away, a route broker's SIGKILL under a stream (lost,
# duplicates), a sidecar's SIGKILL and the cost per daemon and bridge; writes
# bench/scale/network.csv (not part of test; 2.5 GB of RAM, 3 minutes on a quiet
# machine). Try small: make scale SCALE_BROKERS=6 SCALEFLAGS='-scale.mesh 4'
SCALE_BROKERS ?= 20
scale: deps
	$(GO) test -run '^TestNetwork$$' -count=1 -v -timeout 120m ./internal/testkit/scale/ -scale.network -scale.brokers $(SCALE_BROKERS) -scale.netout $(CURDIR)/bench/scale/network.csv $(SCALEFLAGS)

# demo starts two ActiveMQ brokers, a bridge, a consumer and a producer.
demo: deps build
	bash testdata/demo.sh

clean:
	rm -rf bin dist

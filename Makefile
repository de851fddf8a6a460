# brokernet — see README.md.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/brokernet/brokernet/internal/cli.Version=$(VERSION)

.PHONY: all build deps test unit bench demo fmt vet clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/brokernet ./cmd/brokernet

# deps installs what the integration tests and the demo need (Debian packages).
deps:
	bash testdata/activemq.sh install
	bash testdata/rabbitmq.sh install

# test runs every test: unit tests and integration tests against real brokers
# that the tests start themselves on free ports.
test: deps vet
	$(GO) test -race -count=1 -timeout 25m ./...

# unit runs only the tests that need no broker.
unit:
	$(GO) test -race -count=1 -short ./...

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# bench compares brokernet with ActiveMQ's own networkConnector on this machine.
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./bench/ $(BENCHFLAGS)

# demo starts two ActiveMQ brokers, a bridge, a consumer and a producer.
demo: deps build
	bash testdata/demo.sh

clean:
	rm -rf bin

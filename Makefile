.PHONY: test bench lint build loadtest

# The test command of README.md; .ci/run runs exactly this.
test:
	./scripts/test.sh

# Benchmarks with their raw baselines; figures go to docs/benchmarks.md.
bench:
	./scripts/bench.sh

# Bounded load test of the server on loopback (a few minutes; not part of test).
loadtest:
	./scripts/loadtest.sh

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1)
	go vet ./...
	cd store/etcd && go vet ./...

build:
	go build -o bin/baton ./cmd/baton

.PHONY: test soak bench bench-peers bench-peers-js bench-scale lint build chaos chaos-grants chaos-bugs loadtest

# The test command of README.md; .ci/run runs exactly this.
test:
	./scripts/test.sh

# The long variants of tests that make test runs smaller (TestSoak...: the same checks on more
# work, e.g. 2,000 jobs on 50 resources per store; skipped unless BATON_SOAK=1), then the fault
# harness for SOAK_DURATION per test. Not part of test: about half an hour with the defaults.
SOAK_DURATION ?= 5m
soak:
	BATON_TEST_POSTGRES_DSN="$${BATON_TEST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}" \
		BATON_SOAK=1 go test -race -count=1 -timeout 0 -run Soak -v ./...
	$(MAKE) chaos DURATION=$(SOAK_DURATION)

# Benchmarks with their raw baselines: SQLite, PostgreSQL and the server (peers: make
# bench-peers; DynamoDB and Kubernetes by hand, see docs/benchmarks.md). Today's figures go to
# docs/benchmarks.md, the dated record of how they changed to docs/benchmarks-history.md.
bench:
	./scripts/bench.sh

# Baton against its peers (bench/peers, its own module; it starts its own redis-server and
# embedded etcd, and runs River on the test PostgreSQL): the Redis, etcd, jobs and submit tables
# of docs/benchmarks.md. Minutes; best on an idle machine.
bench-peers:
	cd bench/peers && go test -run '^$$' -bench 'RedisCycle/(baton|sameWork|redislock|redsync)/|RedisHandoff16' -benchtime 20000x .
	cd bench/peers && go test -run '^$$' -bench 'EtcdCycle|EtcdHandoff16' -benchtime 4000x .
	cd bench/peers && go test -run '^$$' -bench 'RiverJobs' -benchtime 20000x .
	cd bench/peers && go test -run '^$$' -bench 'Submit.*VsRiver' -benchtime 16000x .

# Baton's jobs against Graphile Worker and pg-boss (Node.js, bench/peers/node, packages pinned by
# its package-lock.json and installed there by npm ci) on the test PostgreSQL: the "Against
# Graphile Worker and pg-boss" tables of docs/benchmarks.md. Skipped without node and npm. Tens of
# minutes (Graphile Worker's defaults and pg-boss are slow); best on an idle machine.
bench-peers-js:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "bench-peers-js: skipped: node and npm are needed (Graphile Worker and pg-boss run on Node.js)"; \
	else \
		cd bench/peers/node && npm ci --no-audit --no-fund --loglevel=error && cd .. && \
		go test -run '^$$' -bench 'JSJobs' -benchtime 20000x -timeout 3h . && \
		go test -run '^$$' -bench 'JSLatency' -benchtime 1x -timeout 1h . ; \
	fi

# Three `baton serve` processes (built from this tree) on one PostgreSQL schema, the Go client
# spread over 1, 2 and 3 of them alternating: lock cycles/s, jobs/s, and lock handoff within one
# replica and across replicas (bench/peers/scale_test.go). The "Several servers on one
# PostgreSQL" table of docs/benchmarks.md. About fifteen minutes.
bench-scale:
	cd bench/peers && go test -run '^$$' -bench 'ScaleLockCycle' -benchtime 3200x -timeout 30m .
	cd bench/peers && go test -run '^$$' -bench 'ScaleJobs' -benchtime 2000x -timeout 30m .
	cd bench/peers && go test -run '^$$' -bench 'ScaleHandoff' -benchtime 100x -timeout 30m .

# Bounded load test of the server on loopback (a few minutes; not part of test).
loadtest:
	./scripts/loadtest.sh

# gofmt, go vet, staticcheck and go mod tidy -diff over every module (make test runs it first).
lint:
	./scripts/lint.sh

# The revision is also passed by hand: Go embeds it only in a plain clone (not a git worktree),
# and not with -buildvcs=false.
build:
	go build -ldflags "-X github.com/batonhq/baton/internal/cli.revision=$$(git rev-parse HEAD 2>/dev/null)" -o bin/baton ./cmd/baton

# The fault harness (e2e/chaos) for DURATION per test and store (locks, jobs, replace jobs, runs and jobs beyond
# one key and in a tree, partitions, clocks and the storm of in-process clients over SQLite and PostgreSQL,
# three replicas over PostgreSQL, locks over Redis), printing each test's counts: make chaos DURATION=30m. (make test runs it
# until every kind of fault has been injected once.) BATON_CHAOS_RACE=1 builds baton with
# -race; BATON_CHAOS_BIN=path runs a baton binary built elsewhere.
DURATION ?= 5m
chaos:
	BATON_CHAOS_DURATION=$(DURATION) go test -count=1 -v -timeout 0 ./e2e/chaos/

# The fault harness's volume run (TestStormChaos) over SQLite and PostgreSQL, until GRANTS fenced
# grants per store, with every fault of the storm: make chaos-grants GRANTS=1000000.
GRANTS ?= 100000
chaos-grants:
	BATON_CHAOS_GRANTS=$(GRANTS) go test -count=1 -v -timeout 0 -run TestStormChaos ./e2e/chaos/

# The fault harness against builds with old bugs of baton run brought back (build tag chaosbug):
# the history check (check 9 in docs/guarantees.md) must fail on each. About 40 s.
chaos-bugs:
	BATON_CHAOS_BUGS=1 go test -count=1 -v -run TestChaosBugs ./e2e/chaos/

#!/usr/bin/env bash
# Runs the lease benchmarks of SQLite, PostgreSQL and the server, each next to its raw baseline
# in the same process, COUNT times, and summarises them with benchstat when it is installed
# (go install golang.org/x/perf/cmd/benchstat@latest). Figures go to docs/benchmarks.md. The
# DynamoDB and Kubernetes benchmarks need dynalite and a kube-apiserver; docs/benchmarks.md
# gives the commands that run them.
# This includes ListPrefix1M (List at 1M held leases against 1k), which loads 1M rows per run.
set -euo pipefail
cd "$(dirname "$0")/.."
export BATON_TEST_POSTGRES_DSN="${BATON_TEST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
COUNT="${COUNT:-6}"
BENCHTIME="${BENCHTIME:-2s}"
mkdir -p bench/results
out="bench/results/leases-$(date -u +%Y%m%dT%H%M%SZ).txt"
go test -run '^$' -bench . -benchtime "$BENCHTIME" -count "$COUNT" ./store/sqlite/ ./store/postgres/ ./server/ | tee "$out"
if command -v benchstat >/dev/null || [ -x "$(go env GOPATH)/bin/benchstat" ]; then
  PATH="$PATH:$(go env GOPATH)/bin" benchstat "$out"
fi

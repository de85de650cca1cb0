#!/usr/bin/env bash
# The lint of every module of the repository: gofmt, go vet, staticcheck (pinned below, run with
# `go run`, so nothing is installed) and `go mod tidy -diff`. Run by `make lint` and first by
# scripts/test.sh, so CI fails on any finding. Every module is listed here (e2e/scripts_test.go
# checks the list against the go.mod files), except store/kubernetes/testenv/*, which only pin
# the versions of kube-apiserver and etcd that scripts/k8s-testenv.sh builds.
#
# staticcheck runs its default checks; a finding that is intended is silenced where it occurs,
# with `//lint:ignore CHECK reason`.
set -euo pipefail
cd "$(dirname "$0")/.."

modules=(. store/etcd store/kubernetes store/dynamodb cmd/baton-full bench/peers e2e/dashboard deploy/helm)
staticcheck=honnef.co/go/tools/cmd/staticcheck@v0.8.2

status=0
fail() { echo "lint: $*" >&2; status=1; }

unformatted=$(gofmt -l $(git ls-files '*.go'))
[ -z "$unformatted" ] || fail "gofmt: these files need formatting: $unformatted"

for m in "${modules[@]}"; do
  echo "-- $m"
  (cd "$m" && go mod tidy -diff) || fail "$m/go.mod is not tidy: run (cd $m && go mod tidy)"
  (cd "$m" && go vet ./...) || fail "go vet found problems in $m"
  (cd "$m" && go run "$staticcheck" ./...) || fail "staticcheck found problems in $m"
done
exit $status

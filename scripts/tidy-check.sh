#!/usr/bin/env bash
# Fails if any module's go.mod or go.sum is not tidy (`go mod tidy -diff`), printing the diff.
# Run by `make lint` and scripts/test.sh. Every module of the repository is listed here (a test,
# e2e/scripts_test.go, checks the list against the go.mod files), except
# store/kubernetes/testenv/*, which only pin the versions of kube-apiserver and etcd that
# scripts/k8s-testenv.sh builds.
set -euo pipefail
cd "$(dirname "$0")/.."

modules=(. store/etcd store/kubernetes store/dynamodb cmd/baton-full bench/peers e2e/dashboard)

status=0
for m in "${modules[@]}"; do
  if ! (cd "$m" && go mod tidy -diff); then
    echo "tidy-check: $m/go.mod is not tidy: run (cd $m && go mod tidy)" >&2
    status=1
  fi
done
exit $status

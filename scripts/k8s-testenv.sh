#!/usr/bin/env bash
# Builds the kube-apiserver and etcd that store/kubernetes's tests run against, once, from the
# recipes in store/kubernetes/testenv/ (Go module proxy only: no binary download), into a cache
# outside the work tree, and prints the folder holding both. A second run reuses the cache.
#   scripts/k8s-testenv.sh            -> builds if needed, prints the folder
# kube-apiserver takes ~15 minutes on 2 cores the first time; etcd ~1 minute.
# The cache key is the recipe's content (go.mod, go.sum, main.go), so a changed recipe rebuilds.
set -euo pipefail
cd "$(dirname "$0")/.."

recipes=store/kubernetes/testenv
version=v1.37.2
hash=$(cat "$recipes"/kube-apiserver/go.mod "$recipes"/kube-apiserver/go.sum "$recipes"/kube-apiserver/main.go \
  "$recipes"/etcd/go.mod "$recipes"/etcd/go.sum "$recipes"/etcd/main.go | sha256sum | cut -c1-12)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/baton/k8s-$version-$hash"
mkdir -p "$cache"

build() { # name
  local name=$1
  if [ -x "$cache/$name" ]; then return; fi
  echo "k8s-testenv.sh: building $name into $cache (once; kube-apiserver takes ~15 min on 2 cores)" >&2
  local start=$SECONDS
  (cd "$recipes/$name" && nice -n 10 go build -trimpath -o "$cache/$name.tmp" .)
  mv "$cache/$name.tmp" "$cache/$name" # only a finished build is ever seen as cached
  echo "k8s-testenv.sh: built $name in $((SECONDS - start)) s" >&2
}

# One build at a time: two concurrent runs (make test twice) wait for each other.
exec 9>"$cache/.lock"
flock 9
build etcd
build kube-apiserver
echo "$cache"

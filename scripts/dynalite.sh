#!/usr/bin/env bash
# Installs dynalite (a DynamoDB-compatible server on LevelDB, npm package 4.x) with the machine's
# npm into a cache outside the work tree, idempotently, and prints the path of its executable.
# store/dynamodb's tests start it themselves (on a free loopback port, with a data directory of
# their own) from BATON_DYNALITE, which scripts/test.sh sets to the path printed here.
set -euo pipefail
dir="${XDG_CACHE_HOME:-$HOME/.cache}/baton/dynalite"
bin="$dir/node_modules/.bin/dynalite"
if [ ! -x "$bin" ]; then
  command -v npm >/dev/null || { echo "dynalite.sh: npm is not installed" >&2; exit 1; }
  mkdir -p "$dir"
  echo "dynalite.sh: installing dynalite@4 into $dir" >&2
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --prefix "$dir" dynalite@4 >&2)
fi
[ -x "$bin" ] || { echo "dynalite.sh: $bin missing after install" >&2; exit 1; }
echo "$bin"

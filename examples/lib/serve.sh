# Shared by the examples' run.sh (source it after `set -euo pipefail`, from the repository root):
# a temporary directory $tmp removed on exit with every process recorded in $pids, `fail`,
# `waitfor`, and `start_server`, which builds baton from the checkout onto $PATH and starts
# `baton serve` on a free port with a SQLite store in $tmp.
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# fail MESSAGE: print it and every log in $tmp, and exit 1.
fail() {
	echo "FAIL: $*" >&2
	for f in "$tmp"/*.log; do
		[ -e "$f" ] || continue
		echo "--- $f" >&2
		cat "$f" >&2
	done
	exit 1
}

# waitfor DESCRIPTION COMMAND...: poll COMMAND until it succeeds, for up to 30 s.
waitfor() {
	local what=$1
	shift
	for _ in $(seq 300); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	fail "timed out waiting for $what"
}

# start_server [SERVE FLAGS...]: build baton, start `baton serve` on a free loopback port over
# $tmp/baton.db (log: $tmp/serve.log) and export BATON_SERVER.
start_server() {
	go build -o "$tmp/baton" ./cmd/baton
	export PATH="$tmp:$PATH"
	baton serve --listen 127.0.0.1:0 --store "sqlite://$tmp/baton.db" "$@" > "$tmp/serve.log" 2>&1 &
	pids+=($!)
	waitfor "the server" grep -q 'baton serving' "$tmp/serve.log"
	BATON_SERVER=$(sed -n 's/.*msg="baton serving" url=\([^ ]*\).*/\1/p' "$tmp/serve.log" | head -1)
	export BATON_SERVER
	echo "server: $BATON_SERVER"
}

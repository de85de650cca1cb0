#!/usr/bin/env bash
# A stand-in for `terraform apply` on one workspace: it reads the state, works for a while and
# writes the state back with a new serial. Two runs at once would lose one run's changes (the
# real failure the lock prevents), so it records an overlap if it ever sees one.
#
# Run it under `baton run --lock workspace/<name>`: it gets BATON_FENCING_TOKEN and refuses to
# write if the state was last written under a greater token (its lock was lost meanwhile).
# Environment: WORKSPACE_DIR (the "backend"), APPLY_SECONDS (how long the apply takes).
set -euo pipefail
dir=$WORKSPACE_DIR
if ! mkdir "$dir/.running" 2>/dev/null; then
	echo "overlap: token $BATON_FENCING_TOKEN started while another apply ran" >> "$dir/overlaps"
	exit 1
fi
trap 'rmdir "$dir/.running"' EXIT
serial=0 last_token=0
if [ -f "$dir/terraform.tfstate" ]; then read -r serial last_token < "$dir/terraform.tfstate"; fi
echo "apply: token $BATON_FENCING_TOKEN read serial $serial"
sleep "${APPLY_SECONDS:-1}"
if [ "$BATON_FENCING_TOKEN" -lt "$last_token" ]; then
	echo "apply: token $BATON_FENCING_TOKEN is older than the state's $last_token: not writing" >&2
	exit 76
fi
echo "$((serial + 1)) $BATON_FENCING_TOKEN" > "$dir/terraform.tfstate"
echo "token=$BATON_FENCING_TOKEN serial=$((serial + 1))" >> "$dir/applies.log"
echo "apply: token $BATON_FENCING_TOKEN wrote serial $((serial + 1))"

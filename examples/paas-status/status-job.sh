#!/usr/bin/env bash
# The status worker's command: `baton worker` runs it once per job, one job at a time per
# service (the job's resource), with the attempt's fencing token in BATON_FENCING_TOKEN.
#
#   status.reconcile  set the status the containers call for (the periodic job, every second)
#   status.deploy     DEPLOYING, start the container, RUNNING (submitted by the API on a deploy)
#   status.publish    show a status on the status page (page/<service>): latest wins
#
# $STATE_DIR/containers/<service> stands in for the container runtime: running, exited,
# restarting or absent. $STATE_DIR/status/<service> is the status record, written only after
# `baton fence check` accepted the token, and $STATE_DIR/status.log the history of writes.
set -euo pipefail
service=${BATON_RESOURCE#service/}

set_status() {
	# Refuse the write if a later job on this service has presented a greater token (this one
	# lost its lease, e.g. it was paused): exit 76, and the worker reports the attempt failed.
	baton fence check >/dev/null
	echo "$1" > "$STATE_DIR/status/$service"
	echo "token=$BATON_FENCING_TOKEN job=$BATON_JOB_ID kind=$BATON_JOB_KIND status=$1" >> "$STATE_DIR/status.log"
}

case "$BATON_JOB_KIND" in
status.reconcile)
	actual=$(cat "$STATE_DIR/containers/$service" 2>/dev/null || echo absent)
	case "$actual" in
	running) want=RUNNING ;;
	exited) want=STOPPED ;;
	restarting) want=CRASHING ;;
	*) want=IDLE ;;
	esac
	current=$(cat "$STATE_DIR/status/$service" 2>/dev/null || echo none)
	if [ "$current" != "$want" ]; then
		set_status "$want"
	fi
	;;
status.deploy)
	set_status DEPLOYING
	sleep 2 # build and start the container
	echo running > "$STATE_DIR/containers/$service"
	set_status RUNNING
	;;
status.publish)
	# Publish a status to the status page (slow: an external API). Only the newest matters:
	# the kind's policy replace supersedes the queued ones and stops a running one.
	page=${BATON_RESOURCE#page/}
	status=$(sed -n 's/.*"status": *"\([A-Z]*\)".*/\1/p')
	sleep 1
	baton fence check >/dev/null
	mkdir -p "$STATE_DIR/page"
	echo "$status" > "$STATE_DIR/page/$page"
	echo "token=$BATON_FENCING_TOKEN job=$BATON_JOB_ID status=$status" >> "$STATE_DIR/page.log"
	;;
*)
	echo "unknown kind $BATON_JOB_KIND" >&2
	exit 65 # permanent: no retry
	;;
esac

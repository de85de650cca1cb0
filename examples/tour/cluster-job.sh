#!/bin/sh
# The job command of the README tour (`baton worker ... -- ./examples/tour/cluster-job.sh`): a
# stand-in for a real create or destroy, it prints what it would do. The worker gives it the
# job's args (a JSON object) on stdin and BATON_JOB_KIND, BATON_RESOURCE and BATON_FENCING_TOKEN
# in its environment; a real job passes the token with every write to the resource, which
# refuses tokens lower than one it has seen (docs/fencing.md).
set -eu
args=$(cat)
echo "$BATON_JOB_KIND $BATON_RESOURCE with fencing token $BATON_FENCING_TOKEN: $args"

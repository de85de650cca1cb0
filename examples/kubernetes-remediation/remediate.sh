#!/bin/sh
# The remediation a `baton worker` runs for each job: here it only records what it did. A real
# one would cordon, drain and reboot $BATON_RESOURCE, passing $BATON_FENCING_TOKEN to whatever
# it writes. The job's arguments are on stdin.
echo "remediated $BATON_RESOURCE (job $BATON_JOB_ID, token $BATON_FENCING_TOKEN): $(cat)" >> "$REMEDIATIONS"

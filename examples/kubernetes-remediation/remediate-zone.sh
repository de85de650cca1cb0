#!/bin/sh
# One node's remediation under the zone's budget (`baton run --limit zone/...`): it marks the
# node as under remediation in $1 while it works, and records how many nodes of the zone were
# under remediation at its start, so that run.sh can check that the budget held.
dir=$1 node=$2
mkdir "$dir/$node"
echo "$node started with $(ls "$dir" | wc -l) under remediation (token $BATON_FENCING_TOKEN)" >> "$dir.log"
sleep 0.3 # the drain and reboot
rmdir "$dir/$node"

#!/bin/bash
# Benchmarks/scripts/cluster-vs-single.sh LABEL BINARY: docs/benchmarks.md's case B, a cluster of
# BINARY (scripts/cluster up: 3 nats-servers and 3 nodes, in /tmp/bench-cluster-LABEL) against a
# single node of BINARY with --fsync always, then the cluster down. Run from the repository.
set -u
label=$1 bin=$2
cd "$(dirname "$0")/../.."
dir=/tmp/bench-cluster-$label
export SNAPSYNC_CLUSTER_DIR=$dir SNAPSYNCD=$bin
out=$(scripts/cluster up 2>&1) || { echo "$out"; exit 1; }
nodes=$(echo "$out" | sed -n 's/^SNAPSYNC_NODES=//p')
natspids=$(python3 -c "import json;d=json.load(open('$dir/cluster.json'));print(','.join(str(s['pid']) for s in d['servers']))" 2>/dev/null)
echo "== $label $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) nodes=$nodes nats=$natspids"
Benchmarks/.build/release/snapsync-bench cluster --nodes "$nodes" ${natspids:+--also-pids $natspids} --start-single --server-binary "$bin" --fsync always --rooms 3 --in-flight ${IN_FLIGHT:-8} --repeat 1 2>&1 | tail -25
scripts/cluster down >/dev/null 2>&1

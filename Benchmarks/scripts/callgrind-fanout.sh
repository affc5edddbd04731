#!/usr/bin/env bash
# User-space instructions per delivery (or per write, with 1 subscriber) of a snapsyncd binary,
# counted with callgrind (docs/benchmarks.md, "Instructions"): the daemon runs under
# `valgrind --tool=callgrind` with --fsync no, `snapsync-bench fanout` drives it for D seconds,
# and the figure is (I(long) - I(short)) / (deliveries(long) - deliveries(short)), so start-up
# and connection set-up cancel out. Repeatable to a few parts per thousand whatever the load.
#
#   Benchmarks/scripts/callgrind-fanout.sh SNAPSYNCD SNAPSYNC-BENCH SUBSCRIBERS [PAYLOAD] [SHORT LONG]
#
# FANOUT_ARGS adds options to the fanout runs, e.g. FANOUT_ARGS="--protocol-version 3".
#
# Prints one line: subscribers, payload, instructions per delivery, and the two runs' figures.
set -euo pipefail
daemon=$1 bench=$2 subscribers=$3 payload=${4:-64} short=${5:-2} long=${6:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# valgrind gives up on the debug info of Swift release binaries: count a stripped copy.
strip -o "$work/snapsyncd" "$daemon"
daemon=$work/snapsyncd

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Runs the daemon under callgrind for one fanout run of $1 seconds; prints "instructions deliveries".
run() {
    local seconds=$1 port out pid deliveries
    port=$(free_port)
    out=$work/callgrind.$seconds
    valgrind --tool=callgrind --callgrind-out-file="$out" "$daemon" --port "$port" --fsync no \
        --data-dir "$work/data.$seconds" >"$work/daemon.$seconds.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do
        grep -q 'listening on' "$work/daemon.$seconds.log" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || { cat "$work/daemon.$seconds.log" >&2; exit 1; }
        sleep 0.1
    done
    # shellcheck disable=SC2086 # FANOUT_ARGS is a list of options
    "$bench" fanout --host 127.0.0.1 --port "$port" --subscribers "$subscribers" --payload "$payload" ${FANOUT_ARGS:-} \
        --mode throughput --duration "$seconds" --warmup 0.5 --no-pin --json >"$work/fanout.$seconds.json"
    kill -INT "$pid"
    wait "$pid" || true
    # Every publish reaches every subscriber: deliveries = messages x subscribers, counted over the
    # whole run (warm-up included), as the instructions are.
    deliveries=$(python3 -c '
import json, sys
row = json.loads(open(sys.argv[1]).read().splitlines()[-1])["snapsync"]["throughput"]
print(int(row["published"]) * int(sys.argv[2]))' "$work/fanout.$seconds.json" "$subscribers")
    echo "$(awk '/^summary:/ {print $2}' "$out") $deliveries"
}

read -r i1 d1 < <(run "$short")
read -r i2 d2 < <(run "$long")
python3 -c '
import sys
i1, d1, i2, d2 = map(int, sys.argv[1:5])
print(f"subscribers {sys.argv[5]} payload {sys.argv[6]}: {(i2 - i1) / (d2 - d1):.1f} instructions per delivery "
      f"(short: {i1} instructions, {d1} deliveries; long: {i2}, {d2})")' "$i1" "$d1" "$i2" "$d2" "$subscribers" "$payload"

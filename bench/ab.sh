#!/usr/bin/env bash
# Two Strand builds side by side: the same `strand bench` arguments against each, runs
# alternating which goes first, a fresh broker on a fresh data directory every run. For
# judging one change (copy target/release/strand before and after it).
#
#   bench/ab.sh OLD_BINARY NEW_BINARY RUNS [strand bench arguments...]
#   bench/ab.sh /tmp/strand-old target/release/strand 3 --rate 118400 --duration-secs 30
#   STRAND_SERVE_ARGS="--flush every-batch" bench/ab.sh old new 2 --acks all
#
# The client is NEW_BINARY's `strand bench` for both. Prints each run's throughput and
# latency lines and the broker's CPU seconds, labelled old/new.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,10p "$0"; exit 2; }
old=$1 new=$2 runs=$3
shift 3
port=${STRAND_AB_PORT:-19093}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

one_run() { # label binary
    local label=$1 binary=$2
    shift 2
    rm -rf "$work/data"
    # shellcheck disable=SC2086  # STRAND_SERVE_ARGS is a list of words
    "$binary" serve --listen "127.0.0.1:$port" --data-dir "$work/data" ${STRAND_SERVE_ARGS:-} \
        >"$work/broker.log" 2>&1 &
    local broker=$!
    for _ in $(seq 100); do
        grep -q "listening on" "$work/broker.log" && break
        sleep 0.1
    done
    grep -q "listening on" "$work/broker.log" || { cat "$work/broker.log"; exit 1; }
    sync
    sleep 1
    local report
    report=$("$new" bench --bootstrap "127.0.0.1:$port" --topic ab --quiet "$@" 2>&1 |
        grep -E "produced|consumed|latency" | tr -s ' ' | tr '\n' ';')
    # The broker's CPU time over the run (user + system), less noisy than throughput.
    local ticks cpu
    ticks=$(awk '{print $14 + $15}' "/proc/$broker/stat")
    cpu=$(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}')
    echo "$label: $report broker cpu ${cpu} s;"
    kill "$broker"
    wait "$broker" 2>/dev/null || true
}

for run in $(seq "$runs"); do
    if [ $((run % 2)) -eq 1 ]; then
        one_run old "$old" "$@"
        one_run new "$new" "$@"
    else
        one_run new "$new" "$@"
        one_run old "$old" "$@"
    fi
done

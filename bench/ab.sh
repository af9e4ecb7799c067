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
# latency lines and the broker's CPU seconds (all, and user alone), labelled old/new, then
# the medians of each side and their new/old ratios.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,12p "$0"; exit 2; }
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
    # Its user part alone too: a change to Strand's own code (an optimization setting, say)
    # shows there, apart from the kernel's share, which the page cache's state sways.
    local cpu user
    read -r cpu user < <(awk -v hz="$(getconf CLK_TCK)" \
        '{printf "%.2f %.2f\n", ($14 + $15) / hz, $14 / hz}' "/proc/$broker/stat")
    echo "$label: $report broker cpu ${cpu} s; broker user cpu ${user} s;" | tee -a "$work/runs"
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

# Medians over the runs, and new/old ratios: produce throughput, and the broker's CPU (all
# and user) per million records produced.
python3 - "$work/runs" <<'PYTHON'
import re, statistics, sys
runs = {"old": [], "new": []}
for line in open(sys.argv[1]):
    m = re.match(r"(old|new): produced (\d+) records.*?([\d.]+) MB/s;.*broker cpu ([\d.]+) s; "
                 r"broker user cpu ([\d.]+) s", line)
    if m:
        records = int(m[2]) / 1e6
        runs[m[1]].append((float(m[3]), float(m[4]) / records, float(m[5]) / records))
if runs["old"] and runs["new"]:
    medians = {k: [statistics.median(r[i] for r in v) for i in range(3)] for k, v in runs.items()}
    for label, i in (("produce MB/s", 0), ("broker cpu s per M records", 1),
                     ("broker user cpu s per M records", 2)):
        old, new = medians["old"][i], medians["new"][i]
        print(f"median {label}: old {old:.3f}, new {new:.3f}, new/old {new / old:.3f}")
PYTHON

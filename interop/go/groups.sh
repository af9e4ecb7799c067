#!/usr/bin/env bash
# Consumer groups with franz-go (kgo.ConsumerGroup, classic protocol): builds
# interop/go/groups and runs it against a broker of its own, started by
# interop/python/group_brokers.py on a free loopback port in a temp dir (Strand, with
# group_initial_rebalance_delay_ms = 0), which stops the broker afterwards and requires a
# clean exit. `interop/go/groups.sh --kafka` runs the same against Apache Kafka 4.4.0.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
(cd "$here" && go build -o "$build/groups" ./groups)
exec python3 "$here/../python/group_brokers.py" --timeout 300 "$@" -- "$build/groups"

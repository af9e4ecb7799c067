#!/usr/bin/env bash
# Runs the Sarama interop driver against a running broker, once per Sarama config.Version
# (Sarama picks every request version from it): the newest version Sarama knows
# (sarama.MaxVersion) and 2.1.0. `run.sh 3.6.0 max` runs the named versions instead.
# STRAND_BOOTSTRAP (default 127.0.0.1:9092) names the broker.
set -euo pipefail
cd "$(dirname "$0")"
export STRAND_BOOTSTRAP="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
go build -o "$build/sarama-driver" .
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(max 2.1.0)
for v in "${versions[@]}"; do
  echo "--- sarama -version $v"
  "$build/sarama-driver" -version "$v"
done

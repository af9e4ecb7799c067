#!/usr/bin/env bash
# Runs the franz-go interop driver against a running Strand broker.
# STRAND_BOOTSTRAP (default 127.0.0.1:9092) names the broker.
set -euo pipefail
cd "$(dirname "$0")"
export STRAND_BOOTSTRAP="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"
exec go run . "$@"

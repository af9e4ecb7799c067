#!/usr/bin/env bash
# Runs the KafkaJS interop driver (driver.js) against a running broker.
# STRAND_BOOTSTRAP (default 127.0.0.1:9092) names the broker. Installs the pinned
# packages (package-lock.json, npm ci) on first use.
set -euo pipefail
cd "$(dirname "$0")"
export STRAND_BOOTSTRAP="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"
./install.sh
exec node driver.js "$@"

#!/usr/bin/env bash
# Installs the KafkaJS driver's pinned packages (package-lock.json, npm ci) unless they are
# there. interop/run.sh runs it before its drivers run two at a time: two npm ci at once
# in one directory would race.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -d node_modules/kafkajs ] || [ ! -d node_modules/kafkajs-snappy ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

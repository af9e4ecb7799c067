#!/usr/bin/env bash
# End-to-end check of the Kafka reference-broker scripts: fetch the jars, start Kafka
# (run-kafka.sh: 4.4.0, or the release STRAND_KAFKA_VERSION names) in a temp dir, create
# a topic, produce 3 lines with the console producer, read them back with the console
# consumer, then stop the broker and remove the temp dir.
# Exits non-zero on any mismatch; leaves nothing running.
#
# Usage: interop/kafka/smoke.sh [port]     (default 19092; the controller uses port+1000)
#        KEEP=1 keeps the temp dir (server.log etc.) for inspection.
set -euo pipefail

port=${1:-19092}
here="$(cd "$(dirname "$0")" && pwd)"
libs="$("$here/fetch.sh" | tail -n 1)"
version=""
for jar in "$libs"/kafka-clients-*.jar; do version=${jar##*/kafka-clients-}; version=${version%.jar}; done

dir="$(mktemp -d "${TMPDIR:-/tmp}/strand-kafka-smoke.XXXXXX")"
kpid=""
cleanup() {
  if [ -n "$kpid" ] && kill -0 "$kpid" 2>/dev/null; then
    kill "$kpid" 2>/dev/null || true
    wait "$kpid" 2>/dev/null || true
  fi
  if [ "${KEEP:-0}" = 1 ]; then echo "smoke.sh: kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT

"$here/run-kafka.sh" "$dir/data" "$port" >"$dir/kafka.out" 2>&1 &
kpid=$!
for _ in $(seq 1 120); do
  if ! kill -0 "$kpid" 2>/dev/null; then
    echo "smoke.sh: Kafka exited during startup:" >&2
    cat "$dir/kafka.out" >&2
    exit 1
  fi
  grep -q 'Kafka Server started' "$dir/data/server.log" 2>/dev/null && break
  sleep 0.5
done
grep -q 'Kafka Server started' "$dir/data/server.log" || { echo "smoke.sh: Kafka did not start in 60s" >&2; exit 1; }

bs="127.0.0.1:$port"
cli="$here/kafka-cli.sh"
timeout 60 "$cli" kafka-topics --bootstrap-server "$bs" --create --topic smoke --partitions 1 --replication-factor 1
printf 'one\ntwo\nthree\n' | timeout 60 "$cli" kafka-console-producer --bootstrap-server "$bs" --topic smoke
got="$(timeout 60 "$cli" kafka-console-consumer --bootstrap-server "$bs" --topic smoke \
  --from-beginning --max-messages 3 --timeout-ms 30000)"
if [ "$got" != "$(printf 'one\ntwo\nthree')" ]; then
  echo "smoke.sh: consumed '$got', expected one/two/three" >&2
  exit 1
fi
echo "smoke.sh: OK (Kafka $version on $bs: topic created, 3 records produced and consumed)"

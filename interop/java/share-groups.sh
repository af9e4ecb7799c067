#!/usr/bin/env bash
# Share groups (KIP-932) with Apache Kafka's Java clients (kafka-clients 4.4.0) and
# Kafka's kafka-share-groups tool against a running broker (STRAND_BOOTSTRAP, default
# 127.0.0.1:9092; interop/run.sh java-share-groups starts one). Compiles
# interop/java/src/ShareGroupsDriver.java like run.sh does (jars from
# interop/kafka/fetch.sh), runs its sections (implicit explicit lock admin, or those
# named), then checks the tool's --list, --describe (members, offsets, state) and
# --delete on a group the driver leaves behind.
#
# Against Apache Kafka 4.4 for comparison: interop/kafka/run-kafka.sh DIR PORT &, then
# STRAND_BOOTSTRAP=127.0.0.1:PORT interop/java/share-groups.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export STRAND_BOOTSTRAP="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"
# Topic and group names of this run (a broker may have seen an earlier one).
export SHARE_RUN="${SHARE_RUN:--$(date +%s)}"
. "$here/lib.sh"

java_build share ShareGroupsDriver

# The driver has its own watchdog (280s); timeout is the backstop.
java_run 330 512m ShareGroupsDriver "$@"

# kafka-share-groups on the group the explicit section left (empty, nothing left to
# deliver: lag 0).
if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx explicit; then exit 0; fi
tool() { timeout 120 "$here/../kafka/kafka-cli.sh" kafka-share-groups --bootstrap-server "$STRAND_BOOTSTRAP" "$@"; }
fail() { echo "FAIL: kafka-share-groups $1"; echo "$2"; exit 1; }
group=share-explicit-group$SHARE_RUN
topic=share-explicit$SHARE_RUN
out=$(tool --list 2>&1) || fail "--list" "$out"
grep -qx "$group" <<<"$out" || fail "--list does not list $group" "$out"
echo "ok: kafka-share-groups --list"
out=$(tool --describe --group "$group" --offsets 2>&1) || fail "--describe --offsets" "$out"
# GROUP TOPIC PARTITION LEADER-EPOCH START-OFFSET LAG
awk -v g="$group" -v t="$topic" '$1 == g && $2 == t && $3 == 0 && $NF == 0 { found = 1 } END { exit !found }' <<<"$out" \
  || fail "--describe --offsets: no row with lag 0" "$out"
echo "ok: kafka-share-groups --describe --offsets"
out=$(tool --describe --group "$group" --state 2>&1) || fail "--describe --state" "$out"
grep -q "Empty" <<<"$out" || fail "--describe --state: not Empty" "$out"
echo "ok: kafka-share-groups --describe --state"
out=$(tool --describe --group "$group" --members 2>&1) || fail "--describe --members" "$out"
echo "ok: kafka-share-groups --describe --members"
out=$(tool --reset-offsets --group "$group" --topic "$topic" --to-earliest --execute 2>&1) \
  || fail "--reset-offsets --to-earliest" "$out"
out=$(tool --describe --group "$group" --offsets 2>&1) || fail "--describe --offsets" "$out"
awk -v g="$group" -v t="$topic" '$1 == g && $2 == t && $3 == 0 && $4 == 0 { found = 1 } END { exit !found }' <<<"$out" \
  || fail "--reset-offsets --to-earliest did not move the start offset to 0" "$out"
echo "ok: kafka-share-groups --reset-offsets --to-earliest"
out=$(tool --delete --group "$group" 2>&1) || fail "--delete" "$out"
out=$(tool --list 2>&1) || fail "--list" "$out"
if grep -qx "$group" <<<"$out"; then fail "--delete left the group" "$out"; fi
echo "ok: kafka-share-groups --delete"

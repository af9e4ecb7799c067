#!/usr/bin/env bash
# Streams groups (KIP-1071: Kafka Streams with group.protocol=streams, the broker's
# StreamsGroupHeartbeat 88 / StreamsGroupDescribe 89) with Kafka Streams 4.4.0, the Admin
# client and Kafka's kafka-streams-groups tool against a running broker (STRAND_BOOTSTRAP,
# default 127.0.0.1:9092; interop/run.sh java-streams-groups starts one). Compiles
# interop/java/src/StreamsGroupsDriver.java like share-groups.sh does (jars from
# interop/kafka/fetch.sh), runs it (a word count on two instances: counts, the internal
# topics the broker creates, describe, list, failover, committed offsets), then checks the
# tool's --list, --describe --state and --delete on the Empty group the driver leaves.
#
# Against Apache Kafka 4.4 for comparison: interop/kafka/run-kafka.sh DIR PORT &, then
# STRAND_BOOTSTRAP=127.0.0.1:PORT interop/java/streams-groups.sh. Kafka needs
# streams.version >= 1 finalized (a cluster formatted by 4.2 or later has it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export STRAND_BOOTSTRAP="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"
# Topic and group names of this run (a broker may have seen an earlier one).
export STREAMS_GROUPS_RUN="${STREAMS_GROUPS_RUN:--$(date +%s)}"
. "$here/lib.sh"

java_build streams-groups Checks StreamsGroupsDriver
cat >>"$build/log4j2.properties" <<'LOG'
# Its warnings about configs this driver leaves at their defaults (warm-up replicas, the
# global thread's exception handler) say nothing about the broker.
logger.config.name = org.apache.kafka.streams.StreamsConfig
logger.config.level = error
LOG

# The driver has its own watchdog (240s); timeout is the backstop. Streams' state dirs
# (one per instance) go under the build dir, removed on exit.
export STRAND_STREAMS_STATE_DIR="$build/state"
java_run 280 768m StreamsGroupsDriver

# kafka-streams-groups on the group the driver left (Empty: both instances left it).
tool() { timeout 120 "$here/../kafka/kafka-cli.sh" kafka-streams-groups --bootstrap-server "$STRAND_BOOTSTRAP" "$@"; }
fail() { echo "FAIL: kafka-streams-groups $1"; echo "$2"; exit 1; }
group=streams-groups-app$STREAMS_GROUPS_RUN
out=$(tool --list 2>&1) || fail "--list" "$out"
grep -qx "$group" <<<"$out" || fail "--list does not list $group" "$out"
echo "ok: kafka-streams-groups --list lists $group"
out=$(tool --describe --group "$group" --state 2>&1) || fail "--describe --state" "$out"
# GROUP COORDINATOR (ID) ASSIGNOR STATE #MEMBERS
awk -v g="$group" '$1 == g && tolower($(NF-1)) == "empty" && $NF == 0 { found = 1 } END { exit !found }' <<<"$out" \
  || fail "--describe --state: not Empty with 0 members" "$out"
echo "ok: kafka-streams-groups --describe --state: Empty, 0 members"
# Strand's own CLI describes a streams group too (StreamsGroupDescribe), with the offsets
# its application committed: the input's end, lag 0.
strand="${STRAND_BIN:-$here/../../target/release/strand}"
out=$(timeout 60 "$strand" group describe "$group" --bootstrap-server "$STRAND_BOOTSTRAP" --json 2>&1) \
  || fail "(strand group describe) failed" "$out"
python3 - "$group" "streams-groups-in$STREAMS_GROUPS_RUN" "$out" <<'PY' || fail "(strand group describe) is not the Empty streams group with lag 0" "$out"
import json, sys
group, topic, text = sys.argv[1], sys.argv[2], sys.argv[3]
described = json.loads(text)
d = described[0] if isinstance(described, list) else described
rows = [o for o in d["offsets"] if o["topic"] == topic]
assert d["group"] == group and d["type"] == "streams" and d["state"] == "Empty", d
assert sorted(o["partition"] for o in rows) == [0, 1, 2], rows
assert all(o["committed_offset"] == o["log_end_offset"] for o in rows), rows
PY
echo "ok: strand group describe: the Empty streams group, its input committed to the end"
out=$(tool --delete --group "$group" 2>&1) || fail "--delete" "$out"
grep -qF "Deletion of requested streams groups ('$group') was successful" <<<"$out" \
  || fail "--delete did not report success" "$out"
out=$(tool --list 2>&1) || fail "--list" "$out"
if grep -qx "$group" <<<"$out"; then fail "--delete left the group" "$out"; fi
echo "ok: kafka-streams-groups --delete removed $group (gone from --list)"
# StreamsGroupDescribe on the deleted group: GROUP_ID_NOT_FOUND, the tool exits 1.
if out=$(tool --describe --group "$group" --state 2>&1); then fail "--describe after --delete succeeded" "$out"; fi
grep -qF "GroupIdNotFoundException" <<<"$out" \
  || fail "--describe after --delete: not GroupIdNotFoundException" "$out"
echo "ok: kafka-streams-groups --describe after --delete: group not found"
# DeleteGroups leaves the internal topics (only --delete-all-internal-topics removes them).
out=$(timeout 120 "$here/../kafka/kafka-cli.sh" kafka-topics --bootstrap-server "$STRAND_BOOTSTRAP" --list 2>&1) \
  || { echo "FAIL: kafka-topics --list"; echo "$out"; exit 1; }
for t in "$group-counts-store-repartition" "$group-counts-store-changelog"; do
  grep -qx "$t" <<<"$out" || { echo "FAIL: --delete (without --delete-all-internal-topics) removed $t"; echo "$out"; exit 1; }
done
echo "ok: the internal topics outlive the group (DeleteGroups does not delete them)"

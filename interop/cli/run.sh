#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2034  # conditions are evaluated by verify(), see below
# Interop driver: Apache Kafka's own command-line tools (4.4.0, or the release
# STRAND_KAFKA_VERSION names; through interop/kafka/kafka-cli.sh) and kcat against a
# running Strand broker.
#
#   kafka-topics    --create (3 partitions, --config), --list, --describe, --alter
#                   --partitions 4 (and a refused shrink), --delete
#   kafka-configs   --describe, --alter --add-config / --delete-config, --describe --all;
#                   brokers: --entity-default / --entity-name 1, dynamic configs; groups
#   kafka-features  describe, downgrade / upgrade (--dry-run too), a refused upgrade
#   kafka-console-producer / kafka-console-consumer  keyed records with headers, read
#                   back partition by partition (--partition N --offset earliest: no groups)
#   kafka-get-offsets  end and earliest offsets
#   kafka-log-dirs  --describe (DescribeLogDirs): the topic's partitions and sizes
#   kafka-leader-election  PREFERRED for a partition and UNCLEAN for all: nothing to do
#                   on one broker
#   kafka-cluster   unregister --id of a broker never registered (UnregisterBroker): refused
#                   with Kafka's BrokerIdNotRegisteredException
#   kafka-dump-log  --print-data-log --deep-iteration on Strand's segment files
#   kafka-delete-records  --offset-json-file: the low watermark moves
#   kcat            -L metadata, -P with keys, headers and every codec (auto-creating
#                   its topic), -C -e -o beginning with a format string; records written
#                   by one tool are read back by the other
#
# Prints "ok: ..." per check; on the first failed one prints "FAIL: ..." with the command
# and its output and exits 1. Every command runs under `timeout`, and the whole run under
# a watchdog, so it never hangs. STRAND_BOOTSTRAP (default 127.0.0.1:9092) names the
# broker. Needs Java 17+ (the Kafka jars come from interop/kafka/fetch.sh) and kcat
# (apt-get install -y kcat).
set -uo pipefail

STEP_TIMEOUT=60
OVERALL_TIMEOUT=480

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
KAFKA_CLI="$root/interop/kafka/kafka-cli.sh"
B="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"

# Watchdog: run the checks in a child under `timeout`, report if it overstays.
if [ -z "${STRAND_CLI_DRIVER_CHILD:-}" ]; then
  export STRAND_CLI_DRIVER_CHILD=1
  status=0
  timeout -k 10 "$OVERALL_TIMEOUT" "$0" "$@" || status=$?
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "FAIL: watchdog: run exceeded ${OVERALL_TIMEOUT}s"
  fi
  exit "$status"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

ok() { echo "ok: $*"; }

# fail MESSAGE: print it with the last command and its output, exit 1.
fail() {
  echo "FAIL: $*"
  if [ -n "${last_cmd:-}" ]; then
    echo "  command: $last_cmd"
    echo "  exit status: $last_status"
    echo "  stdout:"; sed 's/^/    /' "$work/out" | tail -40
    echo "  stderr:"; sed 's/^/    /' "$work/err" | tail -40
  fi
  exit 1
}

# verify MESSAGE CONDITION: ok if the shell condition holds, else FAIL. The condition is
# single-quoted at the call and evaluated here (so shellcheck's SC2016, and SC2034 for the
# variables only used inside conditions, are disabled for the whole file above).
verify() {
  if eval "$2"; then ok "$1"; else fail "$1"; fi
}

# run_with_stdin FILE CMD...: run CMD with stdin from FILE under the step timeout,
# stdout to $work/out, stderr to $work/err; sets last_cmd and last_status. A timeout
# is a FAIL. run CMD... is the same with stdin from /dev/null.
run_with_stdin() {
  local input=$1; shift
  last_cmd="$*"
  last_status=0
  timeout -k 5 "$STEP_TIMEOUT" "$@" <"$input" >"$work/out" 2>"$work/err" || last_status=$?
  if [ "$last_status" -eq 124 ] || [ "$last_status" -eq 137 ]; then
    fail "timed out after ${STEP_TIMEOUT}s"
  fi
}
run() { run_with_stdin /dev/null "$@"; }
# must CMD...: run and require exit status 0.
must() {
  run "$@"
  [ "$last_status" -eq 0 ] || fail "exit status $last_status from ${1##*/} ${2:-}"
}
must_with_stdin() {
  run_with_stdin "$@"
  [ "$last_status" -eq 0 ] || fail "exit status $last_status from ${2##*/} ${3:-}"
}
kafka() { local tool=$1; shift; must "$KAFKA_CLI" "$tool" --bootstrap-server "$B" "$@"; }
out() { cat "$work/out"; }
has() { grep -qF -- "$1" "$work/out"; }   # stdout contains the fixed string

echo "Kafka CLI tools (interop/kafka/kafka-cli.sh) and kcat against $B"
command -v java >/dev/null || fail "java not found (JDK 17+ needed)"
command -v kcat >/dev/null || fail "kcat not found (apt-get install -y kcat)"
last_cmd="$root/interop/kafka/fetch.sh"
last_status=0
"$root/interop/kafka/fetch.sh" >"$work/out" 2>"$work/err" || { last_status=$?; fail "fetching the Kafka jars"; }
last_cmd=""
kcat_version="$(kcat -V 2>&1 | sed -n 's/^Version \([^ ]*\) .*librdkafka \([^ ]*\) .*/kcat \1, librdkafka \2/p')"
libs="$(tail -1 "$work/out")"
kafka_version=""
for jar in "$libs"/kafka-clients-*.jar; do kafka_version=${jar##*/kafka-clients-}; kafka_version=${kafka_version%.jar}; done
ok "${kcat_version:-kcat} found; Kafka $kafka_version jars in $libs"

# The console tools' option names: Kafka 4.4's (not 4.1's) have --formatter-property (the
# consumer), --reader-property and --command-property (the producer), and print a
# deprecation warning for the old --property / --producer-property on stdout, which would
# end up among the records read back. Use the names the tools on the classpath have.
# (--help prints the options on stderr and exits 1.)
help_has() { grep -qF -- "$1" "$work/err"; }
run "$KAFKA_CLI" kafka-console-consumer --help
help_has "--bootstrap-server" || fail "kafka-console-consumer --help lists no options"
if help_has "--formatter-property"; then formatter_prop=--formatter-property; else formatter_prop=--property; fi
run "$KAFKA_CLI" kafka-console-producer --help
help_has "--bootstrap-server" || fail "kafka-console-producer --help lists no options"
if help_has "--reader-property"; then reader_prop=--reader-property; else reader_prop=--property; fi
if help_has "--command-property"; then producer_prop=--command-property; else producer_prop=--producer-property; fi
ok "console tool options: $formatter_prop (consumer), $reader_prop and $producer_prop (producer)"

suffix="$(date +%s%N)"
T="cli-$suffix"     # created with kafka-topics
K="kcat-$suffix"    # auto-created by kcat's first produce

# ---- kafka-topics -----------------------------------------------------------------------

kafka kafka-topics --create --topic "$T" --partitions 3 --replication-factor 1 --config retention.ms=86400000
verify "kafka-topics --create $T (3 partitions, retention.ms=86400000)" 'has "Created topic $T."'

kafka kafka-topics --list
verify "kafka-topics --list shows $T" 'grep -qx -- "$T" "$work/out"'

# describe_ok N: the --describe output shows N partitions, each led by broker 1 with one
# replica in sync, the topic id and the retention.ms override.
describe_ok() {
  local n=$1 head
  head="$(head -1 "$work/out")"
  case "$head" in
    *"Topic: $T"*"TopicId: "*"PartitionCount: $n"*"ReplicationFactor: 1"*"retention.ms=86400000"*) ;;
    *) return 1 ;;
  esac
  case "$head" in *"TopicId: AAAAAAAAAAAAAAAAAAAAAA"*) return 1 ;; esac
  [ "$(grep -cP "^\tTopic: $T\tPartition: \d+\tLeader: 1\tReplicas: 1\tIsr: 1(\t|$)" "$work/out")" -eq "$n" ] || return 1
  for p in $(seq 0 $((n - 1))); do
    grep -qP "^\tTopic: $T\tPartition: $p\t" "$work/out" || return 1
  done
}
kafka kafka-topics --describe --topic "$T"
verify "kafka-topics --describe: PartitionCount: 3, every partition Leader: 1 Replicas: 1 Isr: 1, topic id, retention.ms" 'describe_ok 3'

kafka kafka-topics --alter --topic "$T" --partitions 4
kafka kafka-topics --describe --topic "$T"
verify "kafka-topics --alter --partitions 4: --describe shows PartitionCount: 4, partition 3 Leader: 1" 'describe_ok 4'

run "$KAFKA_CLI" kafka-topics --bootstrap-server "$B" --alter --topic "$T" --partitions 2
verify "kafka-topics --alter --partitions 2 (a shrink) refused with InvalidPartitionsException" \
  '[ "$last_status" -ne 0 ] && grep -q InvalidPartitionsException "$work/out" "$work/err"'

# ---- kafka-configs ----------------------------------------------------------------------

configs() { kafka kafka-configs --entity-type topics --entity-name "$T" "$@"; }

configs --describe
verify "kafka-configs --describe: retention.ms=86400000 (DYNAMIC_TOPIC_CONFIG)" \
  'has "  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000"'

configs --alter --add-config max.message.bytes=2000000,cleanup.policy=compact
verify "kafka-configs --alter --add-config max.message.bytes=2000000,cleanup.policy=compact" 'has "Completed updating config for topic $T."'
configs --describe
verify "kafka-configs --describe: max.message.bytes=2000000, cleanup.policy=compact, retention.ms=86400000" \
  '[ "$(grep -cE "^  (max\.message\.bytes=2000000|cleanup\.policy=compact|retention\.ms=86400000) " "$work/out")" -eq 3 ]'

configs --alter --delete-config retention.ms,cleanup.policy
verify "kafka-configs --alter --delete-config retention.ms,cleanup.policy" 'has "Completed updating config for topic $T."'
configs --describe
verify "kafka-configs --describe: only max.message.bytes=2000000 left" \
  '[ "$(grep -c "^  " "$work/out")" -eq 1 ] && has "  max.message.bytes=2000000 "'
configs --describe --all
verify "kafka-configs --describe --all: max.message.bytes=2000000, cleanup.policy=delete and retention.ms=604800000 (defaults back)" \
  '[ "$(grep -cE "^  (max\.message\.bytes=2000000|cleanup\.policy=delete|retention\.ms=604800000) " "$work/out")" -eq 3 ]'

# Dynamic broker configs: the cluster default and this broker's own, described with their
# sources; a start setting refused as Kafka refuses it.
bconfigs() { kafka kafka-configs --entity-type brokers "$@"; }
bconfigs --entity-default --alter --add-config leader.replication.throttled.rate=1000000
verify "kafka-configs --entity-type brokers --entity-default --add-config leader.replication.throttled.rate=1000000" \
  'has "Completed updating default config for brokers in the cluster."'
bconfigs --entity-name 1 --alter --add-config follower.replication.throttled.rate=2000
verify "kafka-configs --entity-type brokers --entity-name 1 --add-config follower.replication.throttled.rate=2000" \
  'has "Completed updating config for broker 1."'
bconfigs --entity-default --describe
verify "kafka-configs --entity-default --describe: leader.replication.throttled.rate=1000000 (DYNAMIC_DEFAULT_BROKER_CONFIG)" \
  'has "  leader.replication.throttled.rate=1000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:leader.replication.throttled.rate=1000000}"'
bconfigs --entity-name 1 --describe
verify "kafka-configs --entity-name 1 --describe: follower.replication.throttled.rate=2000 (DYNAMIC_BROKER_CONFIG)" \
  'has "  follower.replication.throttled.rate=2000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:follower.replication.throttled.rate=2000}"'
run "$KAFKA_CLI" kafka-configs --bootstrap-server "$B" --entity-type brokers --entity-name 1 --alter --add-config log.dirs=/elsewhere
verify "kafka-configs --add-config log.dirs=... refused: Cannot update these configs dynamically: [log.dirs]" \
  '[ "$last_status" -ne 0 ] && grep -qF "Cannot update these configs dynamically: [log.dirs]" "$work/out" "$work/err"'
# A topic default taken live: the topic (without its own value) shows it at once, with
# Kafka 4.4's synonyms (the same line Kafka's tool prints against Kafka 4.4.0).
bconfigs --entity-default --alter --add-config log.retention.bytes=7777777
verify "kafka-configs --entity-default --add-config log.retention.bytes=7777777 (a topic default, live)" \
  'has "Completed updating default config for brokers in the cluster."'
configs --describe --all
verify "kafka-configs --describe --all: retention.bytes=7777777 from DYNAMIC_DEFAULT_BROKER_CONFIG" \
  'has "  retention.bytes=7777777 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=7777777, DEFAULT_CONFIG:log.retention.bytes=-1}"'
bconfigs --entity-default --alter --delete-config log.retention.bytes
bconfigs --entity-default --alter --delete-config leader.replication.throttled.rate
bconfigs --entity-name 1 --alter --delete-config follower.replication.throttled.rate
bconfigs --entity-name 1 --describe
verify "kafka-configs --delete-config: no dynamic config left on broker 1" '! grep -q "^  " "$work/out"'

# Group configs (KIP-848): set, described as GROUP_CONFIG over the broker default, refused
# outside the broker's range, deleted.
gconfigs() { kafka kafka-configs --entity-type groups --entity-name "cli-group-$T" "$@"; }
gconfigs --alter --add-config consumer.heartbeat.interval.ms=6000
verify "kafka-configs --entity-type groups --add-config consumer.heartbeat.interval.ms=6000" \
  'has "Completed updating config for group cli-group-$T."'
gconfigs --describe
verify "kafka-configs --entity-type groups --describe: consumer.heartbeat.interval.ms=6000 (DYNAMIC_GROUP_CONFIG over the broker default)" \
  'has "  consumer.heartbeat.interval.ms=6000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=6000, DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}"'
run "$KAFKA_CLI" kafka-configs --bootstrap-server "$B" --entity-type groups --entity-name "cli-group-$T" --alter --add-config consumer.session.timeout.ms=1000
verify "kafka-configs groups consumer.session.timeout.ms=1000 refused: outside 45000 to 60000" \
  '[ "$last_status" -ne 0 ] && grep -qF "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive." "$work/out" "$work/err"'
gconfigs --alter --delete-config consumer.heartbeat.interval.ms
gconfigs --describe
verify "kafka-configs --entity-type groups --delete-config: nothing left set" '! grep -q "DYNAMIC_GROUP_CONFIG" "$work/out"'

# ---- kafka-features (ApiVersions' features, UpdateFeatures) ----------------------------

features() { kafka kafka-features "$@"; }
feature_is() {  # NAME LEVEL: describe shows the feature finalized at LEVEL
  grep -qE "^Feature: $1 +SupportedMinVersion: 0 +SupportedMaxVersion: [0-9]+ +FinalizedVersionLevel: $2 " "$work/out"
}
features describe
verify "kafka-features describe: group.version 1 and transaction.version 2 finalized (Kafka 4.4's defaults)" \
  'feature_is group.version 1 && feature_is transaction.version 2'
features downgrade --feature group.version=0
verify "kafka-features downgrade --feature group.version=0" 'has "group.version was downgraded to 0."'
features describe
verify "kafka-features describe: group.version finalized at 0" 'feature_is group.version 0'
features upgrade --feature group.version=1 --dry-run
verify "kafka-features upgrade --dry-run (validate_only)" 'has "group.version can be upgraded to 1."'
features upgrade --feature group.version=1
verify "kafka-features upgrade --feature group.version=1" 'has "group.version was upgraded to 1."'
run "$KAFKA_CLI" kafka-features --bootstrap-server "$B" upgrade --feature transaction.version=5
verify "kafka-features upgrade beyond the supported range refused with Kafka's message" \
  '[ "$last_status" -ne 0 ] && has "Local controller" && has "only supports versions 0-2"'
features describe
verify "kafka-features describe: back at group.version 1, transaction.version 2" \
  'feature_is group.version 1 && feature_is transaction.version 2'

# ---- console producer / get-offsets / console consumer ----------------------------------

# 10 keyed lines with two headers each; no partition given, so the producer's
# partitioner spreads them over the 4 partitions by key.
: >"$work/console.in"
: >"$work/console.want"
for i in $(seq 0 9); do
  printf 'src:console,n:%d\tck-%d:console-value-%d\n' "$i" "$i" "$i" >>"$work/console.in"
  printf 'src:console,n:%d\tck-%d\tconsole-value-%d\n' "$i" "$i" "$i" >>"$work/console.want"
done
must_with_stdin "$work/console.in" "$KAFKA_CLI" kafka-console-producer --bootstrap-server "$B" --topic "$T" \
  "$producer_prop" enable.idempotence=false "$producer_prop" acks=all \
  "$reader_prop" parse.key=true "$reader_prop" key.separator=: "$reader_prop" parse.headers=true
ok "kafka-console-producer: 10 keyed lines with headers to $T (partition chosen by key)"

kafka kafka-get-offsets --topic "$T"
out >"$work/end-offsets"
total=$(awk -F: '{ s += $3 } END { print s + 0 }' "$work/end-offsets")
verify "kafka-get-offsets: end offsets $(tr '\n' ' ' <"$work/end-offsets")(sum $total of 10)" \
  '[ "$(grep -cE "^$T:[0-3]:[0-9]+\$" "$work/end-offsets")" -eq 4 ] && [ "$total" -eq 10 ]'
kafka kafka-get-offsets --topic "$T" --time earliest
verify "kafka-get-offsets --time earliest: 0 on all 4 partitions" '[ "$(grep -cE "^$T:[0-3]:0\$" "$work/out")" -eq 4 ]'

kafka kafka-log-dirs --describe --topic-list "$T"
# The tool's last line is JSON: brokers -> logDirs -> partitions ("T-0", size, ...).
verify "kafka-log-dirs --describe: $T's 4 partitions in broker 1's log dir, holding the records" \
  'tail -1 "$work/out" | python3 -c "
import json, sys
d = json.load(sys.stdin)
dirs = [l for b in d[\"brokers\"] if b[\"broker\"] == 1 for l in b[\"logDirs\"]]
parts = [p for l in dirs if l[\"error\"] is None for p in l[\"partitions\"]]
names = sorted(p[\"partition\"] for p in parts)
assert names == [\"$T-%d\" % i for i in range(4)], names
assert sum(p[\"size\"] for p in parts) > 0, parts
"'

# Read every partition back with --partition/--offset earliest (no group), as many
# messages as kafka-get-offsets counted (--timeout-ms bounds the wait).
: >"$work/console.got"
for p in 0 1 2 3; do
  count=$(awk -F: -v p="$p" '$2 == p { print $3 }' "$work/end-offsets")
  if [ "$count" -gt 0 ]; then
    limit=(--max-messages "$count" --timeout-ms 20000)
  else
    limit=(--timeout-ms 3000)
  fi
  kafka kafka-console-consumer --topic "$T" --partition "$p" --offset earliest "${limit[@]}" \
    "$formatter_prop" print.key=true "$formatter_prop" print.headers=true "$formatter_prop" print.partition=true \
    "$formatter_prop" print.offset=true
  lines=$(grep -c '' "$work/out")
  # Partition:P  Offset:O  headers  key  value; offsets 0..count-1 in order, and the
  # headers' n increasing (the order the lines were produced in).
  offsets_ok=$(awk -F'\t' -v p="$p" '$1 != "Partition:" p || $2 != "Offset:" NR - 1 { bad = 1 } END { if (!bad) print "y" }' "$work/out")
  order_ok=$(awk -F'\t' '{ split($3, h, ","); n = substr(h[2], 3) + 0; if (NR > 1 && n <= prev) bad = 1; prev = n } END { if (!bad) print "y" }' "$work/out")
  verify "kafka-console-consumer --partition $p --offset earliest: $lines of $count records$([ "$count" -gt 0 ] && echo ", offsets 0..$((count - 1)) in produce order")" \
    '[ "$lines" -eq "$count" ] && [ "$offsets_ok" = y ] && [ "$order_ok" = y ] && grep -q "Processed a total of $count messages" "$work/err"'
  cut -f3- "$work/out" >>"$work/console.got"
done
sort "$work/console.want" >"$work/a"; sort "$work/console.got" >"$work/b"
last_cmd="diff (console producer input) (console consumer output)"
last_status=0
diff "$work/a" "$work/b" >"$work/out" 2>"$work/err" || last_status=$?
verify "kafka-console-consumer: the 10 records (key, value, headers) read back over all partitions match" '[ "$last_status" -eq 0 ]'

# ---- kcat ---------------------------------------------------------------------------------

must kcat -L -b "$B"
verify "kcat -L: 1 broker (1 at $B), $T with 4 partitions led by 1" \
  'has " 1 brokers:" && has "  broker 1 at $B" && has "topic \"$T\" with 4 partitions:" &&
   [ "$(grep -cE "^    partition [0-3], leader 1, replicas: 1, isrs: 1\$" "$work/out")" -ge 4 ]'

# Produce 4 records per codec to partition 0 of a topic that does not exist yet: the
# first produce auto-creates it (num.partitions=1).
: >"$work/kcat.want"
offset=0
for codec in none gzip snappy lz4 zstd; do
  : >"$work/kcat.in"
  for i in 0 1 2 3; do
    printf 'kk-%s-%d:kcat-value-%s-%d-%s\n' "$codec" "$i" "$codec" "$i" "$(printf 'y%.0s' $(seq 1 $((i * 50 + 1))))" >>"$work/kcat.in"
    printf '0\t%d\tkk-%s-%d\tkcat-value-%s-%d-%s\tcodec=%s,tool=kcat\n' "$offset" "$codec" "$i" "$codec" "$i" \
      "$(printf 'y%.0s' $(seq 1 $((i * 50 + 1))))" "$codec" >>"$work/kcat.want"
    offset=$((offset + 1))
  done
  must_with_stdin "$work/kcat.in" kcat -P -b "$B" -t "$K" -p 0 -K : -H "codec=$codec" -H tool=kcat -z "$codec" \
    -X enable.idempotence=false -X acks=all -X message.timeout.ms=30000
  ok "kcat -P -z $codec: 4 keyed records with 2 headers to $K partition 0"
done

must kcat -L -b "$B" -t "$K"
verify "kcat -L -t $K: auto-created with 1 partition led by 1" \
  'has "topic \"$K\" with 1 partitions:" && has "    partition 0, leader 1, replicas: 1, isrs: 1"'

must kcat -C -b "$B" -t "$K" -o beginning -e -q -f '%p\t%o\t%k\t%s\t%h\t%T\n'
cut -f1-5 "$work/out" >"$work/kcat.got"
ts_ok=$(awk -F'\t' '$6 < 1600000000000 { bad = 1 } END { if (!bad && NR > 0) print "y" }' "$work/out")
last_cmd="diff (kcat -P input) (kcat -C output)"
diff "$work/kcat.want" "$work/kcat.got" >"$work/out" 2>"$work/err" && last_status=0 || last_status=$?
verify "kcat -C -e -o beginning: 20 records read back in order with partition, offset, key, value, headers and a timestamp" \
  '[ "$last_status" -eq 0 ] && [ "$ts_ok" = y ]'

# Each tool reads what the other wrote: kcat the console producer's records...
must kcat -C -b "$B" -t "$T" -o beginning -e -q -f '%h\t%k\t%s\n'
sed 's/=/:/g' "$work/out" | sort >"$work/b"
sort "$work/console.want" >"$work/a"
last_cmd="diff (console producer input) (kcat -C output)"
diff "$work/a" "$work/b" >"$work/out" 2>"$work/err" && last_status=0 || last_status=$?
verify "kcat -C reads the console producer's 10 records (keys, values, headers)" '[ "$last_status" -eq 0 ]'

# ... and the console consumer kcat's compressed batches.
kafka kafka-console-consumer --topic "$K" --partition 0 --offset earliest --max-messages 20 --timeout-ms 20000 \
  "$formatter_prop" print.key=true "$formatter_prop" print.headers=true "$formatter_prop" print.partition=true \
    "$formatter_prop" print.offset=true
awk -F'\t' '{ sub("Partition:", "", $1); sub("Offset:", "", $2); gsub(":", "=", $3); print $1 "\t" $2 "\t" $4 "\t" $5 "\t" $3 }' \
  "$work/out" >"$work/kcat.got"
last_cmd="diff (kcat -P input) (kafka-console-consumer output)"
diff "$work/kcat.want" "$work/kcat.got" >"$work/out" 2>"$work/err" && last_status=0 || last_status=$?
verify "kafka-console-consumer reads kcat's 20 records (every codec) with keys, values, headers, offsets" '[ "$last_status" -eq 0 ]'

# ---- kafka-leader-election, kafka-dump-log, kafka-delete-records ------------------------

# One broker leads every partition as its only, preferred replica: nothing to elect.
kafka kafka-leader-election --election-type PREFERRED --topic "$T" --partition 0
verify "kafka-leader-election --election-type PREFERRED on one broker: already elected" \
  'has "Valid replica already elected for partitions $T-0"'
kafka kafka-leader-election --election-type UNCLEAN --all-topic-partitions
verify "kafka-leader-election --election-type UNCLEAN --all-topic-partitions: nothing to do, exit 0" \
  '! has "Error completing"'

run "$KAFKA_CLI" kafka-cluster unregister --bootstrap-server "$B" --id 99
verify "kafka-cluster unregister --id 99 (never registered): exit 1, BrokerIdNotRegisteredException" \
  '[ "$last_status" -eq 1 ] && grep -qF "BrokerIdNotRegisteredException: Broker ID 99 is not currently registered" "$work/err"'

# Strand's segment files are Kafka's format: Kafka's own dump tool reads them.
kafka kafka-log-dirs --describe --topic-list "$T"
log_dir=$(tail -1 "$work/out" | python3 -c "
import json, sys
d = json.load(sys.stdin)
print([l for b in d['brokers'] for l in b['logDirs'] if l['error'] is None][0]['logDir'])")
dumped=0
for p in 0 1 2 3; do
  segment="$log_dir/$T-$p/00000000000000000000.log"
  must "$KAFKA_CLI" kafka-dump-log --files "$segment" --print-data-log --deep-iteration
  count=$(awk -F: -v p="$p" '$2 == p { print $3 }' "$work/end-offsets")
  records=$(grep -c '| offset: ' "$work/out" || true)
  verify "kafka-dump-log $T-$p: $count records, offsets, keys and payloads" \
    '[ "$records" -eq "$count" ] && ! grep -qiE "corrupt|invalid|exception" "$work/out" && { [ "$count" -eq 0 ] || has "key: "; }'
  dumped=$((dumped + records))
done
verify "kafka-dump-log: the 10 records across the 4 segments" '[ "$dumped" -eq 10 ]'

# kafka-delete-records up to offset 1 of the fullest partition; the log start moves.
fullest=$(sort -t: -k3 -n "$work/end-offsets" | tail -1 | cut -d: -f2)
printf '{"version":1,"partitions":[{"topic":"%s","partition":%s,"offset":1}]}' "$T" "$fullest" >"$work/delete.json"
kafka kafka-delete-records --offset-json-file "$work/delete.json"
verify "kafka-delete-records: $T-$fullest low watermark 1" 'has "partition: $T-$fullest" && has "low_watermark: 1"'
kafka kafka-get-offsets --topic "$T" --time earliest
verify "kafka-get-offsets --time earliest after delete-records: $T-$fullest starts at 1" 'grep -qxF "$T:$fullest:1" "$work/out"'

# ---- kafka-topics --delete --------------------------------------------------------------

for topic in "$T" "$K"; do
  kafka kafka-topics --delete --topic "$topic"
  ok "kafka-topics --delete --topic $topic"
done
gone=""
for _ in 1 2 3 4 5; do
  kafka kafka-topics --list
  if ! grep -qxE -- "$T|$K" "$work/out"; then gone=y; break; fi
  sleep 1
done
verify "kafka-topics --list no longer shows $T or $K" '[ "$gone" = y ]'

echo "PASS Kafka CLI tools + kcat in $(( $(date +%s) - start ))s"

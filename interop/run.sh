#!/usr/bin/env bash
# Runs every interop driver against Strand with real Kafka clients, each against a fresh
# broker in its own temp directory, and the restart test. Exits non-zero on the first
# failing driver. Needs: python3 with confluent-kafka, kafka-python (+ python-snappy,
# zstandard, lz4); Go (franz-go, Sarama); Node.js + npm (KafkaJS); Java 17 + the Kafka jars
# (interop/kafka/fetch.sh); kcat.
# .ci/run installs them.
#
# Two lanes: while the drivers below run one after another, a second lane runs the
# drivers that start their own single broker on free ports and spend their time waiting
# on clients (security, acls, oauthbearer, the Java groups); its output follows once both
# lanes are done. The cluster drivers, the nemesis, the benchmarks and the drivers that
# measure rates (quotas, metrics, the console) then run alone. The end is a list of every driver's seconds (CI has 90 minutes in all).
#
#   interop/run.sh              all drivers
#   interop/run.sh confluent    only the named ones (confluent admin kafka-python transactions franz-go kafkajs sarama sarama-2.1 java java-4.1 java-transactions java-share-groups java-streams-groups streams-eos franz-go-kgo cli native-cli native-cli-kafka security acls quotas oauthbearer server-properties log-dirs metrics console tiered-storage restart transactions-restart kip848-restart corruption groups java-groups java-groups-kip848 franz-go-groups kafka-python-groups retention reference compare idempotence cluster-api cluster-prometheus cluster-secure cluster-quorum cluster-roles cluster-stall cluster-deposed-coordinator cluster-reassignment cluster-corruption cluster-bench cluster-clients cluster-static-members cluster-share-groups cluster-streams-groups cluster-transactions cluster-streams-eos cluster-franz-go-kgo cluster-metadata-replay cluster-tiered-storage cluster-nemesis cluster-nemesis-tiered cluster-nemesis-txn cluster-power-loss bench-smoke bench-probes)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p strand
BIN="$PWD/target/release/strand"
export STRAND_BIN="$BIN"

# Each driver's seconds, for the list at the end.
times=$(mktemp)
finished() { echo "$((SECONDS - $2)) $1" >>"$times"; }

# run_driver NAME COMMAND...: fresh broker, run the command with STRAND_BOOTSTRAP, stop
# the broker with SIGTERM and require a clean exit. The broker listens on port 0 and the
# drivers use the port it prints: every client then also checks that a broker whose port
# the OS picked advertises that port (Metadata), or its requests after bootstrap fail.
run_driver() {
  local name=$1; shift
  local dir port="" pid status=0 start=$SECONDS
  dir=$(mktemp -d)
  "$BIN" serve --listen "127.0.0.1:0" --data-dir "$dir/data" >"$dir/broker.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$dir/broker.log" | head -1)
    [ -n "$port" ] && break
    sleep 0.1
  done
  if [ -z "$port" ] || [ "$port" = 0 ]; then
    echo "--- $name: the broker did not report its port"; tail -50 "$dir/broker.log"; exit 1
  fi
  echo "=== $name (broker on 127.0.0.1:$port)"
  STRAND_BOOTSTRAP="127.0.0.1:$port" timeout 600 "$@" || status=$?
  kill -TERM "$pid" 2>/dev/null || true
  local exit_code=0
  wait "$pid" || exit_code=$?
  if [ "$status" -ne 0 ]; then
    echo "--- $name FAILED (status $status); broker log:"; tail -50 "$dir/broker.log"
    exit 1
  fi
  if [ "$exit_code" -ne 0 ]; then
    echo "--- broker did not stop cleanly after $name (exit $exit_code)"; tail -50 "$dir/broker.log"
    exit 1
  fi
  if grep -q "panicked" "$dir/broker.log"; then
    echo "--- broker panicked during $name"; grep -A5 panicked "$dir/broker.log"; exit 1
  fi
  rm -rf "$dir"
  finished "$name" "$start"
}

# run_own NAME TITLE COMMAND...: a driver that starts and stops its own brokers.
run_own() {
  local name=$1 title=$2 start=$SECONDS status=0
  shift 2
  echo "=== $name${title:+ ($title)}"
  "$@" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "--- $name FAILED (status $status)"
    exit 1
  fi
  finished "$name" "$start"
}

# in_dir DIR COMMAND...
in_dir() {
  local dir=$1
  shift
  (cd "$dir" && "$@")
}

wanted=("$@")
want() { [ ${#wanted[@]} -eq 0 ] || printf '%s\n' "${wanted[@]}" | grep -qx "$1"; }

# The second lane (above). Each of its drivers starts its brokers on free ports, so they
# run beside the first lane's. Brokers that name no HTTP address race for the default
# one (the loser only warns); no driver that runs beside the lane reads it.
second_lane() {
  if want security; then run_own security "PLAINTEXT, SSL with client certificates, SASL_PLAINTEXT and SASL_SSL with PLAIN and SCRAM, from one server.properties: librdkafka, kafka-python, franz-go, KafkaJS, Sarama, Kafka's Java tools" in_dir interop/python timeout 600 python3 security_test.py; fi
  if want acls; then run_own acls "StandardAuthorizer, super.users and ACLs in the metadata log: kafka-acls; librdkafka over PLAIN, SCRAM, OAUTHBEARER and client certificates, and kafka-python, allowed and refused with Kafka's codes" in_dir interop/python timeout 600 python3 acls_test.py; fi
  if want oauthbearer; then run_own oauthbearer "SASL/OAUTHBEARER, Kafka's unsecured validator and signed JWTs against a JWKS file: librdkafka, kafka-python, Kafka's Java tools" in_dir interop/python timeout 300 python3 oauthbearer_test.py; fi
  if want java-groups; then run_own java-groups "" timeout 900 interop/java/groups.sh; fi
  if want java-groups-kip848; then run_own java-groups-kip848 "Java, group.protocol=consumer" timeout 900 interop/java/groups.sh kip848; fi
  return 0
}

# Both lanes' KafkaJS drivers share one node_modules: installed before they start.
if want kafkajs || want security; then interop/js/install.sh; fi
lane_log=$(mktemp)
second_lane >"$lane_log" 2>&1 &
lane=$!
# An early exit stops the whole lane (every driver runs under timeout, which makes a
# process group of its own, so the lane's descendants are signalled one by one) and shows
# how far it got.
stop_tree() {
  local child
  for child in $(pgrep -P "$1"); do stop_tree "$child"; done
  kill -TERM "$1" 2>/dev/null || true
}
stop_lane() {
  stop_tree "$lane"
  echo "--- the second lane, stopped:"
  tail -50 "$lane_log"
}
trap stop_lane EXIT

want confluent && run_driver confluent python3 interop/python/confluent_driver.py
want admin && run_driver admin python3 interop/python/admin_driver.py
want kafka-python && run_driver kafka-python python3 interop/python/kafka_python_driver.py
want transactions && run_driver transactions python3 interop/python/transactions_test.py
if want franz-go && [ -x interop/go/run.sh ]; then run_driver franz-go interop/go/run.sh; fi
if want kafkajs && [ -x interop/js/run.sh ]; then run_driver kafkajs interop/js/run.sh; fi
# Sarama negotiates by its configured Kafka version: run with the newest it knows and 2.1.
if want sarama && [ -x interop/sarama/run.sh ]; then run_driver sarama interop/sarama/run.sh max; fi
if want sarama-2.1 && [ -x interop/sarama/run.sh ]; then run_driver sarama-2.1 interop/sarama/run.sh 2.1.0; fi
if want java && [ -x interop/java/run.sh ]; then run_driver java interop/java/run.sh; fi
# The same driver with Kafka 4.1.1's clients, so older clients stay covered.
if want java-4.1 && [ -x interop/java/run.sh ]; then run_driver java-4.1 env STRAND_KAFKA_VERSION=4.1.1 interop/java/run.sh; fi
if want java-transactions && [ -x interop/java/transactions.sh ]; then run_driver java-transactions interop/java/transactions.sh; fi
if want java-share-groups && [ -x interop/java/share-groups.sh ]; then run_driver java-share-groups interop/java/share-groups.sh; fi
if want java-streams-groups && [ -x interop/java/streams-groups.sh ]; then run_driver java-streams-groups interop/java/streams-groups.sh; fi
if want streams-eos && [ -x interop/java/streams-eos.sh ]; then run_driver streams-eos interop/java/streams-eos.sh; fi
if want franz-go-kgo && [ -x interop/go/kgo-suite.sh ]; then run_driver franz-go-kgo interop/go/kgo-suite.sh; fi
if want cli && [ -x interop/cli/run.sh ]; then run_driver cli interop/cli/run.sh; fi
want native-cli && run_driver native-cli python3 interop/python/native_cli_test.py
if want native-cli-kafka; then run_own native-cli-kafka "strand topic/produce/consume/group/cluster against Apache Kafka 4.4.0" timeout 900 python3 interop/python/native_cli_test.py --against-kafka; fi
if want server-properties; then run_own server-properties "strand serve --config with a Kafka server.properties" in_dir interop/python timeout 300 python3 server_properties_test.py; fi
if want log-dirs; then run_own log-dirs "two log.dirs: kafka-log-dirs, kafka-reassign-partitions moving replicas between them" in_dir interop/python timeout 300 python3 log_dirs_test.py; fi
if want restart; then run_own restart "" timeout 600 python3 interop/python/restart_test.py; fi
if want kip848-restart; then run_own kip848-restart "KIP-848 consumer group members keep their epochs and partitions across kill -9 of the coordinator, librdkafka" in_dir interop/python timeout 300 python3 kip848_restart_test.py; fi
if want transactions-restart; then run_own transactions-restart "transactions across kill -9 of the broker" timeout 600 python3 interop/python/transactions_restart_test.py; fi
if want corruption; then run_own corruption "a damaged flushed batch is not served: librdkafka with and without check.crcs" in_dir interop/python timeout 300 python3 corruption_test.py; fi
if want groups; then run_own groups "librdkafka, classic and KIP-848" timeout 900 python3 interop/python/groups_test.py; fi
if want franz-go-groups; then run_own franz-go-groups "" timeout 300 interop/go/groups.sh; fi
if want kafka-python-groups; then run_own kafka-python-groups "" timeout 300 python3 interop/python/kafka_python_groups_test.py; fi
if want retention; then run_own retention "retention and compaction" timeout 600 python3 interop/python/retention_compaction_test.py; fi
if want tiered-storage; then run_own tiered-storage "KIP-405 against moto's S3 server: copies, local deletion, reads from offset 0 by librdkafka and Kafka's Java consumer, kill -9 mid-copy, a stalled store, remote retention, topic deletion" in_dir interop/python timeout 900 python3 tiered_storage_test.py; fi
# The same requests as interop/kafka/reference-4.4/capture.py sent Kafka 4.4.0, answers
# compared field by field with its (volatile fields normalised). Allowed: Kafka reports
# min.insync.replicas as the cluster's dynamic default (its reference broker sets it so; on
# Strand it is a start setting), and Kafka's features Strand does not claim or claims
# lower (it has no Kafka metadata records, no kraft.version gate on changing voters, no
# share-group dead-letter queue (share.version 2) and no KIP-966: ARCHITECTURE).
# raft_voters: AddRaftVoter, RemoveRaftVoter, UnregisterController on a single node, which
# answers as Kafka's static quorum.
# kafka44_versions: the versions Kafka 4.4 added over 4.1.
# streams_groups: KIP-1071 streams groups (APIs 88, 89, 93) and the other group APIs on one;
# allowed: a KIP-848 group's first epoch (Kafka's first join ends at 2, Strand's at 1: only
# compared here, where epochs are exact) and ListGroups' state filter "NotReady", which
# Kafka's Admin sends and Kafka 4.4 never matches (Strand does: ARCHITECTURE).
want reference && run_driver reference python3 interop/python/reference_compare.py \
  --require topic_configs,topic_config_validation,describe_topic_partitions,describe_log_dirs,alter_replica_log_dirs,unregister_broker,raft_voters,describe_quorum,elect_leaders,list_partition_reassignments,alter_partition_reassignments,group_configs,kafka44_versions,update_features,streams_groups \
  --allow 'min\.insync\.replicas.*DYNAMIC_DEFAULT_BROKER_CONFIG' \
  --allow 'update_features .*(metadata|kraft|share|eligible\.leader\.replicas)\.version' \
  --allow 'streams_groups cases\.setup_consumer_group_join\.response\.member_epoch' \
  --allow 'streams_groups cases\.list_groups_v5_state_NotReady\.response\.groups'
if want compare; then run_own compare "same bytes to Apache Kafka 4.4.0 and Strand" timeout 600 python3 interop/python/protocol_compare.py; fi
if want idempotence; then run_own idempotence "" timeout 1200 python3 interop/python/idempotent_restart_test.py; fi

# The second lane's end: its output, or its failure.
lane_status=0
wait "$lane" || lane_status=$?
trap - EXIT
cat "$lane_log"
rm -f "$lane_log"
if [ "$lane_status" -ne 0 ]; then
  echo "--- a driver of the second lane failed (above)"
  exit 1
fi

# Alone from here: drivers that measure rates, and the clusters.
if want quotas; then run_own quotas "kafka-configs sets and describes client quotas; a librdkafka producer held to its producer_byte_rate, another alongside not" in_dir interop/python timeout 300 python3 quotas_test.py; fi
if want metrics; then run_own metrics "/metrics against strand bench while it runs: messages and bytes in and out within 1%; a librdkafka group's lag rising and falling; JSON logs, no colour codes in a file" timeout 600 python3 interop/python/metrics_test.py; fi
if want console; then run_own console "the web console in headless Chromium: a topic created, its messages browsed as text, JSON and hex, a config altered, a group's lag rising and falling, live throughput, a topic deleted; read_committed and read_uncommitted over a transactional producer's records; read-only mode; signing in as two SASL users with ACLs; screenshots in docs/console" timeout 600 python3 interop/python/console_test.py; fi
if want cluster-api; then run_own cluster-api "admin operations, ISR, min.insync.replicas, preferred leaders, controlled shutdown, kafka-features, a live topic default; 3 nodes" timeout 900 python3 interop/cluster/cluster_api_test.py; fi
if want cluster-prometheus; then run_own cluster-prometheus "Debian's Prometheus scrapes 3 nodes; PromQL on Kafka's metric names: messages in, under-replicated partitions after kill -9 and after the restart, one active controller" timeout 600 python3 interop/cluster/prometheus_test.py; fi
secure_clusters() {
  for m in PLAIN SCRAM-SHA-512 SSL; do
    timeout 600 python3 interop/cluster/secure_cluster_test.py --inter-broker-mechanism "$m" || return $?
  done
}
if want cluster-secure; then run_own cluster-secure "3 nodes from Kafka server.properties: quorum over mutual TLS, inter-broker SASL_SSL with PLAIN and with SCRAM-SHA-512, and SSL with client certificates, ACLs on; a node with another CA's certificate never joins; a leader killed" secure_clusters; fi
if want cluster-quorum; then run_own cluster-quorum "kafka-metadata-quorum and kafka-leader-election: DescribeQuorum, add/remove-controller, preferred and unclean ElectLeaders; 5 nodes" timeout 900 python3 interop/cluster/quorum_and_elections_test.py; fi
if want cluster-roles; then run_own cluster-roles "controller-only and broker-only nodes" timeout 600 python3 interop/cluster/roles_test.py; fi
if want cluster-stall; then run_own cluster-stall "stalled senders on a partition leader; acks=all and the ISR hold, 3 nodes" timeout 600 python3 interop/cluster/stall_test.py; fi
if want cluster-deposed-coordinator; then run_own cluster-deposed-coordinator "a group coordinator frozen past its session and resumed does not answer the offsets from before its fall" timeout 600 python3 interop/cluster/deposed_coordinator_test.py; fi
if want cluster-reassignment; then run_own cluster-reassignment "kafka-reassign-partitions: generate, execute with a replication throttle, list, verify, cancel; grow RF 1 to 3 and move a leader's replica under an acks=all producer, nothing acknowledged lost; 3 nodes" timeout 900 python3 interop/cluster/reassignment_test.py; fi
if want cluster-corruption; then run_own cluster-corruption "a leader whose read finds a damaged batch steps down; the consumer reads everything from a healthy replica; 3 nodes" timeout 600 python3 interop/cluster/corruption_failover_test.py; fi
if want cluster-bench; then run_own cluster-bench "strand bench routes to partition leaders, 3 nodes" timeout 600 python3 interop/cluster/bench_test.py; fi
if want cluster-share-groups; then run_own cluster-share-groups "Java share consumers and Admin, 3 nodes, a leader kill" timeout 1200 python3 interop/cluster/share_groups_test.py; fi
if want cluster-streams-groups; then run_own cluster-streams-groups "Kafka Streams group.protocol=streams: the streams-groups driver on 3 nodes, then an exactly_once_v2 word count through kill -9 of its group coordinator; same members, exact counts" timeout 600 python3 interop/cluster/streams_groups_test.py; fi
if want cluster-clients; then run_own cluster-clients "Java and librdkafka through leader kills, 3 nodes" timeout 1200 python3 interop/cluster/client_failover.py; fi
if want cluster-static-members; then run_own cluster-static-members "librdkafka static members: one restarts, then its group coordinator is killed; neither is fenced, 3 nodes" timeout 600 python3 interop/cluster/static_member_failover_test.py; fi
if want cluster-transactions; then run_own cluster-transactions "librdkafka transactions through kills of the transaction coordinator and of a partition leader; read_committed sees every committed transaction whole, nothing aborted, 3 nodes" timeout 900 python3 interop/cluster/transactions_failover_test.py; fi
if want cluster-streams-eos; then run_own cluster-streams-eos "Kafka Streams exactly_once_v2 word count through kill -9 of its transaction coordinator; every count update once, in order, 3 nodes" timeout 600 python3 interop/cluster/streams_eos_failover_test.py; fi
# Test848RegexBrokerResolves is skipped here only: it stops reading once it has records
# of as many topics as it wants, counting __consumer_offsets, which on three nodes often
# arrives first (a race in the test that Kafka with three brokers meets too); the
# single-node franz-go-kgo driver runs it.
if want cluster-franz-go-kgo; then run_own cluster-franz-go-kgo "franz-go's pkg/kgo suite, interop/go/kgo-suite.sh, seeded with all 3 nodes, every topic RF=3" timeout 1200 python3 interop/cluster/kgo_cluster.py -skip '^Test848RegexBrokerResolves$'; fi
# A short fault-injection run with a fresh seed each time (printed; --seed replays it).
# Longer: interop/cluster/nemesis.py --duration 600.
if want cluster-nemesis; then run_own cluster-nemesis "" timeout 1200 python3 interop/cluster/nemesis.py --duration "${STRAND_NEMESIS_SECONDS:-60}"; fi
# Every node killed and its metadata commit hint lost (as a power cut loses it): the
# quorums replay their logs from the start, and no broker may act on the history.
if want cluster-metadata-replay; then run_own cluster-metadata-replay "kill -9 of every node with the commit hints lost; every record read back, no topic deleted, 3 nodes" timeout 600 python3 interop/cluster/metadata_replay_test.py; fi
if want cluster-tiered-storage; then run_own cluster-tiered-storage "3 nodes against moto's S3 server: followers delete what the leader copied, a new leader serves offset 0 from the bucket and copies on, a restarted node rejoins from the tiered offset" timeout 900 python3 interop/cluster/tiered_storage_test.py; fi
# The transactional workload under the same nemesis (interop/cluster/nemesis_txn.py), also
# with a fresh seed. Longer: interop/cluster/nemesis.py --workload txn --duration 600. The
# timeout covers the clients' stop and final-read deadlines, not only the faults.
if want cluster-nemesis-tiered; then run_own cluster-nemesis-tiered "the nemesis on a tiered topic: leader kills, pauses, restarts and a stalled S3 store while copies are under way; read back from offset 0 in the bucket, every copy whole" timeout 900 python3 interop/cluster/nemesis.py --tiered --faults kill-leader,pause,restart-all,store-stall --duration "${STRAND_NEMESIS_TIERED_SECONDS:-30}"; fi
if want cluster-nemesis-txn; then run_own cluster-nemesis-txn "transactional producers, consume-transform-produce and read_committed readers under the nemesis; lost, aborted or partial transactions, duplicates" timeout 1800 python3 interop/cluster/nemesis.py --workload txn --duration "${STRAND_NEMESIS_TXN_SECONDS:-45}"; fi
# Power loss (strand-lazyfs under every data directory: what was not fsynced is lost) on
# one node or all at once, with fsync before the ack: nothing acknowledged may be lost.
# A fresh seed each time. Needs root and /dev/fuse (the machines CI runs on have both).
power_loss() {
  [ -c /dev/fuse ] || modprobe fuse 2>/dev/null || true
  if [ -c /dev/fuse ] && [ "$(id -u)" = 0 ]; then
    cargo build --release -p strand-lazyfs &&
      timeout 1200 python3 interop/cluster/nemesis.py --faults power-loss --flush every-batch --duration "${STRAND_POWER_LOSS_SECONDS:-60}" --lazyfs "$PWD/target/release/strand-lazyfs"
  else
    echo "--- cluster-power-loss SKIPPED: needs root and /dev/fuse"
  fi
}
if want cluster-power-loss; then run_own cluster-power-loss "nemesis --faults power-loss --flush every-batch: one node or every node loses its unsynced data; lost, duplicated, divergent" power_loss; fi
# bench/compare.py's smoke profile: every workload once, tiny, against Apache Kafka 4.4.0
# and Strand with both clients; fails on any issue a run reports (its figures mean nothing,
# so no run waits for a quiet machine: a second's look, as --quiet-wait 0 leaves).
if want bench-smoke; then run_own bench-smoke "bench/compare.py --smoke, Kafka 4.4.0 and Strand" timeout 1800 python3 bench/compare.py --smoke --fail-on-issues --quiet-wait 0 --retry-contended 0; fi
# The disk probes and the two-build comparison still run (a second each; figures mean nothing).
bench_probes() {
  python3 bench/append_stall_probe.py --seconds 1 --rounds 1 &&
    python3 bench/sync_probe.py --batches 50 || return $?
  local ab_report
  ab_report=$(bench/ab.sh "$BIN" "$BIN" 1 --duration-secs 1) || return $?
  echo "$ab_report"
  grep -q "^new: produced" <<<"$ab_report" || { echo "bench/ab.sh produced no report"; return 1; }
}
if want bench-probes; then run_own bench-probes "append_stall_probe.py, sync_probe.py, ab.sh" bench_probes; fi
echo "interop: all drivers passed in $SECONDS s. Each driver's seconds, slowest first (the second lane's overlapped the first's):"
sort -rn "$times" | awk '{ s = s (NR == 1 ? "" : NR % 8 == 1 ? ",\n" : ", ") $2 " " $1 } END { print s }'
rm -f "$times"

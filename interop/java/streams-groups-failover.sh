#!/usr/bin/env bash
# Runs the Kafka Streams group.protocol=streams word count of
# interop/java/src/StreamsGroupsFailover.java (kafka-streams 4.4.0, exactly_once_v2, two
# instances, fed continuously) against a running broker or cluster (STRAND_BOOTSTRAP,
# default 127.0.0.1:9092), controlled by lines on stdin ("describe", "stop"; see the
# class's header). interop/cluster/streams_groups_test.py runs it against a 3-node Strand
# cluster and kill -9s the group coordinator meanwhile. By hand, e.g. against Apache Kafka
# 4.4.0 (interop/kafka/run-kafka.sh, a single broker):
#
#   (sleep 40; echo describe; sleep 5; echo stop) | STRAND_BOOTSTRAP=127.0.0.1:9092 \
#       interop/java/streams-groups-failover.sh --replication 1 --min-isr 1
#
# Jars from interop/kafka/fetch.sh; the class is compiled with plain javac into a temp dir
# under the cache, removed on exit, which also holds Streams' state dirs. Clients log WARN
# and above to stderr. Arguments go to the app. Needs Java 17+ (javac).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export STRAND_BOOTSTRAP="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"
command -v javac >/dev/null || { echo "FAIL: javac not found (JDK 17+ needed)"; exit 1; }

libs="$("$here/../kafka/fetch.sh" | tail -n 1)"
home="$(dirname "$libs")"
mkdir -p "$home/interop-java"
build="$(mktemp -d "$home/interop-java/streams-groups-failover.XXXXXX")"
trap 'rm -rf "$build"' EXIT

export STREAMS_GROUPS_RUN="${STREAMS_GROUPS_RUN:--$(date +%s)}"
javac -d "$build" -cp "$libs/*" -Xlint:all "$here/src/StreamsGroupsFailover.java"
cat >"$build/log4j2.properties" <<'LOG'
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
logger.config.name = org.apache.kafka.streams.StreamsConfig
logger.config.level = error
# The streams members' transitions (rejoins, fencing), heartbeat errors and coordinator
# rediscoveries, and the producers' transaction states: what a failover did to the app.
logger.membership.name = org.apache.kafka.clients.consumer.internals.StreamsMembershipManager
logger.membership.level = info
logger.heartbeat.name = org.apache.kafka.clients.consumer.internals.StreamsGroupHeartbeatRequestManager
logger.heartbeat.level = info
logger.coordinator.name = org.apache.kafka.clients.consumer.internals.CoordinatorRequestManager
logger.coordinator.level = info
logger.txn.name = org.apache.kafka.clients.producer.internals.TransactionManager
logger.txn.level = info
LOG

# The app has its own watchdog (330s); timeout is the backstop. --foreground keeps java in
# this script's process group, so the test's killpg of a failed run reaches it.
export STRAND_STREAMS_STATE_DIR="$build/state"
status=0
timeout --foreground -k 10 380 java -Xmx768m "-Dlog4j2.configurationFile=file:$build/log4j2.properties" \
  -cp "$build:$libs/*" StreamsGroupsFailover "$@" || status=$?
exit "$status"

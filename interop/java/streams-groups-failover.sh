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
export STREAMS_GROUPS_RUN="${STREAMS_GROUPS_RUN:--$(date +%s)}"
. "$here/lib.sh"

java_build streams-groups-failover Checks StreamsWordCount StreamsGroupsFailover
cat >>"$build/log4j2.properties" <<'LOG'
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

# The app has its own watchdog (330s); timeout is the backstop. --foreground: the test's
# killpg of a failed run reaches java.
export STRAND_STREAMS_STATE_DIR="$build/state"
java_run --foreground 380 768m StreamsGroupsFailover "$@"

#!/usr/bin/env bash
# Runs the Kafka Streams exactly-once word count fed continuously
# (interop/java/src/StreamsEosCluster.java: kafka-streams 4.4.0, exactly_once_v2) against a
# running broker or cluster. interop/cluster/streams_eos_failover_test.py runs it with
# --controlled against a 3-node Strand cluster and kills nodes meanwhile; alone it
# produces --lines lines and checks the output, e.g. against Apache Kafka 4.4.0
# (interop/kafka/run-kafka.sh, a single broker):
#
#   STRAND_BOOTSTRAP=127.0.0.1:9092 interop/java/streams-eos-cluster.sh \
#       --replication 1 --min-isr 1 --lines 3000 --rate 200
#
# Jars from interop/kafka/fetch.sh (Maven Central, cached); the app is compiled with plain
# javac into a temp dir under the cache, removed on exit, which also holds Streams' state
# dir. Clients log WARN and above to stderr (the producers' TransactionManager INFO). Arguments go to the app (see its header).
# STRAND_BOOTSTRAP defaults to 127.0.0.1:9092. Needs Java 17+ (javac).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export STRAND_BOOTSTRAP="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"
. "$here/lib.sh"

java_build streams-eos-cluster Checks StreamsWordCount StreamsEosCluster
cat >>"$build/log4j2.properties" <<'LOG'
# The producers' transaction states (fatal and abortable errors, epoch bumps) too.
logger.txn.name = org.apache.kafka.clients.producer.internals.TransactionManager
logger.txn.level = info
LOG

# The app has its own watchdog (420s); timeout is the backstop. Not exec: the trap
# removes the build dir afterwards. --foreground: the test's killpg of a failed run
# reaches java (the app outlived the run otherwise).
export STRAND_STREAMS_STATE_DIR="$build/state"
java_run --foreground 480 768m StreamsEosCluster "$@"

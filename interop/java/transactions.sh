#!/usr/bin/env bash
# Runs the Java transactions interop driver (Apache Kafka's kafka-clients 4.4.0:
# transactional producer, read_committed consumer, sendOffsetsToTransaction with a group
# member's metadata, fencing, timeouts, the transaction admin calls) against a running
# broker. Jars from interop/kafka/fetch.sh (Maven Central, cached); the driver is compiled
# with plain javac into a temp dir under the cache, removed on exit.
#
#   interop/java/transactions.sh                    every scenario
#   interop/java/transactions.sh fencing timeout    only the named ones (visibility
#                                                   ctp-classic ctp-consumer fencing
#                                                   timeout admin)
#
# STRAND_BOOTSTRAP (default 127.0.0.1:9092) names the broker; the same script validates
# against Apache Kafka 4.4.0 and 4.1.1 (interop/kafka/run-kafka.sh). Needs Java 17+ (javac).
# STRAND_KAFKA_VERSION (interop/kafka/fetch.sh) picks another release for the clients.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export STRAND_BOOTSTRAP="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"
. "$here/lib.sh"

# Client logging: WARN and above to stderr.
java_build transactions Checks TransactionsDriver

# The driver has its own watchdog (420s); timeout is the backstop.
java_run 480 512m TransactionsDriver "$@"

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
command -v javac >/dev/null || { echo "FAIL: javac not found (JDK 17+ needed)"; exit 1; }

libs="$("$here/../kafka/fetch.sh" | tail -n 1)"
home="$(dirname "$libs")"
mkdir -p "$home/interop-java"
build="$(mktemp -d "$home/interop-java/transactions.XXXXXX")"
trap 'rm -rf "$build"' EXIT

javac -d "$build" -cp "$libs/*" -Xlint:all "$here/src/TransactionsDriver.java"

# Client logging: WARN and above to stderr (log4j2 through the slf4j binding in libs).
cat >"$build/log4j2.properties" <<'LOG'
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
LOG

# The driver has its own watchdog (420s); timeout is the backstop.
timeout -k 10 480 java -Xmx512m "-Dlog4j2.configurationFile=file:$build/log4j2.properties" \
  -cp "$build:$libs/*" TransactionsDriver "$@"

#!/usr/bin/env bash
# Runs the Kafka Streams exactly-once interop test (kafka-streams 4.4.0, a word count with
# processing.guarantee=exactly_once_v2, interop/java/src/StreamsEos.java) against a
# running broker. Jars from interop/kafka/fetch.sh (Maven Central, cached; kafka-streams
# and its RocksDB JNI are among them); the app is compiled with plain javac into a temp
# dir under the cache, removed on exit, which also holds Streams' state dir.
#
# STRAND_BOOTSTRAP (default 127.0.0.1:9092) names the broker; the same script validates
# against Apache Kafka 4.4.0 (interop/kafka/run-kafka.sh). Needs Java 17+ (javac).
# STRAND_KAFKA_VERSION (interop/kafka/fetch.sh) picks another release for Streams.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export STRAND_BOOTSTRAP="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"
command -v javac >/dev/null || { echo "FAIL: javac not found (JDK 17+ needed)"; exit 1; }

libs="$("$here/../kafka/fetch.sh" | tail -n 1)"
home="$(dirname "$libs")"
mkdir -p "$home/interop-java"
build="$(mktemp -d "$home/interop-java/streams-eos.XXXXXX")"
trap 'rm -rf "$build"' EXIT

javac -d "$build" -cp "$libs/*" -Xlint:all "$here/src/StreamsEos.java"

# Client and Streams logging: WARN and above to stderr (log4j2 through the slf4j binding).
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

# The app has its own watchdog (300s); timeout is the backstop.
export STRAND_STREAMS_STATE_DIR="$build/state"
timeout -k 10 360 java -Xmx768m "-Dlog4j2.configurationFile=file:$build/log4j2.properties" \
  -cp "$build:$libs/*" StreamsEos "$@"

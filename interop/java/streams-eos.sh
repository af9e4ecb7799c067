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
. "$here/lib.sh"

# Client and Streams logging: WARN and above to stderr.
java_build streams-eos Checks StreamsWordCount StreamsEos

# The app has its own watchdog (300s); timeout is the backstop.
export STRAND_STREAMS_STATE_DIR="$build/state"
java_run 360 768m StreamsEos "$@"

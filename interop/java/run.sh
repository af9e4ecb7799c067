#!/usr/bin/env bash
# Runs the Java interop driver (Apache Kafka's kafka-clients 4.4.0) against a running
# Strand broker. The jars come from interop/kafka/fetch.sh (Maven Central, cached); the
# driver is compiled with plain javac into a temp dir under the cache, removed on exit.
# STRAND_BOOTSTRAP (default 127.0.0.1:9092) names the broker. Needs Java 17+ (javac).
# STRAND_KAFKA_VERSION picks other clients (fetch.sh): interop/run.sh's java-4.1 driver
# runs this with STRAND_KAFKA_VERSION=4.1.1, so older clients stay covered.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export STRAND_BOOTSTRAP="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"
command -v javac >/dev/null || { echo "FAIL: javac not found (JDK 17+ needed)"; exit 1; }

libs="$("$here/../kafka/fetch.sh" | tail -n 1)"
home="$(dirname "$libs")"
mkdir -p "$home/interop-java"
build="$(mktemp -d "$home/interop-java/build.XXXXXX")"
trap 'rm -rf "$build"' EXIT

javac -d "$build" -cp "$libs/*" -Xlint:all "$here/src/InteropDriver.java"

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

# The driver has its own watchdog (240s); timeout is the backstop.
timeout -k 10 300 java -Xmx512m "-Dlog4j2.configurationFile=file:$build/log4j2.properties" \
  -cp "$build:$libs/*" InteropDriver "$@"

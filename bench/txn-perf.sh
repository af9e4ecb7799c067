#!/usr/bin/env bash
# Runs bench/TxnPerf.java (a transactional producer benchmark: begin, N sends round-robin
# over the partitions, commitTransaction timed; see the source) with Apache Kafka's
# kafka-clients 4.4.0, the jars interop/kafka/fetch.sh caches (Maven Central). The class
# is compiled with plain javac once per version of the source, into
# <cache>/bench-java/<sha256 of the source>/, so a run does not include javac.
#
#   bench/txn-perf.sh --bootstrap 127.0.0.1:9092 --topic bench --transactions 2000
#   bench/txn-perf.sh --compile-only          # just make sure it is built
#
# JVM as ProducerPerformance gets it from kafka-cli.sh: -Xmx512m, G1 (STRAND_KAFKA_CLI_HEAP
# overrides the heap); client logging WARN and above to stderr. Needs Java 17+ (javac).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/TxnPerf.java"
command -v javac >/dev/null || { echo "txn-perf.sh: javac not found (JDK 17+ needed)" >&2; exit 1; }

libs="$("$here/../interop/kafka/fetch.sh" | tail -n 1)"
home="$(dirname "$libs")"
sum="$(sha256sum "$src" | cut -c1-16)"
build="$home/bench-java/$sum"
if [ ! -f "$build/TxnPerf.class" ]; then
  mkdir -p "$home/bench-java"
  tmp="$(mktemp -d "$home/bench-java/build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  javac -d "$tmp" -cp "$libs/*" -Xlint:all "$src" >&2
  cat >"$tmp/log4j2.properties" <<'LOG'
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
LOG
  # A concurrent build may have got there first: then its copy is used.
  mv -T "$tmp" "$build" 2>/dev/null || rm -rf "$tmp"
  trap - EXIT
fi
if [ "${1:-}" = "--compile-only" ]; then
  exit 0
fi

# shellcheck disable=SC2206
heap=(${STRAND_KAFKA_CLI_HEAP:--Xmx512m})
exec java "${heap[@]}" -XX:+UseG1GC -Djava.awt.headless=true \
  "-Dlog4j2.configurationFile=file:$build/log4j2.properties" \
  -cp "$build:$libs/*" TxnPerf "$@"

#!/usr/bin/env bash
# Consumer-group interop test with Apache Kafka's Java clients (kafka-clients 4.4.0,
# group.protocol=classic and group.protocol=consumer, KIP-848) and Kafka's
# kafka-consumer-groups tool against Strand. Compiles
# interop/java/src/GroupDriver.java like run.sh does (jars from interop/kafka/fetch.sh),
# then runs the harness interop/python/java_groups_test.py, which starts its own broker
# on a free loopback port in a temp dir, runs group members as separate JVMs (so one can
# be killed with kill -9), restarts the broker, and stops everything it started.
#
#   interop/java/groups.sh                   the classic sections (eager cooperative
#                                            live-restart static cli)
#   interop/java/groups.sh kip848            the KIP-848 sections (consumer consumer-range
#                                            consumer-live-restart consumer-cli
#                                            consumer-regex)
#   interop/java/groups.sh cli static        only the named sections
#   interop/java/groups.sh --kafka ...       the same against Apache Kafka 4.4.0
#
# Prints "ok: ..." per check and "FAIL: ..." per failure; exits non-zero on any failure.
# STRAND_BIN (default target/release/strand) is the broker. Needs Java 17+ and python3.
# STRAND_KAFKA_VERSION (interop/kafka/fetch.sh) picks another release for the clients, the
# kafka-consumer-groups tool and the --kafka broker.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
command -v javac >/dev/null || { echo "FAIL: javac not found (JDK 17+ needed)"; exit 1; }

libs="$("$here/../kafka/fetch.sh" | tail -n 1)"
home="$(dirname "$libs")"
mkdir -p "$home/interop-java"
build="$(mktemp -d "$home/interop-java/groups.XXXXXX")"
trap 'rm -rf "$build"' EXIT

javac -d "$build" -cp "$libs/*" -Xlint:all "$here/src/GroupDriver.java"

# Client logging: WARN and above to stderr (each member's stderr goes to a file).
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

export GROUP_DRIVER_CLASSPATH="$build:$libs/*"
export GROUP_DRIVER_LOG4J="$build/log4j2.properties"
# The harness has its own deadlines for every step; timeout is the backstop.
timeout -k 10 1200 python3 "$here/../python/java_groups_test.py" "$@"

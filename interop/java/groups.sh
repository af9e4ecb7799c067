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
#                                            consumer-regex consumer-static)
#   interop/java/groups.sh cli static        only the named sections
#   interop/java/groups.sh --kafka ...       the same against Apache Kafka 4.4.0
#
# Prints "ok: ..." per check and "FAIL: ..." per failure; exits non-zero on any failure.
# STRAND_BIN (default target/release/strand) is the broker. Needs Java 17+ and python3.
# STRAND_KAFKA_VERSION (interop/kafka/fetch.sh) picks another release for the clients, the
# kafka-consumer-groups tool and the --kafka broker.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"

# Client logging: WARN and above to stderr (each member's stderr goes to a file).
java_build groups GroupDriver

export GROUP_DRIVER_CLASSPATH="$build:$libs/*"
export GROUP_DRIVER_LOG4J="$build/log4j2.properties"
# The harness has its own deadlines for every step; timeout is the backstop.
timeout -k 10 1200 python3 "$here/../python/java_groups_test.py" "$@"

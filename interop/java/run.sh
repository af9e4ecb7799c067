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
. "$here/lib.sh"

# Client logging: WARN and above to stderr.
java_build build Checks InteropDriver

# The driver has its own watchdog (240s); timeout is the backstop.
java_run 300 512m InteropDriver "$@"

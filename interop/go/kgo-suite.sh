#!/usr/bin/env bash
# Runs franz-go's own integration tests (package pkg/kgo: TestTxnEtl, TestGroupETL,
# Test848*, ... about 150 tests, most of them against the broker) against a running
# broker. The module source, _test.go files included, comes from the Go module proxy.
#
# Usage: interop/go/kgo-suite.sh [go test flags, e.g. -v or -race]
#   STRAND_BOOTSTRAP  broker to test (default 127.0.0.1:9092)
#   KGO_RUN           go test -run filter (default: every test, 'Test')
#   KGO_TIMEOUT       go test -timeout (default 20m; -race needs about 7 minutes)
#   FRANZ_GO_VERSION  franz-go version (default: the one interop/go/go.mod requires)
#   KGO_TEST_RF       replication factor of the tests' topics (default 1)
# Share-group, SCRAM and OAUTHBEARER tests skip themselves (no ShareFetch v2, no SASL).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="${FRANZ_GO_VERSION:-$(cd "$here" && go list -m -f '{{.Version}}' github.com/twmb/franz-go)}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The module cache is read-only: test from a writable copy.
dir="$(cd "$work" && go mod download -json "github.com/twmb/franz-go@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -n "$dir" ] || { echo "kgo-suite.sh: go mod download of franz-go@$version failed" >&2; exit 1; }
cp -r "$dir" "$work/franz-go"
chmod -R u+w "$work/franz-go"
cd "$work/franz-go"

# The suite's knobs (pkg/kgo/helpers_test.go): KGO_SEEDS is the bootstrap list;
# KGO_TEST_UNSAFE (set, any value) lets TestTxnEtl also begin the next transaction
# before the previous EndTxn is answered (EndBeginTxnUnsafe), as Kafka allows.
export KGO_SEEDS="${STRAND_BOOTSTRAP:-127.0.0.1:9092}"
export KGO_TEST_RF="${KGO_TEST_RF:-1}"
export KGO_TEST_UNSAFE=1
echo "kgo-suite.sh: franz-go $version pkg/kgo -run '${KGO_RUN:-Test}' against $KGO_SEEDS" >&2
# Not exec: the EXIT trap removes the copy afterwards.
go test -count=1 -timeout "${KGO_TIMEOUT:-20m}" -run "${KGO_RUN:-Test}" "$@" ./pkg/kgo/

#!/usr/bin/env python3
"""franz-go's own pkg/kgo integration suite (interop/go/kgo-suite.sh) against a 3-node
Strand cluster: the seeds are all three nodes and every topic the tests create has
replication factor 3 (KGO_TEST_RF=3), so produce acks, fetches, group and transaction
coordinators and the partition leaders are spread over the nodes.

Usage: interop/cluster/kgo_cluster.py [go test flags, e.g. -v]
  STRAND_BIN   the broker binary (default target/release/strand)
  KGO_RUN, KGO_TIMEOUT, FRANZ_GO_VERSION: passed on to kgo-suite.sh

The nodes share loopback on ports the OS picked (no network namespaces even as root: the
suite injects no faults), each cluster in its own temp directory, so this runs beside
another cluster test (the namespaced ones use 10.77.0.x and the bridge strand-br). Fails
if the suite fails, a node panics, or a node does not exit 0 on SIGTERM afterwards. The
data directory and node logs (n<id>.log) are kept when it fails.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, fail, log  # noqa: E402

SUITE = os.path.join(HERE, "..", "go", "kgo-suite.sh")
# Topics a test creates without a replication factor (auto-creation, -1) get 3 as well.
SETTINGS = {"default_replication_factor": 3}


def wait_for_brokers(cluster, timeout=60):
    """Until Metadata from every node lists all three brokers and a controller: the
    suite's first CreateTopics (RF 3) needs every broker registered."""
    from confluent_kafka.admin import AdminClient
    deadline = time.time() + timeout
    seen = None
    while time.time() < deadline:
        ready = True
        for i in cluster.ids:
            host, port, _ = cluster.addr[i]
            admin = AdminClient({"bootstrap.servers": f"{host}:{port}", "log_level": 2})
            try:
                meta = admin.list_topics(timeout=5)
                seen = (i, sorted(meta.brokers), meta.controller_id)
                if len(meta.brokers) != len(cluster.ids) or meta.controller_id < 0:
                    ready = False
            except Exception as error:
                seen = (i, error)
                ready = False
            if not ready:
                break
        if ready:
            return
        time.sleep(0.5)
    fail(f"the cluster did not list {len(cluster.ids)} brokers within {timeout} s: {seen}")


def tail_logs(cluster, root, lines=20):
    for i in cluster.ids:
        path = os.path.join(root, f"n{i}.log")
        with open(path, errors="replace") as f:
            last = f.readlines()[-lines:]
        log(f"--- last {len(last)} lines of {path}")
        sys.stdout.write("".join(last))
    sys.stdout.flush()


def main():
    # timeout(1) or CI cancelling the job: still stop the nodes (finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.time()
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-kgo-cluster-")
    cluster = Cluster(binary, root, nodes=3, settings=SETTINGS, use_netns=False)
    log(f"data and node logs in {root}")
    ok = False
    try:
        cluster.launch()
        wait_for_brokers(cluster)
        bootstrap = cluster.bootstrap()
        log(f"cluster up: {bootstrap}; running kgo-suite.sh with KGO_TEST_RF=3")
        env = dict(os.environ, STRAND_BOOTSTRAP=bootstrap, KGO_TEST_RF="3")
        # A passing run takes about 3 minutes on 2 cores; a wedged test fails at this
        # deadline with go test's goroutine dump.
        env.setdefault("KGO_TIMEOUT", "15m")
        suite = subprocess.run([SUITE, *sys.argv[1:]], env=env)
        log(f"kgo-suite.sh exited {suite.returncode} after {time.time() - started:.0f} s")
        codes = cluster.stop_all()
        panicked = [i for i in cluster.ids
                    if "panicked" in open(os.path.join(root, f"n{i}.log"), errors="replace").read()]
        if panicked:
            fail(f"nodes {panicked} panicked; see {root}")
        if suite.returncode != 0:
            tail_logs(cluster, root)
            fail(f"franz-go's kgo suite failed against the cluster (exit {suite.returncode}); "
                 f"node logs in {root}")
        if any(code != 0 for code in codes.values()):
            fail(f"nodes did not stop cleanly: {codes}; see {root}")
        ok = True
        log(f"PASS ({time.time() - started:.0f} s)")
        return 0
    finally:
        cluster.destroy()
        if ok:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

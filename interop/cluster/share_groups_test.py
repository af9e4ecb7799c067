#!/usr/bin/env python3
"""Share groups (KIP-932) on a 3-node Strand cluster, with Kafka's Java clients.

Topics are spread over the brokers and `__share_group_state` too, so a share-partition's
leader often keeps its state with a share coordinator on another broker (Write/Read
ShareGroupState between brokers). First the whole Java share-group driver
(interop/java/share-groups.sh: implicit and explicit acknowledgement, lock timeout,
Admin calls, kafka-share-groups) runs against the cluster. Then its failover section:
a member accepts and commits records while the leader of its partition (RF 3) is killed
with kill -9 and restarted; every record must be delivered, and none whose
acknowledgement had committed may be delivered again.
"""

import os
import subprocess
import sys
import tempfile
import time

from confluent_kafka.admin import AdminClient

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, fail, log  # noqa: E402
from nemesis import SETTINGS, leader_of_topic  # noqa: E402

DRIVER = os.path.join(HERE, "..", "java", "share-groups.sh")


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-share-")
    cluster = Cluster(binary, root, settings=SETTINGS)
    try:
        cluster.launch()
        bootstrap = cluster.bootstrap()
        env = dict(os.environ, STRAND_BOOTSTRAP=bootstrap, SHARE_RUN="-cluster")
        log("the share-group driver against the cluster")
        code = subprocess.run([DRIVER], env=env, timeout=900).returncode
        if code != 0:
            fail(f"the share-group driver failed on the cluster (exit {code})")
        with tempfile.TemporaryDirectory() as signals:
            env = dict(env, SHARE_FAILOVER_DIR=signals, SHARE_RUN="-failover")
            driver = subprocess.Popen([DRIVER, "failover"], env=env)
            ready = os.path.join(signals, "ready")
            deadline = time.time() + 240
            while not os.path.exists(ready) and time.time() < deadline:
                if driver.poll() is not None:
                    fail(f"the failover driver exited {driver.returncode} before the kill")
                time.sleep(0.2)
            if not os.path.exists(ready):
                fail("the failover driver never got half way")
            admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
            topic = "share-failover-failover"
            node = leader_of_topic(admin, topic, 0)
            if node not in cluster.ids:
                fail(f"no leader for {topic}-0")
            log(f"kill -9 node {node}, leader of {topic}-0")
            cluster.kill(node)
            open(os.path.join(signals, "killed"), "w").close()
            time.sleep(5)
            cluster.start(node)
            code = driver.wait(600)
            if code != 0:
                fail(f"the failover driver failed (exit {code})")
        log("ok: share groups on a 3-node cluster, through a leader kill")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()

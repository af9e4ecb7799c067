#!/usr/bin/env python3
"""Measures how a replication throttle paces a reassignment's copy: a partition holding
`--megabytes` MB on node 1 is reassigned to nodes 1 and 2 with kafka-reassign-partitions
--throttle RATE, for each rate given, and the time until node 2 is in sync is printed with
the copy rate it implies. A measurement, not a test (nothing is asserted):

    python3 interop/cluster/throttle_measure.py --megabytes 8 --rates 1000000,2000000,0

A rate of 0 means no throttle.
"""
import argparse
import os
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, log, until  # noqa: E402
from nemesis import SETTINGS  # noqa: E402
from reassignment_test import partition, plan, reassign, write_json  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=8)
    parser.add_argument("--rates", default="1000000,2000000,0")
    args = parser.parse_args()
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-throttle-")
    cluster = Cluster(binary, root, nodes=3, settings=dict(SETTINGS, auto_leader_rebalance_enable="false"),
                      use_netns=False)
    try:
        cluster.launch()
        bootstrap = cluster.bootstrap()
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        until("3 live brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3)
        for rate in [int(r) for r in args.rates.split(",")]:
            topic = f"copy-{rate}"
            admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1]])])[topic].result(30)
            until("led", lambda: partition(admin, topic).leader == 1)
            producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 2,
                                 "compression.type": "none"})
            for i in range(args.megabytes * 100):
                producer.produce(topic, value=os.urandom(10_000))
                producer.poll(0)
            producer.flush(120)
            moves = write_json(root, f"{topic}.json", plan((topic, 0, [1, 2])))
            throttle = ["--throttle", str(rate)] if rate else []
            started = time.time()
            code, out = reassign(bootstrap, "--execute", "--reassignment-json-file", moves, *throttle)
            if code != 0:
                log(f"--execute failed: {out}")
                return 1
            until("node 2 in sync", lambda: sorted(partition(admin, topic).isrs) == [1, 2], timeout=600)
            seconds = time.time() - started
            reassign(bootstrap, "--verify", "--reassignment-json-file", moves)  # clears throttles
            mb = args.megabytes * 100 * 10_000 / 1e6
            log(f"rate {rate or 'unthrottled'} B/s: {mb:.0f} MB copied in {seconds:.1f} s "
                f"({mb / seconds:.2f} MB/s incl. the tool's start)")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    sys.exit(main())

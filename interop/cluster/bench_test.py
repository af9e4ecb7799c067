#!/usr/bin/env python3
"""`strand bench` against a replicated cluster: three nodes, a topic of 6 partitions with
RF=3 and min.insync.replicas=2 whose leaders are spread over the nodes. The bench is
given one node as bootstrap and must send each partition's produces, offset lookups and
fetches to its leader (another node gets NOT_LEADER_OR_FOLLOWER, which fails a bench
run). Checks the counts it reports against the high watermarks librdkafka sees.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, fail, log  # noqa: E402

TOPIC = "bench"
PARTITIONS = 6
RECORDS = 30_000


def bench(binary, bootstrap, *args):
    argv = [binary, "bench", "--bootstrap", bootstrap, "--topic", TOPIC, "--partitions",
            str(PARTITIONS), "--record-size", "200", "--quiet", "--json", "-",
            "--duration-secs", "120", *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail(f"strand bench {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return json.JSONDecoder().raw_decode(p.stdout, p.stdout.index("{"))[0]


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-bench-cluster-")
    cluster = Cluster(binary, root, nodes=3, use_netns=False)
    try:
        cluster.launch()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={
            "min.insync.replicas": "2"})], operation_timeout=30)
        futures[TOPIC].result()
        deadline = time.time() + 30
        while True:
            md = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
            leaders = {p.id: p.leader for p in md.partitions.values()}
            if len(leaders) == PARTITIONS and all(l > 0 for l in leaders.values()):
                break
            if time.time() > deadline:
                fail(f"partitions without leaders: {leaders}")
            time.sleep(0.1)
        log(f"leaders: {leaders}")
        if len(set(leaders.values())) < 2:
            fail("every partition is led by one node; the test needs them spread")
        first = f"{cluster.addr[1][0]}:{cluster.addr[1][1]}"

        produced = bench(binary, first, "--acks", "all", "--records", str(RECORDS),
                         "--producers", "2", "--consumers", "2")
        log(f"acks=all through {first}: produced {produced['produced_records']}, "
            f"consumed {produced['consumed_records']}, "
            f"{produced['produced_records_per_second']:.0f} records/s")
        if produced["produced_records"] != RECORDS or produced["consumed_records"] != RECORDS:
            fail(f"expected {RECORDS} produced and consumed: {produced}")

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "check"})
        total = 0
        for p in range(PARTITIONS):
            low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
            total += high - low
        consumer.close()
        if total != RECORDS:
            fail(f"librdkafka sees {total} records in {TOPIC}, the bench acknowledged {RECORDS}")

        read = bench(binary, first, "--producers", "0", "--consumers", "3",
                     "--from-beginning", "--records", str(RECORDS))
        log(f"read back from the leaders: {read['consumed_records']} records")
        if read["consumed_records"] != RECORDS:
            fail(f"read back {read['consumed_records']} of {RECORDS}")
        log("PASS")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Process roles: a cluster of two combined nodes (controller and broker), one
controller-only node and one broker-only node (a learner of the metadata log).

Checks that the controller-only node serves no Kafka listener and is not a broker, that
the broker-only node registers, receives the metadata and gets replicas, and that records
produced with acks=all to an RF=3 topic placed on nodes 1, 2 and 4 are read back in full.
Every node serves HTTP: the controller-only node's /metrics carries the KafkaController
gauges (as a Kafka KRaft controller's do), exactly one node reports itself the active
controller, and the broker-only node never does; the web console shows every node with
its roles, and the controller-only node serves none.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import fail, free_port, log  # noqa: E402

COUNT = 3000


def scrape(port):
    """{series: value} of a node's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def check_http(http):
    for i, port in http.items():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            if response.status != 200:
                fail(f"node {i} /health answered {response.status}")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5) as response:
            if response.status != 200:
                fail(f"node {i} /ready answered {response.status}")
    active = "kafka_controller_kafkacontroller_activecontrollercount"
    counts = {i: scrape(port).get(active) for i, port in http.items()}
    if None in counts.values():
        fail(f"a node serves no {active}: {counts}")
    if sum(counts.values()) != 1 or counts[4] != 0:
        fail(f"{active} by node: {counts} (one controller, never the broker-only node 4)")
    controller = scrape(http[3])
    broker_series = [name for name in controller if not name.startswith("kafka_controller_")]
    if broker_series:
        fail(f"the controller-only node reports a broker's series: {broker_series[:5]}")
    if controller.get("kafka_controller_kafkacontroller_globalpartitioncount", 0) < 3 and counts[3] == 1:
        fail(f"the active controller-only node counts no partitions: {controller}")
    if controller.get("kafka_controller_kafkacontroller_activebrokercount") not in (None, 0.0, 3.0):
        fail(f"active brokers on node 3: {controller}")
    log(f"HTTP on every node; {active} by node {counts}")
    check_console(http)


def check_console(http):
    """The web console of the broker-only node lists every node with its roles, the
    controller-only node included (from DescribeQuorum), and one quorum leader; the
    controller-only node serves no console (it has no Kafka listener)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http[4]}/api/overview", timeout=30) as response:
        overview = json.load(response)
    roles = {b["id"]: (b["roles"], b["state"]) for b in overview["brokers"]}
    want_roles = {1: "broker,controller", 2: "broker,controller", 3: "controller", 4: "broker"}
    if {i: r for i, (r, _) in roles.items()} != want_roles:
        fail(f"console nodes {roles}, expected roles {want_roles}")
    if any(state != "running" for i, (r, state) in roles.items() if "broker" in r):
        fail(f"a broker not running in the console: {roles}")
    leaders = [b["id"] for b in overview["brokers"] if b.get("quorum_role") == "leader"]
    if len(leaders) != 1 or overview["quorum"]["leader"] != leaders[0]:
        fail(f"quorum leaders in the console: {leaders}, quorum {overview['quorum']}")
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{http[3]}/api/overview", timeout=5)
        fail("the controller-only node serves a console")
    except urllib.error.HTTPError as e:
        if e.code != 404:
            fail(f"the controller-only node answered /api/overview with {e.code}")
    log(f"console: nodes {roles}, quorum leader {leaders[0]}")


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-roles-")
    kafka = {i: free_port() for i in (1, 2, 4)}
    quorum = {i: free_port() for i in (1, 2, 3, 4)}
    controllers = ",".join(f"{i}@127.0.0.1:{quorum[i]}" for i in (1, 2, 3))
    nodes = {
        1: ["--listen", f"127.0.0.1:{kafka[1]}"],
        2: ["--listen", f"127.0.0.1:{kafka[2]}"],
        3: ["--process-roles", "controller"],
        4: ["--listen", f"127.0.0.1:{kafka[4]}", "--quorum-listen", f"127.0.0.1:{quorum[4]}"],
    }
    http = {i: free_port() for i in nodes}
    procs = {}
    try:
        for i, extra in nodes.items():
            out = open(os.path.join(root, f"n{i}.log"), "w")
            procs[i] = subprocess.Popen(
                [binary, "serve", "--node-id", str(i), "--data-dir", os.path.join(root, f"n{i}"),
                 "--controllers", controllers, "--http-listen", f"127.0.0.1:{http[i]}"] + extra,
                stdout=out, stderr=out)
        bootstrap = f"127.0.0.1:{kafka[4]}"
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        deadline = time.time() + 60
        while True:
            try:
                brokers = sorted(admin.list_topics(timeout=5).brokers)
                if brokers == [1, 2, 4]:
                    break
            except Exception:
                pass
            if time.time() > deadline:
                fail(f"brokers never became [1, 2, 4]; logs in {root}")
            time.sleep(0.3)
        log("brokers seen by the broker-only node: [1, 2, 4] (node 3 is controller only)")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", quorum[3])) != 0:
                fail("the controller-only node does not listen on its quorum address")
        admin.create_topics([NewTopic("roles", 3, 3, config={"min.insync.replicas": "2"})])["roles"].result(30)
        # A broker may answer before it has applied the new topic (LEADER_NOT_AVAILABLE,
        # no partitions): wait until all three are described.
        deadline = time.time() + 30
        while True:
            meta = admin.list_topics("roles", timeout=10).topics["roles"].partitions
            if len(meta) == 3:
                break
            if time.time() > deadline:
                fail(f"roles never described with 3 partitions: {sorted(meta)}")
            time.sleep(0.2)
        for p in meta.values():
            if sorted(p.replicas) != [1, 2, 4]:
                fail(f"partition {p.id} placed on {p.replicas}")
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                             "enable.idempotence": True, "log_level": 2})
        acked = []
        for n in range(COUNT):
            producer.produce("roles", value=str(n).encode(),
                             on_delivery=lambda e, m: e is None and acked.append(m.value()))
            producer.poll(0)
        producer.flush(60)
        if len(acked) != COUNT:
            fail(f"{COUNT - len(acked)} records not acknowledged")
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{kafka[1]}", "group.id": "roles",
                             "auto.offset.reset": "earliest", "log_level": 2})
        consumer.assign([TopicPartition("roles", p, 0) for p in range(3)])
        seen = set()
        deadline = time.time() + 60
        while len(seen) < COUNT and time.time() < deadline:
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                seen.add(message.value())
        consumer.close()
        if len(seen) != COUNT:
            fail(f"read {len(seen)} of {COUNT}")
        log(f"RF=3 topic on nodes 1, 2, 4: {COUNT} records acknowledged with acks=all and read back")
        check_http(http)
        log("PASS")
        return 0
    finally:
        # Brokers first (their controlled shutdowns need the quorum), then the controller.
        for group in ([4, 1, 2], [3]):
            for i in group:
                if i in procs:
                    procs[i].terminate()
            for i in group:
                if i not in procs:
                    continue
                try:
                    code = procs[i].wait(60)
                except subprocess.TimeoutExpired:
                    procs[i].kill()
                    code = "killed"
                if code != 0:
                    log(f"node {i} exited {code}")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Partition reassignment (AlterPartitionReassignments 45, ListPartitionReassignments 46)
and replication throttles, driven by Kafka 4.4.0's kafka-reassign-partitions and
kafka-configs on 3 nodes, under a live acks=all, idempotent producer:

- --generate proposes an assignment over the brokers given;
- --execute --throttle grows "grow" from RF 1 to RF 3 and moves "move" off its leader
  (replicas [1, 2] -> [3, 2]). The tool sets leader/follower.replication.throttled.rate
  on the brokers (dynamic broker configs, kafka-configs shows them) and the
  throttled-replicas topic configs. At 50 KB/s the new replica of "move" cannot copy
  its ~3 MB yet, so --list shows the reassignment (replicas 3,2,1, adding 3, removing 1)
  and --verify says it is still in progress;
- --execute --additional with a high throttle lets it finish: --verify then reports every
  partition complete and removes the throttles (broker and topic configs gone). "grow"
  has replicas 1,2,3 all in sync; "move" has replicas 3,2, led by 3, and node 1 has
  deleted its copy;
- --cancel reverts a reassignment held back by a 1 byte/s throttle: the partition is back
  on its original replica and --list shows nothing;
- a group config set through one broker is described by another (metadata log);
- every record the producer had acknowledged is read back, once.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, fail, log, until  # noqa: E402
from nemesis import SETTINGS  # noqa: E402

KAFKA_CLI = os.path.join(HERE, "..", "kafka", "kafka-cli.sh")
SLOW = 50_000  # bytes/s: ~3 MB takes a minute
FAST = 1_000_000_000


def tool(name, bootstrap, *args):
    run = subprocess.run([KAFKA_CLI, name, "--bootstrap-server", bootstrap] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    return run.returncode, run.stdout


def reassign(bootstrap, *args):
    return tool("kafka-reassign-partitions", bootstrap, *args)


def write_json(root, name, value):
    path = os.path.join(root, name)
    with open(path, "w") as f:
        json.dump(value, f)
    return path


def plan(*moves):
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                         for t, p, r in moves]}


def partition(admin, topic, index=0):
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[index]


def described(admin, resource):
    return admin.describe_configs([resource])[resource].result(15)


class Load:
    """An idempotent acks=all producer writing to `topics` until stopped, remembering
    what was acknowledged."""

    def __init__(self, bootstrap, topics):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5, "log_level": 2})
        self.topics = topics
        self.acked = {t: set() for t in topics}
        self.errors = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        seq = 0
        while not self.stop.is_set():
            for topic in self.topics:
                value = f"{topic}-{seq}".encode()

                def done(err, msg, topic=topic, value=value):
                    if err is None:
                        self.acked[topic].add(value)
                    else:
                        self.errors.append(str(err))
                self.producer.produce(topic, value=value, on_delivery=done)
            seq += 1
            self.producer.poll(0)
            time.sleep(0.01)
        self.producer.flush(60)


def read_all(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}-{time.time()}",
                         "enable.auto.commit": False, "log_level": 2})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
    consumer.assign([TopicPartition(topic, 0, low)])
    values = []
    deadline = time.time() + 120
    position = low
    while position < high and time.time() < deadline:
        message = consumer.poll(1)
        if message is None or message.error():
            continue
        values.append(message.value())
        position = message.offset() + 1
    consumer.close()
    return values


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-reassign-")
    settings = dict(SETTINGS, auto_leader_rebalance_enable="false")
    cluster = Cluster(binary, root, nodes=3, settings=settings, use_netns=False)
    load = None
    try:
        cluster.launch()
        bootstrap = cluster.bootstrap()
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        until("3 live brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3)
        created = admin.create_topics([
            NewTopic("grow", num_partitions=1, replica_assignment=[[1]]),
            NewTopic("move", num_partitions=1, replica_assignment=[[1, 2]],
                     config={"min.insync.replicas": "1"}),
            NewTopic("cancel", num_partitions=1, replica_assignment=[[1]]),
        ])
        for future in created.values():
            future.result(30)
        until("the topics led", lambda: all(partition(admin, t).leader >= 0 for t in ("grow", "move", "cancel")))

        # ~3 MB in "move" and "cancel", so a throttled copy takes a while.
        filler = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 2})
        for i in range(300):
            for topic in ("move", "cancel"):
                filler.produce(topic, value=bytes([i % 256]) * 10_000)
            filler.poll(0)
        if filler.flush(60) != 0:
            fail("the filler records were not all acknowledged")
        load = Load(bootstrap, ["grow", "move"])
        load.thread.start()
        time.sleep(2)

        # --- generate ---------------------------------------------------------------------
        topics_file = write_json(root, "topics.json", {"version": 1, "topics": [{"topic": "grow"}]})
        code, out = reassign(bootstrap, "--generate", "--topics-to-move-json-file", topics_file,
                             "--broker-list", "1,2,3")
        proposed = re.search(r"Proposed partition reassignment configuration\s*\n(\{.*\})", out)
        if code != 0 or not proposed:
            fail(f"--generate: exit {code}\n{out}")
        parts = json.loads(proposed.group(1))["partitions"]
        if [(p["topic"], p["partition"], len(p["replicas"])) for p in parts] != [("grow", 0, 1)] \
                or parts[0]["replicas"][0] not in (1, 2, 3):
            fail(f"--generate proposed {parts}")
        log(f"--generate proposes {parts}")

        # --- execute with a throttle ----------------------------------------------------------
        moves = write_json(root, "moves.json", plan(("grow", 0, [1, 2, 3]), ("move", 0, [3, 2])))
        code, out = reassign(bootstrap, "--execute", "--reassignment-json-file", moves,
                             "--throttle", str(SLOW))
        if code != 0 or "Successfully started partition reassignments" not in out:
            fail(f"--execute: exit {code}\n{out}")
        rate = described(admin, ConfigResource(ResourceType.BROKER, "1"))
        leader_rate = rate.get("leader.replication.throttled.rate")
        if leader_rate is None or leader_rate.value != str(SLOW) or leader_rate.is_read_only:
            fail(f"broker 1's leader.replication.throttled.rate after --execute: {leader_rate}")
        topic_configs = described(admin, ConfigResource(ResourceType.TOPIC, "move"))
        if topic_configs["follower.replication.throttled.replicas"].value != "0:3":
            fail(f"move's follower.replication.throttled.replicas: "
                 f"{topic_configs['follower.replication.throttled.replicas'].value}")
        code, out = reassign(bootstrap, "--list")
        if code != 0 or not re.search(r"move-0: replicas: 3,2,1\. adding: 3\. removing: 1\.", out):
            fail(f"--list while throttled: exit {code}\n{out}")
        code, out = reassign(bootstrap, "--verify", "--reassignment-json-file", moves)
        if "Reassignment of partition move-0 is still in progress." not in out:
            fail(f"--verify while throttled: exit {code}\n{out}")
        state = partition(admin, "move")
        if sorted(state.replicas) != [1, 2, 3] or state.leader != 1:
            fail(f"move-0 during its reassignment: replicas {state.replicas}, leader {state.leader}")
        log("move-0 is held back by the throttle: --list and --verify show it in progress")

        # --- the same plan again, unthrottled: it completes -----------------------------------
        code, out = reassign(bootstrap, "--execute", "--additional", "--reassignment-json-file", moves,
                             "--throttle", str(FAST))
        if code != 0:
            fail(f"--execute --additional: exit {code}\n{out}")

        def verified():
            code, out = reassign(bootstrap, "--verify", "--reassignment-json-file", moves)
            return code == 0 and "still in progress" not in out and out
        out = until("--verify to report every reassignment complete", verified, timeout=180)
        for expected in ("Reassignment of partition grow-0 is completed.",
                         "Reassignment of partition move-0 is completed.",
                         "Clearing broker-level throttles on brokers 1,2,3",
                         "Clearing topic-level throttles on topics"):
            if expected not in out:
                fail(f"--verify after completion lacks {expected!r}:\n{out}")
        rates = described(admin, ConfigResource(ResourceType.BROKER, "1"))
        if "leader.replication.throttled.rate" in rates:
            fail("--verify did not remove the broker throttle")
        throttled = described(admin, ConfigResource(ResourceType.TOPIC, "move"))
        if throttled["leader.replication.throttled.replicas"].value not in ("", None):
            fail("--verify did not remove the topic throttles")
        until("grow-0 on 1,2,3, all in sync",
              lambda: sorted(partition(admin, "grow").replicas) == [1, 2, 3]
              and sorted(partition(admin, "grow").isrs) == [1, 2, 3])
        state = until("move-0 on 3,2 led by 3", lambda: (lambda p: p if p.replicas == [3, 2] and p.leader == 3
                                                          else None)(partition(admin, "move")))
        if sorted(state.isrs) != [2, 3]:
            fail(f"move-0's ISR after the move: {state.isrs}")
        until("node 1 to delete its copy of move-0",
              lambda: not os.path.exists(os.path.join(root, "n1", "move-0")))
        code, out = reassign(bootstrap, "--list")
        if "move-0" in out or "grow-0" in out:
            fail(f"--list after completion:\n{out}")
        log("grow-0 is on 1,2,3; move-0 moved to 3,2 and node 1 deleted its copy; throttles removed")

        # --- cancel ---------------------------------------------------------------------------
        cancel = write_json(root, "cancel.json", plan(("cancel", 0, [2, 3])))
        code, out = reassign(bootstrap, "--execute", "--reassignment-json-file", cancel, "--throttle", "1")
        if code != 0:
            fail(f"--execute of the reassignment to cancel: exit {code}\n{out}")
        code, out = reassign(bootstrap, "--list")
        if not re.search(r"cancel-0: replicas: 2,3,1\. adding: 2,3\. removing: 1\.", out):
            fail(f"--list before the cancel:\n{out}")
        code, out = reassign(bootstrap, "--cancel", "--reassignment-json-file", cancel)
        if code != 0 or "Successfully cancelled partition reassignment" not in out:
            fail(f"--cancel: exit {code}\n{out}")
        until("cancel-0 back on 1", lambda: partition(admin, "cancel").replicas == [1])
        code, out = reassign(bootstrap, "--list")
        if "cancel-0" in out:
            fail(f"--list after the cancel:\n{out}")
        log("the throttled reassignment of cancel-0 was cancelled: back on replica 1")

        # --- group configs go through the metadata log: set on one broker, seen on another ----
        node = lambda i: "%s:%d" % cluster.addr[i][:2]  # noqa: E731
        code, out = tool("kafka-configs", node(1), "--entity-type", "groups", "--entity-name", "tuned",
                         "--alter", "--add-config", "consumer.session.timeout.ms=50000")
        if code != 0:
            fail(f"kafka-configs groups on node 1: exit {code}\n{out}")
        code, out = tool("kafka-configs", node(3), "--entity-type", "groups", "--entity-name", "tuned", "--describe")
        if "consumer.session.timeout.ms=50000" not in out:
            fail(f"node 3 does not describe the group config set through node 1:\n{out}")
        log("a group config set through node 1 is described by node 3")

        # --- nothing acknowledged was lost ----------------------------------------------------
        load.stop.set()
        load.thread.join(120)
        for topic in ("grow", "move"):
            values = [v for v in read_all(bootstrap, topic) if v.startswith(topic.encode())]
            if len(values) != len(set(values)):
                fail(f"{topic}: {len(values) - len(set(values))} records read twice")
            lost = load.acked[topic] - set(values)
            if lost:
                fail(f"{topic}: {len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}")
            log(f"{topic}: all {len(load.acked[topic])} acknowledged records read back once "
                f"({len(load.errors)} delivery errors retried away or reported)")
        log("PASS")
    finally:
        if load is not None:
            load.stop.set()
        cluster.destroy()


if __name__ == "__main__":
    main()

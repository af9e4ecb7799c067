#!/usr/bin/env python3
"""Cluster-wide behaviour a Kafka user relies on, checked with real clients on 3 nodes:

- admin operations from any broker reach every broker (create with RF=3, more
  partitions, config change, delete), and metadata from any broker agrees;
- a killed broker stays a replica, reported offline, leaves the ISR, and leaderships move;
- with a replica of a two-replica, min.insync.replicas=2 topic down, acks=all is refused
  with NOT_ENOUGH_REPLICAS (kafka-python, no retries), acks=1 still works, but its record
  stays above the high watermark (invisible to consumers) until the replica is back, as
  Kafka 4.x holds the high watermark below min.insync.replicas;
- restarted brokers rejoin the ISR and preferred leaders come back
  (auto.leader.rebalance.enable);
- SIGTERM is a controlled shutdown: the broker leads nothing when it exits, cleanly;
- kafka-features through one broker changes the finalized features every broker reports,
  and a restarted broker still reports them (they are in the metadata log);
- a topic default set as a dynamic broker config through one broker (message.max.bytes on
  the cluster default) holds on the partition leaders at once, and deleting it lifts it.
"""

import os
import re
import signal
import subprocess
import warnings
import sys
import tempfile
import time

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import NotEnoughReplicasError

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, fail, log, until  # noqa: E402
from nemesis import SETTINGS  # noqa: E402


warnings.filterwarnings("ignore", category=DeprecationWarning)


def partitions(admin, topic):
    return admin.list_topics(topic, timeout=10).topics[topic].partitions


KAFKA_CLI = os.path.join(HERE, "..", "kafka", "kafka-cli.sh")


def kafka_tool(tool, addr, *args):
    """One of Kafka 4.4's tools against one broker: its stdout (fails the test on error)."""
    run = subprocess.run([KAFKA_CLI, tool, "--bootstrap-server", "%s:%d" % addr[:2], *args],
                         capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        fail(f"{tool} {' '.join(args)}: exit {run.returncode}: {run.stdout} {run.stderr}")
    return run.stdout


def kafka_features(addr, *args):
    return kafka_tool("kafka-features", addr, *args)


def finalized_level(addr, feature):
    found = re.search(rf"Feature: {re.escape(feature)}\s.*FinalizedVersionLevel: (\d+)",
                      kafka_features(addr, "describe"))
    return int(found.group(1)) if found else None


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-cluster-api-")
    cluster = Cluster(binary, root, settings=SETTINGS)
    try:
        cluster.launch()
        admins = {i: AdminClient({"bootstrap.servers": "%s:%d" % cluster.addr[i][:2], "log_level": 2})
                  for i in cluster.ids}
        admin = admins[1]

        # Admin operations through one broker, seen by all.
        def create():
            try:
                admin.create_topics([NewTopic("api", 3, 3, config={"min.insync.replicas": "2"})])["api"].result(30)
            except Exception as error:
                if "already exists" not in str(error):
                    log(f"create: {error}")
                    raise
            return True
        until("the topic to be created", create)
        for i, other in admins.items():
            meta = until(f"broker {i} to see the topic", lambda: partitions(other, "api"))
            for p in meta.values():
                if len(p.replicas) != 3 or sorted(p.isrs) != [1, 2, 3] or p.leader != p.replicas[0]:
                    fail(f"broker {i}: unexpected partition {p.id}: {p.replicas} {p.isrs} {p.leader}")
        log("created api (3 partitions, RF 3); every broker agrees")
        # CreateTopics answers the replication factor it used (kafka-python shows the field).
        from kafka.admin import NewTopic as KafkaPythonNewTopic
        kafka_python = KafkaAdminClient(bootstrap_servers="%s:%d" % cluster.addr[2][:2])
        answered = kafka_python.create_topics([KafkaPythonNewTopic("rf-answer", 2, 3)])["topics"][0]
        kafka_python.close()
        if (answered["error_code"], answered["num_partitions"], answered["replication_factor"]) != (0, 2, 3):
            fail(f"CreateTopics answered {answered['error_code']}, {answered['num_partitions']} partitions, "
                 f"RF {answered['replication_factor']} for 2 partitions of RF 3")
        log("CreateTopics answers RF 3 for a topic of RF 3")
        admins[2].create_partitions([NewPartitions("api", 5)])["api"].result(30)
        until("5 partitions on broker 3", lambda: len(partitions(admins[3], "api")) == 5)
        resource = ConfigResource(ConfigResource.Type.TOPIC, "api", set_config={"retention.ms": "3600000",
                                                                               "min.insync.replicas": "2"})
        admins[3].alter_configs([resource])[resource].result(30)  # AlterConfigs, as Kafka's CLI
        described = admins[1].describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "api")])
        configs = list(described.values())[0].result(30)
        if configs["retention.ms"].value != "3600000":
            fail(f"config change not visible on broker 1: {configs['retention.ms'].value}")
        log("grew to 5 partitions through broker 2, changed configs through broker 3")
        admin.create_topics([NewTopic("doomed", 1, 3)])["doomed"].result(30)
        admins[3].delete_topics(["doomed"])["doomed"].result(30)
        until("the deleted topic to go everywhere", lambda: all(
            "doomed" not in a.list_topics(timeout=10).topics for a in admins.values()))
        # An admin client may ask any broker for metadata, so "gone everywhere" above does
        # not mean every node has applied the deletion yet: give each node time to.
        for i in cluster.ids:
            until(f"node {i} to delete the topic's log", lambda i=i: not os.path.exists(
                os.path.join(root, f"n{i}", "doomed-0")), timeout=30)
        log("deleted a topic through broker 3: gone from every broker and disk")

        # Features: downgraded through broker 2, reported by every broker.
        kafka_features(cluster.addr[2], "downgrade", "--feature", "group.version=0")
        for i in (1, 3):
            until(f"broker {i} to report group.version 0",
                  lambda i=i: finalized_level(cluster.addr[i], "group.version") == 0, timeout=30)
        log("kafka-features downgrade through broker 2: brokers 1 and 3 report group.version 0")

        # A topic default changed at runtime through broker 3 holds on every leader.
        def set_default(value):
            change = ["--add-config", f"message.max.bytes={value}"] if value else \
                ["--delete-config", "message.max.bytes"]
            kafka_tool("kafka-configs", cluster.addr[3], "--entity-type", "brokers", "--entity-default",
                       "--alter", *change)

        def produce_big():
            producer = Producer({"bootstrap.servers": "%s:%d" % cluster.addr[1][:2],
                                 "message.max.bytes": 1000000, "retries": 0, "log_level": 2})
            errors = []
            for partition in range(3):
                producer.produce("api", b"x" * 200000, partition=partition,
                                 on_delivery=lambda err, msg: errors.append(err))
            producer.flush(30)
            return errors

        set_default("100000")
        until("every leader to refuse a 200 kB record", lambda: all(
            e is not None and e.code() == KafkaError.MSG_SIZE_TOO_LARGE for e in produce_big()), timeout=30)
        set_default(None)
        until("every leader to take it again", lambda: all(e is None for e in produce_big()), timeout=30)
        log("message.max.bytes=100000 on the cluster default through broker 3: refused on every leader "
            "at once; deleted: accepted again")

        # A broker dies: offline replica, smaller ISR, leaderships moved.
        cluster.kill(3)
        meta = until("broker 3 to be fenced and out of every ISR", lambda: (lambda m: m if all(
            3 not in p.isrs and p.leader in (1, 2) for p in m.values()) else None)(partitions(admin, "api")))
        if not all(3 in p.replicas for p in meta.values()):
            fail("broker 3 dropped from the replica lists")
        # kafka-python's admin shows the raw Metadata response, offline replicas included.
        raw = KafkaAdminClient(bootstrap_servers="%s:%d" % cluster.addr[1][:2])
        described = raw.describe_topics(["api"])[0]["partitions"]
        raw.close()
        offline = {p["partition_index"]: p["offline_replicas"] for p in described}
        if any(reps != [3] for reps in offline.values()):
            fail(f"offline replicas should be [3] everywhere: {offline}")
        log("killed broker 3: it left every ISR, stays a replica reported offline; leaders are 1 and 2")

        cluster.start(3)
        if not cluster.wait_port(3, timeout=60):
            fail("restarted broker 3 never listened")
        until("full ISRs again", lambda: all(sorted(p.isrs) == [1, 2, 3]
                                             for p in partitions(admin, "api").values()), timeout=90)
        log("restarted broker 3: it rejoined every ISR")
        if finalized_level(cluster.addr[3], "group.version") != 0:
            fail("restarted broker 3 lost the finalized group.version")
        kafka_features(cluster.addr[3], "upgrade", "--feature", "group.version=1")
        until("broker 1 to report group.version 1",
              lambda: finalized_level(cluster.addr[1], "group.version") == 1, timeout=30)
        log("restarted broker 3 still reports group.version 0; upgraded back through it")

        # A two-replica topic loses a replica (the quorum keeps its majority): acks=all
        # is refused below min.insync.replicas, acks=1 is not.
        admin.create_topics([NewTopic("narrow", num_partitions=1, replica_assignment=[[1, 2]],
                                      config={"min.insync.replicas": "2"})])["narrow"].result(30)
        until("narrow's full ISR", lambda: sorted(partitions(admin, "narrow")[0].isrs) == [1, 2])
        cluster.kill(2)
        until("broker 2 out of narrow's ISR", lambda: (lambda p: p.isrs == [1] and p.leader == 1)(
            partitions(admin, "narrow")[0]))
        bootstrap1 = "%s:%d" % cluster.addr[1][:2]
        producer = KafkaProducer(bootstrap_servers=bootstrap1, acks="all", retries=0)
        try:
            producer.send("narrow", b"refused", partition=0).get(timeout=30)
            fail("acks=all succeeded with an ISR of 1 and min.insync.replicas=2")
        except NotEnoughReplicasError:
            log("acks=all with ISR 1 < min.insync.replicas 2: NOT_ENOUGH_REPLICAS")
        producer.close()
        narrow0 = TopicPartition("narrow", 0)
        watcher = KafkaConsumer(bootstrap_servers=bootstrap1)

        def narrow_high_watermark():
            return watcher.end_offsets([narrow0])[narrow0]

        held_at = narrow_high_watermark()
        producer = KafkaProducer(bootstrap_servers=bootstrap1, acks=1, retries=0)
        accepted = producer.send("narrow", b"accepted", partition=0).get(timeout=30)
        producer.close()
        time.sleep(1)
        if accepted.offset != held_at or narrow_high_watermark() != held_at:
            fail(f"an acks=1 record at offset {accepted.offset} below min.insync.replicas moved the "
                 f"high watermark from {held_at} to {narrow_high_watermark()}")
        log(f"acks=1 accepted meanwhile at offset {accepted.offset}; the high watermark holds at {held_at}")

        # Back: ISR full again, preferred leaders restored.
        cluster.start(2)
        # The port listens once broker 2 is unfenced: until then the ISRs below may still
        # be the ones from before its controller session expired.
        if not cluster.wait_port(2, timeout=60):
            fail("restarted broker 2 never listened")
        until("full ISRs", lambda: all(sorted(p.isrs) == [1, 2, 3]
                                       for p in partitions(admin, "api").values()), timeout=90)
        until("preferred leaders", lambda: all(p.leader == p.replicas[0]
                                               for p in partitions(admin, "api").values()), timeout=90)
        log("restarted broker 2 rejoined every ISR; preferred leaders are back")
        until("the acks=1 record committed once narrow's ISR is full again",
              lambda: narrow_high_watermark() == held_at + 1, timeout=60)
        watcher.close()
        log(f"narrow's ISR full again: the high watermark moved to {held_at + 1}")

        # Controlled shutdown.
        led = [p.id for p in partitions(admin, "api").values() if p.leader == 2]
        if not led:
            fail("broker 2 leads nothing to move")
        proc = cluster.procs[2]
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        if code != 0:
            fail(f"broker 2 exited {code} after SIGTERM")
        meta = partitions(admin, "api")
        if any(p.leader in (2, -1) for p in meta.values()):
            fail(f"leaderships not moved before exit: {[(p.id, p.leader) for p in meta.values()]}")
        log(f"SIGTERM: broker 2 moved its leaderships ({led}) away before a clean exit")
        log("PASS")
        return 0
    finally:
        cluster.destroy()


if __name__ == "__main__":
    sys.exit(main())

"""Consumer groups with librdkafka (confluent-kafka), both protocols: classic
(JoinGroup/SyncGroup) and KIP-848 (group.protocol=consumer). Two and three consumers split
a topic and together receive every record exactly once; a consumer killed with kill -9
(no LeaveGroup) is evicted after its session timeout and its partitions move; committed
offsets survive a broker restart. Starts its own broker (STRAND_BIN).

    python3 groups_test.py [classic|consumer ...]
"""
import multiprocessing
import os
import signal
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from dataset import check, fail, ok
from restart_test import Broker, free_port

PARTITIONS = 6


def consumer_config(bootstrap, group, protocol, **extra):
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    config.update(extra)
    return config


def produce(bootstrap, topic, start, count):
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
    check(producer.flush(30) == 0, f"produced {count} records")


def consume_process(bootstrap, topic, group, protocol, results, name, seconds):
    """Runs in its own process so that it can be killed with SIGKILL."""
    consumer = Consumer(consumer_config(bootstrap, group, protocol))
    consumer.subscribe([topic])
    deadline = time.time() + seconds
    last_assignment = None
    while time.time() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            results.append((name, message.partition(), message.offset(), int(message.value())))
            consumer.commit(message=message, asynchronous=False)
        current = tuple(sorted(tp.partition for tp in consumer.assignment()))
        if current != last_assignment:
            results.append((name, "assignment", current, None))
            last_assignment = current
    consumer.close()


def assignments(results):
    latest = {}
    for name, kind, value, _ in results:
        if kind == "assignment":
            latest[name] = value
    return latest


def records(results):
    return [(p, o, v) for name, p, o, v in results if p != "assignment"]


def wait_until(predicate, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    fail(f"timed out waiting for {what}")


def run(protocol):
    manager = multiprocessing.Manager()
    with tempfile.TemporaryDirectory() as workdir:
        port = free_port()
        bootstrap = f"127.0.0.1:{port}"
        config = os.path.join(workdir, "strand.toml")
        with open(config, "w") as f:
            f.write("group_initial_rebalance_delay_ms = 0\ngroup_min_session_timeout_ms = 1000\n"
                    "group_consumer_session_timeout_ms = 6000\ngroup_consumer_heartbeat_interval_ms = 500\n")
        broker = Broker(os.path.join(workdir, "data"), port, config=config)
        broker.start()
        topic = f"groups-{protocol}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(15)
        group = f"group-{protocol}"

        # Two consumers split the topic, then a third joins.
        results = manager.list()
        workers = {}
        for name in ("a", "b"):
            workers[name] = multiprocessing.Process(target=consume_process, args=(bootstrap, topic, group, protocol, results, name, 60))
            workers[name].start()
        wait_until(lambda: len(assignments(results)) == 2 and all(len(v) == 3 for v in assignments(results).values()), 30,
                   "two consumers to share the partitions")
        split = assignments(results)
        check(sorted(p for v in split.values() for p in v) == list(range(PARTITIONS)) and all(len(v) == 3 for v in split.values()),
              f"{protocol}: two consumers split {PARTITIONS} partitions 3/3: {split}")
        produce(bootstrap, topic, 0, 600)
        wait_until(lambda: len(records(results)) >= 600, 30, "600 records consumed")
        workers["c"] = multiprocessing.Process(target=consume_process, args=(bootstrap, topic, group, protocol, results, "c", 60))
        workers["c"].start()
        wait_until(lambda: len(assignments(results)) == 3 and all(len(v) == 2 for v in assignments(results).values())
                   and sorted(p for v in assignments(results).values() for p in v) == list(range(PARTITIONS)), 40,
                   "three consumers with two partitions each")
        ok(f"{protocol}: a third consumer joined: {assignments(results)}")
        produce(bootstrap, topic, 600, 600)
        wait_until(lambda: len(records(results)) >= 1200, 30, "1200 records consumed")
        time.sleep(1)
        values = [v for _, _, v in records(results)]
        check(sorted(values) == list(range(1200)), f"{protocol}: every record consumed exactly once ({len(values)} reads)")

        # kill -9 one consumer: no LeaveGroup; the survivors take its partitions after
        # the session timeout.
        os.kill(workers["c"].pid, signal.SIGKILL)
        workers["c"].join()
        killed_at = time.time()
        wait_until(lambda: sorted(p for n, v in assignments(results).items() if n != "c" for p in v) == list(range(PARTITIONS)),
                   40, "the killed consumer's partitions to move")
        ok(f"{protocol}: partitions of the killed consumer moved after {time.time() - killed_at:.1f}s: "
           f"{ {n: v for n, v in assignments(results).items() if n != 'c'} }")
        produce(bootstrap, topic, 1200, 300)
        wait_until(lambda: len(set(v for _, _, v in records(results))) >= 1500, 30, "records after the move")
        for worker in ("a", "b"):
            workers[worker].terminate()
            workers[worker].join()

        # Committed offsets survive a broker restart.
        check(broker.stop(signal.SIGTERM) == 0, f"{protocol}: broker stopped cleanly")
        broker.start()
        produce(bootstrap, topic, 1500, 60)
        resumed = Consumer(consumer_config(bootstrap, group, protocol))
        resumed.subscribe([topic])
        seen = []
        deadline = time.time() + 30
        while time.time() < deadline and len(seen) < 60:
            message = resumed.poll(0.5)
            if message is not None and not message.error():
                seen.append(int(message.value()))
        resumed.close()
        check(sorted(seen) == list(range(1500, 1560)),
              f"{protocol}: after a broker restart the group resumes from its commits ({len(seen)} records, first {min(seen) if seen else None})")
        check(broker.stop(signal.SIGTERM) == 0, f"{protocol}: broker stopped cleanly at the end")


if __name__ == "__main__":
    for protocol in sys.argv[1:] or ["classic", "consumer"]:
        try:
            run(protocol)
        finally:
            for child in multiprocessing.active_children():
                child.kill()
    print("PASS consumer groups (librdkafka)")

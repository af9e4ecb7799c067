#!/usr/bin/env python3
"""Fault injection against a 3-node Strand cluster, with a checker (Jepsen-style).

Workload: idempotent librdkafka producers (acks=all) write unique values to an RF=3,
min.insync.replicas=2 topic while a consumer group reads it. Meanwhile a nemesis, driven
by a seeded schedule, repeatedly
  kill-leader   kill -9s the leader of a partition, restarts it after a pause
  pause         SIGSTOPs a node past its session timeout, then SIGCONTs it
  partition     cuts a node off from the other nodes (network namespaces + iptables;
                clients still reach it), then heals it
  restart-all   kill -9s every node, then starts them all.
  power-loss    (only with --faults naming it) one node, or every node at once, loses
                power: each data directory is a strand-lazyfs mount, killed with the
                node, so what the node had not fsynced is lost as in a power cut.
  store-stall   (only with --tiered) SIGSTOPs the S3 server the nodes copy segments
                to, then SIGCONTs it.

`--tiered` runs the topic on tiered storage (moto's S3 server on loopback, so no network
namespaces and no partition fault): 64 KiB segments copied by each partition's leader
and deleted locally after a second, so leaders change, nodes die and the store stalls
while copies are under way; the final read starts at offset 0, in the bucket. Replicas
are compared from the newest local start of the three, and every copy the bucket names
must have all its objects.
Then everything is healed, producers flush, and the checker reads the whole topic:

  lost        acknowledged writes missing (or at another offset) in the final log
  duplicated  values present more than once in the final log
  reordered   a producer's acknowledged writes to a partition not in send order
  phantom     records a consumer read that are not in the final log at that offset
  divergent   replicas whose batches differ below the high watermark (data files,
              after a clean stop)

Exit status 1 if any is non-zero. The seed is printed; `--seed N` replays the same fault
schedule (which node leads a partition at that moment may differ).

`--workload txn` replaces the idempotent producers with transactional ones, a
consume-transform-produce pipeline and read_committed readers, under the same nemesis,
and checks the transactions instead (nemesis_txn.py says what).

  interop/cluster/nemesis.py                 short run (CI)
  interop/cluster/nemesis.py --duration 600  long run
  interop/cluster/nemesis.py --workload txn --duration 300
  interop/cluster/nemesis.py --faults power-loss --flush every-batch
  interop/cluster/nemesis.py --faults power-loss,kill-leader,pause --duration 300
  interop/cluster/nemesis.py --tiered --faults kill-leader,pause,restart-all,store-stall
"""

import argparse
import collections
import glob
import json
import os
import random
import signal
import struct
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from cluster import Cluster, log, watermarks  # noqa: E402

TOPIC = "nemesis"
PARTITIONS = 3
SESSION_TIMEOUT_MS = 2500
SETTINGS = {
    "broker_heartbeat_interval_ms": 250,
    "broker_session_timeout_ms": SESSION_TIMEOUT_MS,
    "replica_lag_time_max_ms": 3000,
    "quorum_heartbeat_interval_ms": 50,
    "leader_imbalance_check_interval_seconds": 5,
    "default_replication_factor": 3,
    "group_initial_rebalance_delay_ms": 0,
}
# SETTINGS by Kafka's names, for --kafka (the quorum's heartbeat has no Kafka setting:
# KRaft's fetch and election timeouts stay at Kafka's defaults).
KAFKA_NAMES = {
    "broker_heartbeat_interval_ms": "broker.heartbeat.interval.ms",
    "broker_session_timeout_ms": "broker.session.timeout.ms",
    "replica_lag_time_max_ms": "replica.lag.time.max.ms",
    "leader_imbalance_check_interval_seconds": "leader.imbalance.check.interval.seconds",
    "default_replication_factor": "default.replication.factor",
    "group_initial_rebalance_delay_ms": "group.initial.rebalance.delay.ms",
}
FAULTS = ["kill-leader", "pause", "partition", "restart-all"]
# Faults run only when --faults names them.
OPT_IN_FAULTS = ["power-loss", "store-stall"]
# --tiered: the topic's segments go to the store as they seal, and go locally a second
# after their copy.
TIERED_TOPIC_CONFIG = {"remote.storage.enable": "true", "local.retention.ms": "1000",
                       "retention.ms": "-1", "internal.segment.bytes": str(64 * 1024)}
TIERED_SETTINGS = {"remote_log_storage_system_enable": "true",
                   "remote_storage_url": '"s3://nemesis/cluster"',
                   "remote_log_manager_task_interval_ms": 500, "retention_check_interval_ms": 500}


def schedule(seed, duration, can_partition, faults=FAULTS):
    """The fault schedule: (start second, fault, partition or node index, fault seconds).
    power-loss's target is a node, or 0: every node at once."""
    rng = random.Random(seed)
    kinds = faults if can_partition else [f for f in faults if f != "partition"]
    weights = {"kill-leader": 4, "pause": 3, "partition": 3, "restart-all": 1, "power-loss": 3,
               "store-stall": 3}
    plan, at = [], 3.0
    while at < duration:
        kind = rng.choices(kinds, [weights[k] for k in kinds])[0]
        if kind == "kill-leader":
            target = rng.randrange(PARTITIONS)
        elif kind == "power-loss":
            target = rng.randrange(4)
        else:
            target = rng.randrange(3) + 1
        length = {
            "kill-leader": rng.uniform(1, 4),
            "pause": SESSION_TIMEOUT_MS / 1000 + rng.uniform(0.5, 2.5),
            "partition": rng.uniform(3, 8),
            "restart-all": rng.uniform(1, 3),
            "power-loss": rng.uniform(1, 4),
            "store-stall": rng.uniform(2, 6),
        }[kind]
        plan.append((round(at, 2), kind, target, round(length, 2)))
        at += length + rng.uniform(2, 5)
    return plan


def leader_of_topic(admin, topic, partition):
    try:
        meta = admin.list_topics(topic, timeout=5).topics[topic]
        return meta.partitions[partition].leader
    except Exception:
        return -1


class Workload:
    def __init__(self, bootstrap, producers, rate):
        self.bootstrap = bootstrap
        self.acked = {}  # value -> (partition, offset)
        self.failed = collections.Counter()
        self.sent = 0
        self.seen = []  # (partition, offset, value) read by the consumer group
        self.fatal = 0
        self.stop = threading.Event()
        # Reentrant: a delivery callback can run inside a held block (a dropped producer
        # delivers its purged messages as it is freed, on whichever thread frees it).
        self.lock = threading.RLock()
        self.threads = [threading.Thread(target=self.produce, args=(k, rate), daemon=True)
                        for k in range(producers)]
        self.threads.append(threading.Thread(target=self.consume, daemon=True))

    def start(self):
        for t in self.threads:
            t.start()

    def progress(self):
        with self.lock:
            return (f"  sent {self.sent}, acked {len(self.acked)}, "
                    f"failed {sum(self.failed.values())}, read {len(self.seen)}")

    def describe(self, admin, node):
        return None

    def finish(self):
        time.sleep(3)  # let producers deliver under a healthy cluster
        self.stop.set()
        for t in self.threads:
            t.join(180)

    def new_producer(self):
        return Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                         "log_level": 2,
                         "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
                         "request.timeout.ms": 10000, "metadata.max.age.ms": 5000})

    def produce(self, k, rate):
        producer = self.new_producer()
        seq = 0

        def delivered(error, message):
            with self.lock:
                if error is None:
                    self.acked[message.value().decode()] = (message.partition(), message.offset())
                else:
                    self.failed[error.name()] += 1
                    if error.fatal():
                        self.fatal += 1

        interval = 1.0 / rate
        next_send = time.time()
        while not self.stop.is_set():
            value = f"p{k}-{seq:08d}"
            try:
                producer.produce(TOPIC, value=value.encode(), on_delivery=delivered)
                seq += 1
                with self.lock:
                    self.sent += 1
            except BufferError:
                producer.poll(0.1)
                continue
            except KafkaException as error:
                log(f"producer {k}: {error}; starting a new producer")
                producer.flush(30)
                producer = self.new_producer()
            producer.poll(0)
            next_send += interval
            time.sleep(max(0.0, next_send - time.time()))
        remaining = producer.flush(120)
        if remaining:
            log(f"producer {k}: {remaining} messages never acknowledged or failed")

    def consume(self):
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "nemesis-readers",
                             "log_level": 2,
                             "auto.offset.reset": "earliest", "enable.auto.commit": True,
                             "session.timeout.ms": 10000, "metadata.max.age.ms": 5000})
        consumer.subscribe([TOPIC])
        while not self.stop.is_set():
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            with self.lock:
                self.seen.append((message.partition(), message.offset(), message.value().decode()))
        consumer.close()


def read_all(bootstrap):
    """The whole topic as {partition: {offset: value}}, read to each high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "nemesis-final", "log_level": 2,
                         "enable.auto.commit": False})
    final = {}
    for partition in range(PARTITIONS):
        tp = TopicPartition(TOPIC, partition, 0)
        low, high = watermarks(consumer, tp)
        tp.offset = low
        consumer.assign([tp])
        records = {}
        deadline = time.time() + 120
        while (not records or max(records) < high - 1) and high > low and time.time() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            records[message.offset()] = message.value().decode()
        final[partition] = records
    consumer.close()
    return final


def batches(directory, limit):
    """(base offset, last offset, crc) of every batch below `limit` in a partition dir."""
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "*.log"))):
        data = open(path, "rb").read()
        position = 0
        while position + 61 <= len(data):
            base, length = struct.unpack(">qi", data[position:position + 12])
            crc, = struct.unpack(">I", data[position + 17:position + 21])
            last_delta, = struct.unpack(">i", data[position + 23:position + 27])
            if base + last_delta >= limit:
                return out
            out.append((base, base + last_delta, crc))
            position += 12 + length
    return out


def high_watermarks(data_dir, topic):
    path = os.path.join(data_dir, "replication-offset-checkpoint")
    marks = {}
    if os.path.exists(path):
        for line in open(path).read().splitlines()[2:]:
            name, partition, offset = line.rsplit(" ", 2)
            if name == topic:
                marks[int(partition)] = int(offset)
    return marks


def divergent_replicas(cluster, root, topics):
    """Partitions whose replicas' batches differ below the lowest checkpointed high
    watermark, from the data files of stopped nodes. Compacted topics are left out: each
    replica cleans its own segments."""
    divergent = []
    for topic, partitions in topics:
        marks = {i: high_watermarks(cluster.log_dir(i), topic) for i in cluster.ids}
        for partition in range(partitions):
            limit = min(marks[i].get(partition, 0) for i in cluster.ids)
            logs = {i: batches(os.path.join(cluster.log_dir(i), f"{topic}-{partition}"), limit)
                    for i in cluster.ids}
            # Tiered: each replica deletes locally what the store holds, at its own pace;
            # they are compared from the newest local start of the three.
            start = max((batches[0][0] for batches in logs.values() if batches), default=0)
            logs = {i: [b for b in batches if b[0] >= start] for i, batches in logs.items()}
            reference = logs[cluster.ids[0]]
            for i in cluster.ids[1:]:
                if logs[i] != reference:
                    divergent.append(f"replica of node {i} differs on {topic}-{partition} below {limit}")
                    log(divergent[-1])
    return divergent


def wait_for_full_isr(admin, topic, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            meta = admin.list_topics(topic, timeout=5).topics[topic]
            if all(len(p.isrs) == 3 and p.leader >= 0 for p in meta.partitions.values()):
                return True
        except Exception:
            pass
        time.sleep(0.5)
    return False


def check_idempotent(cluster, root, workload, bootstrap, seed):
    """The idempotent workload's checker; returns (counts, number of violations)."""
    final = read_all(bootstrap)
    # Replicas, compared from their files after a clean stop.
    codes = cluster.stop_all()
    divergent = len(divergent_replicas(cluster, root, [(TOPIC, PARTITIONS)]))
    # librdkafka acknowledges an idempotent batch whose own answer was lost once a
    # later batch of the partition is acknowledged ("implicit ack"); its offset is then
    # unknown (None), so such a record is looked up by value in its partition.
    values = {p: set(records.values()) for p, records in final.items()}
    lost = [v for v, (p, o) in workload.acked.items()
            if (final.get(p, {}).get(o) != v if o is not None
                else v not in values.get(p, ()))]
    occurrences = collections.Counter(v for records in final.values() for v in records.values())
    duplicated = [v for v, n in occurrences.items() if n > 1]
    reordered = 0
    by_producer = collections.defaultdict(list)
    for value, (p, o) in workload.acked.items():
        if o is None:
            continue  # implicitly acknowledged: no offset to order by
        producer, seq = value.split("-")
        by_producer[(producer, p)].append((o, int(seq)))
    for entries in by_producer.values():
        entries.sort()
        reordered += sum(1 for a, b in zip(entries, entries[1:]) if b[1] < a[1])
    phantom = [(p, o, v) for p, o, v in workload.seen if final.get(p, {}).get(o) != v]
    unacked_present = sum(1 for v in occurrences if v not in workload.acked)
    counts = {
        "seed": seed, "sent": workload.sent, "acked": len(workload.acked),
        "failed": dict(workload.failed), "fatal_producer_errors": workload.fatal,
        "acked_without_offset": sum(1 for _, o in workload.acked.values() if o is None),
        "read_by_group": len(workload.seen), "final_records": sum(len(r) for r in final.values()),
        "unacked_but_present": unacked_present, "lost": len(lost),
        "duplicated": len(duplicated), "reordered": reordered, "phantom": len(phantom),
        "divergent": divergent, "exit_codes": codes,
    }
    log("result: " + json.dumps(counts))
    for name, items in (("lost", lost), ("duplicated", duplicated), ("phantom", phantom)):
        if items:
            log(f"{name} (first 10): {items[:10]}")
    bad = len(lost) + len(duplicated) + reordered + len(phantom) + divergent
    if workload.acked == {}:
        log("FAIL: nothing was acknowledged")
        bad += 1
    return counts, bad


def create_topic(admin, topic, partitions, config=None):
    deadline = time.time() + 60
    while True:
        futures = admin.create_topics([NewTopic(topic, partitions, 3,
                                                config={"min.insync.replicas": "2", **(config or {})})])
        try:
            futures[topic].result(30)
            return
        except Exception as error:
            if "already exists" in str(error):
                return
            if time.time() > deadline:
                raise
            time.sleep(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--duration", type=float, default=60, help="seconds of faults")
    parser.add_argument("--workload", choices=["idempotent", "txn"], default="idempotent")
    parser.add_argument("--producers", type=int, default=None,
                        help="producers (idempotent: 2; txn: transactional producers, 3)")
    parser.add_argument("--rate", type=float, default=None,
                        help="records/s per idempotent producer (200), or of the ctp input (100)")
    parser.add_argument("--ctp-workers", type=int, default=2,
                        help="txn: consume-transform-produce workers (0: none)")
    parser.add_argument("--binary", default=os.environ.get("STRAND_BIN", "target/release/strand"))
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help="comma-separated faults to schedule, of: " + ", ".join(FAULTS + OPT_IN_FAULTS))
    parser.add_argument("--flush", choices=["page-cache", "every-batch"], default="page-cache",
                        help="the nodes' flush mode: page cache (Kafka's default) or fsync before the ack")
    parser.add_argument("--kafka", action="store_true",
                        help="run Apache Kafka 4.4 (interop/kafka/run-kafka.sh) instead of Strand, "
                             "with the same settings by Kafka's names, for comparison")
    parser.add_argument("--lazyfs", default=os.environ.get("STRAND_LAZYFS", "target/release/strand-lazyfs"),
                        help="strand-lazyfs, for power-loss")
    parser.add_argument("--tiered", action="store_true",
                        help="the topic on tiered storage (moto's S3 server), for store-stall and "
                             "faults while copies are under way")
    args = parser.parse_args()
    faults = args.faults.split(",")
    unknown = [f for f in faults if f not in FAULTS + OPT_IN_FAULTS]
    if unknown:
        parser.error(f"unknown faults: {unknown}")
    if "store-stall" in faults and not args.tiered:
        parser.error("store-stall needs --tiered")
    if args.tiered and (args.workload != "idempotent" or args.kafka):
        parser.error("--tiered runs the idempotent workload on Strand")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    root = tempfile.mkdtemp(prefix="strand-nemesis-")
    lazyfs = os.path.abspath(args.lazyfs) if "power-loss" in faults else None
    kafka = None
    if args.kafka:
        kafka = [f"{KAFKA_NAMES[key]}={value}" for key, value in SETTINGS.items() if key in KAFKA_NAMES]
        if args.flush == "every-batch":
            kafka.append("log.flush.interval.messages=1")
    settings = dict(SETTINGS, flush=f'"{args.flush}"')
    store = None
    if args.tiered:
        from s3_server import S3Server
        os.makedirs(root, exist_ok=True)
        store = S3Server(root, "nemesis")
        os.environ.update(store.environment())
        settings.update(TIERED_SETTINGS)
    # The store listens on loopback, out of the nodes' namespaces' reach.
    cluster = Cluster(os.path.abspath(args.binary), root, settings=settings,
                      lazyfs=lazyfs, kafka=kafka, use_netns=False if args.tiered else None)
    plan = schedule(seed, args.duration, cluster.use_netns, faults)
    log(f"seed {seed}; {'Apache Kafka' if args.kafka else 'Strand'}; workload {args.workload}; "
        f"faults {','.join(faults)}; flush {args.flush}; "
        f"data in {root}; network namespaces: {cluster.use_netns}")
    log("schedule: " + json.dumps(plan))
    bootstrap = cluster.bootstrap()
    if args.workload == "txn":
        from nemesis_txn import TxnWorkload
        workload = TxnWorkload(bootstrap, seed, producers=args.producers or 3,
                               ctp_workers=args.ctp_workers, input_rate=args.rate or 100)
        topics = workload.topics
    else:
        workload = Workload(bootstrap, args.producers or 2, args.rate or 200)
        topics = [(TOPIC, PARTITIONS)]
    topic = topics[0][0]  # kill-leader's partitions
    passed = False
    try:
        cluster.launch()
        log("cluster up")
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        for name, partitions in topics:
            create_topic(admin, name, partitions, TIERED_TOPIC_CONFIG if args.tiered else None)
        log("topics created" if len(topics) > 1 else "topic created")
        for name, _ in topics:
            wait_for_full_isr(admin, name, 60)
        log("ISR full; starting the workload")
        workload.start()
        started = time.time()
        for at, kind, target, length in plan:
            time.sleep(max(0.0, started + at - time.time()))
            if kind == "kill-leader":
                node = leader_of_topic(admin, topic, target)
                node = node if node in cluster.ids else random.Random(seed + int(at)).choice(cluster.ids)
                log(f"kill -9 node {node} (leader of {topic}-{target}) for {length}s")
                coordinates = workload.describe(admin, node)
                if coordinates:
                    log(coordinates)
                cluster.kill(node)
                time.sleep(length)
                cluster.start(node)
            elif kind == "pause":
                log(f"SIGSTOP node {target} for {length}s")
                cluster.pause(target)
                time.sleep(length)
                cluster.resume(target)
            elif kind == "partition":
                log(f"isolate node {target} from its peers for {length}s")
                cluster.isolate(target)
                time.sleep(length)
                cluster.heal(target)
            elif kind == "power-loss":
                nodes = cluster.ids if target == 0 else [target]
                log(f"power loss on {'every node' if target == 0 else f'node {target}'}, "
                    f"back after {length}s")
                for i in nodes:
                    cluster.lose_power(i)
                time.sleep(length)
                cluster.start_all()
            elif kind == "store-stall":
                log(f"SIGSTOP the S3 server for {length}s")
                store.process.send_signal(signal.SIGSTOP)
                time.sleep(length)
                store.process.send_signal(signal.SIGCONT)
            elif kind == "restart-all":
                log(f"kill -9 every node, restart after {length}s")
                for i in cluster.ids:
                    cluster.kill(i)
                time.sleep(length)
                cluster.start_all()
            log(workload.progress())
        log(f"healing after {time.time() - started:.0f} s; waiting for every replica to rejoin the ISR")
        cluster.heal_all()
        for name, _ in topics:
            if not wait_for_full_isr(admin, name, 90):
                log(f"WARNING: the ISR of {name} did not become full within 90 s")
        workload.finish()
        log(f"clients stopped after {time.time() - started:.0f} s")
        if args.workload == "txn":
            counts, bad = workload.check(cluster, root, seed,
                                         lambda topics: divergent_replicas(cluster, root, topics))
        else:
            counts, bad = check_idempotent(cluster, root, workload, bootstrap, seed)
        if store:
            whole, why = store.copies_are_whole()
            copies = len(store.keys(suffix=".json"))
            # Replicas whose local log no longer starts at 0: the final read took what
            # they deleted from the bucket.
            trimmed = sum(1 for i in cluster.ids for p in range(PARTITIONS) if min(
                (int(os.path.basename(f).split(".")[0])
                 for f in glob.glob(os.path.join(cluster.log_dir(i), f"{TOPIC}-{p}", "*.log"))),
                default=0) > 0)
            log(f"the bucket holds {copies} segment copies, every one whole: {whole} {why}; "
                f"{trimmed} of {len(cluster.ids) * PARTITIONS} replicas start after offset 0 locally")
            if not whole or copies == 0 or trimmed == 0:
                bad += 1
        if bad:
            log(f"FAIL (replay with --seed {seed}{' --workload txn' if args.workload == 'txn' else ''}"
                f" --faults {','.join(faults)} --flush {args.flush}{' --kafka' if args.kafka else ''}); "
                f"logs in {root}")
            return 1
        passed = True
        log(f"PASS ({time.time() - started:.0f} s)")
        return 0
    finally:
        cluster.destroy()
        if store:
            store.process.send_signal(signal.SIGCONT)
            store.close()
        if passed and not args.keep:
            import shutil
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

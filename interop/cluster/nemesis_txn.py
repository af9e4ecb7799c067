"""The transactional workload of nemesis.py (`--workload txn`) and its checker, after
Jepsen's Kafka workload.

Clients (librdkafka through confluent-kafka, acks=all):

  producers   2-3 transactional producers (distinct transactional.ids), each looping:
              begin, write 4-8 records spread over the partitions of `nemesis-txn`,
              then commit (most) or abort (some; the seeded RNG decides). A record's
              value names its transaction: t<producer>-<txn>-<index>/<size>.
  ctp         consume-transform-produce workers in one group, reading `nemesis-txn-in`
              (filled by a plain idempotent producer) with read_committed and writing
              c<worker>-<txn>-<index>/<size>=<input value> to `nemesis-txn-out` in
              transactions that also carry the group's offsets
              (send_offsets_to_transaction); some are aborted on purpose.
  readers     a read_committed consumer group reading both transactional topics
              throughout, recording what it read at which offset, per session (one
              assignment of one member).

Each transaction's fate, by librdkafka's rules (retriable: retry the call; abortable:
abort; fatal: a new producer whose init_transactions fences the old one):

  committed   commit_transaction returned
  aborted     abort_transaction returned, commit never called
  abandoned   commit never called and the producer was replaced: a fatal error, retries
              past the transaction's deadline, or a call that hung past its timeout
              (librdkafka#5456); the successor's init_transactions aborts it
  unknown     commit_transaction was called and raised (whatever happened next)

After the faults heal, a sentinel goes to every partition and fresh consumers read each
partition from the start to it, read_committed and read_uncommitted. Violations:

  lost            a committed transaction missing a record (or not at the offset its
                  delivery report gave) under read_committed
  aborted_read    a record of an aborted or abandoned transaction visible under
                  read_committed, or a record the readers got under read_committed
                  that the final read_committed read does not show
  partial         an unknown-fate transaction visible in part
  duplicated      a value more than once in a final read (either isolation level)
  non_monotonic   a reader session's offsets for a partition not strictly increasing
  phantom         a record read (by a reader or a ctp worker) that is not in the final
                  log at that offset
  unexpected      a record of no transaction the workload ran, or on another partition
  stuck           a final read that never reached its sentinel (a transaction left open
                  holds the last stable offset back)
  ctp_duplicated  an input record transformed more than once in the committed output
  ctp_lost        an input record below the group's final committed offset with no
                  committed transformation
  ctp_ahead       a committed transformation of an input record at or past the group's
                  final committed offset (its output committed without its offsets)
  divergent       replicas whose batches differ below the high watermark
  panicked        a node that panicked; stalled: a client thread past its deadline (a
                  reader stuck in librdkafka's close() while a fresh client is served by
                  the group's coordinator is reported, not counted: docs/FAULTS.md)

Not checked: write cycles (G0) and G1c. Kafka orders a partition's records by append,
not by commit, so two concurrent transactions may precede each other on different
partitions without any anomaly; and the only read-write dependencies here (ctp) run from
a non-transactional topic, so no cycle through them can form.
"""

import collections
import json
import logging
import os
import random
import re
import sys
import threading
import time
import traceback
import uuid

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaException, Producer,
                             TopicPartition)

from cluster import coordinator_partition, log

TOPIC = "nemesis-txn"
INPUT = "nemesis-txn-in"
OUTPUT = "nemesis-txn-out"
PARTITIONS = 3
STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
CTP_GROUP = "nemesis-ctp"
READER_GROUP = "nemesis-txn-readers"
SENTINEL = "sentinel-"
ABORT_RATIO = 0.2          # producer transactions aborted on purpose
CTP_ABORT_RATIO = 0.1
# transaction.timeout.ms per producer (message.timeout.ms is the same: librdkafka wants it
# no larger). 10 s is shorter than a partition fault plus the elections after it, so the
# coordinator times such transactions out under the producer (fencing it); 60 s outlasts
# every fault. The ctp workers use 30 s.
TXN_TIMEOUTS_MS = (10000, 30000, 60000)
CTP_TXN_TIMEOUT_MS = 30000
TXN_DEADLINE = 90          # one transaction, retries included; past it: a new producer
INIT_DEADLINE = 120        # init_transactions, retries and new instances included
CALL_TIMEOUT = 30          # each librdkafka transactional call (one may start just
                           # before a deadline, so it can overrun it by this much)
REWIND_DEADLINE = 60       # a ctp worker's fetch of the committed offsets
CTP_DRAIN_SECONDS = 30     # after the stop: ctp workers catch up with the input
# The longest a client thread may take to stop: the drain, then one transaction retried
# to its deadline, a new producer, and a rewind.
JOIN_DEADLINE = (CTP_DRAIN_SECONDS + TXN_DEADLINE + INIT_DEADLINE + REWIND_DEADLINE
                 + 3 * CALL_TIMEOUT + 15)
FINAL_READ_DEADLINE = 150  # past the longest transaction timeout plus the coordinator's
                           # 10 s abort scan
# librdkafka debug contexts for the ctp clients (e.g. cgrp,eos,fetch), on stderr.
DEBUG = os.environ.get("STRAND_NEMESIS_DEBUG", "")
VALUE = re.compile(r"([tc]\d+-\d+)-(\d+)/(\d+)(?:=.*)?")


class Ring(logging.Handler):
    """The last lines of a client's librdkafka debug log, shown only if it stalls."""

    def __init__(self, lines=3000):
        super().__init__()
        self.lines = collections.deque(maxlen=lines)

    def emit(self, record):
        self.lines.append(f"{time.strftime('%H:%M:%S')} {record.getMessage()}")


class Stalled(Exception):
    """A client call kept failing past its deadline."""


class Hung(Exception):
    """A librdkafka call that did not return within its own timeout."""


def kafka_error(exc):
    return exc.args[0] if exc.args else None


def error_name(exc):
    error = kafka_error(exc)
    return error.name() if hasattr(error, "name") else repr(exc)


def txn_of(value):
    """The transaction key (t0-17, c1-4) a value belongs to, or None."""
    m = VALUE.fullmatch(value)
    return m.group(1) if m else None


class Txn:
    """One transaction as the client saw it."""

    def __init__(self, key, records):
        self.key = key
        self.records = records            # [(topic, partition, value)]
        self.inputs = []                  # ctp: [(partition, offset, value)] consumed
        self.fate = None
        self.commit_called = False
        self.aborted_after_commit = False  # unknown, then abort_transaction returned
        self.delivered = {}               # value -> (partition, offset or None) | error
        self.events = []                  # errors met, in order
        self.started = time.time()
        self.ended = None


class TxnClient:
    """One transactional.id: its current producer, replaced after fatal errors, and the
    librdkafka rules for running a transaction through faults."""

    def __init__(self, bootstrap, transactional_id, note_error, timeout_ms):
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id
        self.note_error = note_error      # tallies an error name across clients
        self.timeout_ms = timeout_ms
        self.producer = None
        self.instances = 0

    def create(self):
        """A producer whose init_transactions succeeded: it fences every earlier instance
        (the coordinator aborts an open transaction or completes a prepared one first)."""
        deadline = time.time() + INIT_DEADLINE
        self.producer = None  # drops the previous instance
        while True:
            self.producer = Producer({
                "bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id,
                "acks": "all", "linger.ms": 5, "message.timeout.ms": self.timeout_ms,
                "transaction.timeout.ms": self.timeout_ms, "request.timeout.ms": 10000,
                "metadata.max.age.ms": 5000, "log_level": 2})
            self.instances += 1
            while True:
                try:
                    self.producer.init_transactions(CALL_TIMEOUT)
                    return
                except KafkaException as exc:
                    error = kafka_error(exc)
                    self.note_error(f"init:{error_name(exc)}")
                    if time.time() > deadline:
                        raise Stalled(f"{self.transactional_id}: init_transactions: {error_name(exc)}")
                    if error is None or error.fatal() or not error.retriable():
                        break  # this instance is done for; make another
                    time.sleep(0.5)

    def _retry(self, call, txn, what, deadline):
        """call() until it returns; retriable errors are retried until the deadline."""
        while True:
            try:
                return call()
            except KafkaException as exc:
                error = kafka_error(exc)
                txn.events.append(f"{what}: {error_name(exc)}")
                self.note_error(f"{what}:{error_name(exc)}")
                if (error is None or not error.retriable() or error.fatal()
                        or error.txn_requires_abort() or time.time() > deadline):
                    raise
                time.sleep(0.2)

    def _watched(self, what, call):
        """call(producer) on a helper thread, given up on past its own timeout.

        librdkafka 2.16's send_offsets_to_transaction can block forever once the group
        coordinator was down (its coordinator requests never time out:
        confluentinc/librdkafka#5456, #5511). The caller then replaces the producer; the
        blocked call keeps the old instance alive, fenced, and never commits anything."""
        producer, outcome = self.producer, {}

        def target():
            try:
                call(producer)
            except BaseException as exc:  # re-raised in the caller's thread
                outcome["error"] = exc

        helper = threading.Thread(target=target, name=f"{self.transactional_id}-{what}", daemon=True)
        helper.start()
        helper.join(CALL_TIMEOUT + 15)
        if helper.is_alive():
            self.note_error(f"{what}:hung")
            raise Hung(f"{what} did not return within {CALL_TIMEOUT + 15} s")
        if "error" in outcome:
            raise outcome["error"]

    def _abort(self, txn, deadline):
        """'aborted' once abort_transaction returns; 'abandoned' if the producer had to be
        replaced instead (its successor's init_transactions aborts the transaction)."""
        try:
            self._retry(lambda: self.producer.abort_transaction(CALL_TIMEOUT), txn, "abort", deadline)
            return "aborted"
        except KafkaException:
            self.create()
            return "abandoned"

    def _produce(self, txn, topic, partition, value, deadline):
        def delivered(error, message):
            txn.delivered[value] = (error.name() if error is not None else
                                    (message.partition(), message.offset()
                                     if message.offset() is not None and message.offset() >= 0 else None))
        while True:
            try:
                self.producer.produce(topic, value=value.encode(), partition=partition,
                                      on_delivery=delivered)
                self.producer.poll(0)
                return
            except BufferError:
                if time.time() > deadline:
                    raise Stalled(f"{txn.key}: the producer queue stayed full")
                self.producer.poll(0.05)

    def run(self, txn, commit=True, flush_before_abort=True, offsets=None, group_metadata=None):
        """Runs one transaction and sets txn.fate."""
        deadline = time.time() + TXN_DEADLINE
        try:
            self.producer.begin_transaction()
            for topic, partition, value in txn.records:
                self._produce(txn, topic, partition, value, deadline)
            if offsets is not None:
                self._retry(lambda: self._watched("send_offsets", lambda producer: (
                    producer.send_offsets_to_transaction(offsets, group_metadata, CALL_TIMEOUT))),
                    txn, "send_offsets", deadline)
            if not commit:
                if flush_before_abort:
                    # So the aborted records reach the log (an abort purges unsent ones)
                    # and the checker can tell whether read_committed hides them.
                    self.producer.flush(CALL_TIMEOUT)
                txn.fate = self._abort(txn, deadline)
                return
            txn.commit_called = True
            self._retry(lambda: self.producer.commit_transaction(CALL_TIMEOUT), txn, "commit", deadline)
            self.producer.poll(0)  # the remaining delivery reports (offsets)
            txn.fate = "committed"
        except (KafkaException, Stalled, Hung) as exc:
            error = kafka_error(exc) if isinstance(exc, KafkaException) else None
            txn.events.append(f"failed: {error_name(exc) if error else exc}")
            if error is not None and error.txn_requires_abort() and not error.fatal():
                fate = self._abort(txn, deadline)
            else:
                # Fatal, outside librdkafka's rules, hung, or retried past the deadline.
                self.create()
                fate = "abandoned"
            if txn.commit_called:
                txn.fate = "unknown"
                txn.aborted_after_commit = fate == "aborted"
            else:
                txn.fate = fate
        finally:
            txn.ended = time.time()


class TxnWorkload:
    topic = TOPIC  # the topic whose leaders kill-leader targets
    topics = [(TOPIC, PARTITIONS), (INPUT, PARTITIONS), (OUTPUT, PARTITIONS)]

    def __init__(self, bootstrap, seed, producers=3, ctp_workers=2, input_rate=100, readers=2):
        self.bootstrap = bootstrap
        self.seed = seed
        self.run_id = uuid.uuid4().hex[:6]  # fresh transactional ids and groups per run
        self.txns = {}                      # key -> Txn
        self.errors = collections.Counter()
        self.input_acked = {}               # value -> (partition, offset)
        self.reads = []                     # (reader, session, topic, partition, offset, value)
        self.stalled = []
        self.rings = {}                     # thread name -> Ring
        self.closing = set()                # readers in consumer.close()
        self.close_stalls = []              # readers stuck in close() on a healthy cluster
        self.instances = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.producer_ids = [f"nemesis-txn-{self.run_id}-{k}" for k in range(producers)]
        self.ctp_ids = [f"nemesis-ctp-{self.run_id}-{w}" for w in range(ctp_workers)]
        self.ctp_group = f"{CTP_GROUP}-{self.run_id}"

        def thread(name, body, arg):
            return threading.Thread(target=self.guard, args=(body, arg), name=name, daemon=True)

        self.threads = [thread(f"producer-{k}", self.produce, k) for k in range(producers)]
        self.threads += [thread(f"ctp-{w}", self.transform, w) for w in range(ctp_workers)]
        if ctp_workers:
            self.threads.append(thread("ctp-input", self.fill, input_rate))
        self.threads += [thread(f"reader-{r}", self.read, r) for r in range(readers)]

    def start(self):
        for t in self.threads:
            t.start()

    def guard(self, body, arg):
        """Records a client thread that gave up (past a deadline) rather than losing it."""
        try:
            body(arg)
        except Exception as exc:
            log(f"{body.__name__} {arg}: stopped: {exc!r}")
            with self.lock:
                self.stalled.append(f"{body.__name__} {arg}: {exc!r}")

    def report(self, txn, expected):
        """Logs a transaction whose fate was not the one chosen, or that was slow."""
        took = txn.ended - txn.started
        if txn.fate != expected or took > 5:
            log(f"  {txn.key}: {txn.fate} ({took:.1f} s; {txn.events[-4:]})")

    def note_error(self, name):
        with self.lock:
            self.errors[name] += 1

    def register(self, txn):
        with self.lock:
            self.txns[txn.key] = txn

    def fates(self, prefix):
        with self.lock:
            return collections.Counter(t.fate or "running" for k, t in self.txns.items()
                                       if k.startswith(prefix))

    def progress(self):
        p, c = self.fates("t"), self.fates("c")
        with self.lock:
            reads, errors = len(self.reads), sum(self.errors.values())
        return (f"  producers {dict(p)}; ctp {dict(c)}; input {len(self.input_acked)}; "
                f"read {reads}; errors {errors}")

    def describe(self, admin, node):
        """Which transactional ids' coordinators (and the ctp group's) the node leads."""
        try:
            topics = admin.list_topics(timeout=5).topics
            state, offsets = topics[STATE_TOPIC].partitions, topics[OFFSETS_TOPIC].partitions
            led = [i for i in self.producer_ids + self.ctp_ids
                   if state[coordinator_partition(i)].leader == node]
            if self.ctp_ids and offsets[coordinator_partition(self.ctp_group)].leader == node:
                led.append(f"group {self.ctp_group}")
            return f"  node {node} coordinates {led or 'none of the workload'}"
        except Exception as exc:  # diagnostics only
            return f"  (coordinators unknown: {exc!r})"

    # --- clients ---------------------------------------------------------------------
    def produce(self, k):
        rng = random.Random(f"{self.seed}/producer/{k}")
        client = TxnClient(self.bootstrap, self.producer_ids[k], self.note_error,
                           TXN_TIMEOUTS_MS[k % len(TXN_TIMEOUTS_MS)])
        client.create()
        n = 0
        while not self.stop.is_set():
            size, start = rng.randint(4, 8), rng.randrange(PARTITIONS)
            commit, flush = rng.random() >= ABORT_RATIO, rng.random() < 0.75
            txn = Txn(f"t{k}-{n}", [(TOPIC, (start + i) % PARTITIONS, f"t{k}-{n}-{i}/{size}")
                                    for i in range(size)])
            self.register(txn)
            client.run(txn, commit=commit, flush_before_abort=flush)
            self.report(txn, "committed" if commit else "aborted")
            n += 1
            time.sleep(0.05)
        self.instances[self.producer_ids[k]] = client.instances

    def fill(self, rate):
        """The ctp input: plain idempotent writes, round-robin over the partitions."""
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                             "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
                             "request.timeout.ms": 10000, "log_level": 2})

        def delivered(error, message):
            if error is None:
                with self.lock:
                    self.input_acked[message.value().decode()] = (message.partition(), message.offset())

        seq, next_send = 0, time.time()
        while not self.stop.is_set():
            try:
                producer.produce(INPUT, value=f"i-{seq:08d}".encode(), partition=seq % PARTITIONS,
                                 on_delivery=delivered)
                seq += 1
            except BufferError:
                pass
            producer.poll(0)
            next_send += 1.0 / rate
            time.sleep(max(0.0, next_send - time.time()))
        if producer.flush(120):
            log("ctp input: records never acknowledged")

    def ctp_consumer(self, w):
        config = {"bootstrap.servers": self.bootstrap, "group.id": self.ctp_group,
                  "client.id": f"ctp-{w}", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                  "metadata.max.age.ms": 5000, "log_level": 7 if DEBUG else 2}
        if DEBUG:
            config["debug"] = DEBUG
        consumer = Consumer(config)
        consumer.subscribe([INPUT])
        return consumer

    def rewind(self, w, consumer, partitions):
        """After a transaction that did not commit, its partitions go back to the group's
        committed offsets (an abort's are the previous ones; an unknown outcome is
        settled by then: abort returned, or init_transactions finished it)."""
        deadline = time.time() + REWIND_DEADLINE
        while time.time() < deadline:
            try:
                committed = consumer.committed([TopicPartition(INPUT, p) for p in partitions],
                                               CALL_TIMEOUT)
                for tp in committed:
                    tp.offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                    try:
                        consumer.seek(tp)
                    except KafkaException:
                        pass  # no longer assigned: its new owner starts from the committed offset
                return consumer
            except KafkaException as exc:
                self.note_error(f"committed:{error_name(exc)}")
                time.sleep(0.5)
        # A new member fetches the committed offsets when it is assigned the partitions.
        consumer.close()
        return self.ctp_consumer(w)

    def transform(self, w):
        rng = random.Random(f"{self.seed}/ctp/{w}")
        client = TxnClient(self.bootstrap, self.ctp_ids[w], self.note_error, CTP_TXN_TIMEOUT_MS)
        client.create()
        consumer = self.ctp_consumer(w)
        n, idle_since, drain_deadline = 0, time.time(), None
        while True:
            if self.stop.is_set():
                # Catch up with the input, which has stopped, then stop.
                drain_deadline = drain_deadline or time.time() + CTP_DRAIN_SECONDS
                if time.time() > drain_deadline or time.time() - idle_since > 5:
                    break
            messages = [m for m in consumer.consume(100, 0.5) if m.error() is None]
            if not messages:
                continue
            idle_since = time.time()
            size = len(messages)
            txn = Txn(f"c{w}-{n}", [(OUTPUT, m.partition(), f"c{w}-{n}-{i}/{size}={m.value().decode()}")
                                    for i, m in enumerate(messages)])
            txn.inputs = [(m.partition(), m.offset(), m.value().decode()) for m in messages]
            ends = {}
            for m in messages:
                ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
            self.register(txn)
            client.run(txn, commit=rng.random() >= CTP_ABORT_RATIO,
                       offsets=[TopicPartition(INPUT, p, o) for p, o in sorted(ends.items())],
                       group_metadata=consumer.consumer_group_metadata())
            self.report(txn, txn.fate if txn.fate in ("committed", "aborted") else "committed")
            if txn.fate != "committed":
                consumer = self.rewind(w, consumer, sorted(ends))
            n += 1
        consumer.close()
        self.instances[self.ctp_ids[w]] = client.instances

    def read(self, r):
        """A read_committed group member; a session is one assignment. Its group
        protocol's debug log is kept in a ring, printed if it stalls."""
        session = [0]
        ring = self.rings[f"reader-{r}"] = Ring()
        logger = logging.getLogger(f"nemesis-reader-{r}")
        logger.propagate = False
        logger.addHandler(ring)

        def rebalanced(consumer, partitions):
            session[0] += 1

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{READER_GROUP}-{self.run_id}",
                             "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                             "enable.auto.commit": True, "session.timeout.ms": 10000,
                             "metadata.max.age.ms": 5000, "debug": "cgrp", "log_level": 7,
                             "logger": logger})
        consumer.subscribe([TOPIC, OUTPUT], on_assign=rebalanced, on_revoke=rebalanced,
                           on_lost=rebalanced)
        while not self.stop.is_set():
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            with self.lock:
                self.reads.append((r, session[0], message.topic(), message.partition(),
                                   message.offset(), message.value().decode()))
        self.closing.add(f"reader-{r}")
        consumer.close()

    def coordinator_answers(self):
        """Whether a fresh client finds the readers' group coordinator and has it describe
        the group (so a reader stuck closing is stuck in its client, not on the cluster)."""
        from confluent_kafka.admin import AdminClient
        group = f"{READER_GROUP}-{self.run_id}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 2})
        try:
            described = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
            return f"coordinator {described.coordinator.host}:{described.coordinator.port}, " \
                   f"state {described.state}, {len(described.members)} members"
        except Exception as exc:  # noqa: BLE001 - any failure means no
            log(f"the readers' group coordinator did not answer a fresh client: {exc!r}")
            return None

    def finish(self):
        """Stops the clients: each transaction in progress ends first, by its rules."""
        self.stop.set()
        deadline = time.time() + JOIN_DEADLINE
        frames = None
        for t in self.threads:
            t.join(max(1.0, deadline - time.time()))
            if t.is_alive():
                frames = frames or sys._current_frames()
                where = "".join(traceback.format_stack(frames[t.ident])[-4:]) if t.ident in frames else "?"
                log(f"{t.name} still running {JOIN_DEADLINE} s after the stop, in:\n{where}")
                if t.name in self.rings:
                    log(f"{t.name}'s last librdkafka cgrp lines:\n" + "\n".join(self.rings[t.name].lines))
                answer = self.coordinator_answers() if t.name in self.closing else None
                if answer:
                    # librdkafka's close() waiting on a coordinator request it never sends
                    # (docs/FAULTS.md, open finding) while the cluster serves the group.
                    log(f"WARNING: {t.name} stuck in close() while a fresh client finds the group: {answer}")
                    self.close_stalls.append(f"{t.name}: {answer}")
                else:
                    self.stalled.append(f"{t.name}: still running {JOIN_DEADLINE} s after the stop")

    def show_group_logs(self, root):
        """The nodes' log lines about the workload's groups (joins, rebalances, leaves)."""
        groups = (f"{READER_GROUP}-{self.run_id}", self.ctp_group)
        for name in sorted(os.listdir(root)):
            if not re.fullmatch(r"n\d+\.log", name):
                continue
            with open(os.path.join(root, name), errors="replace") as f:
                lines = [ln.rstrip() for ln in f if any(g in ln for g in groups)]
            log(f"{name}: {len(lines)} lines about the groups; the last 60:\n" + "\n".join(lines[-60:]))

    # --- checker ---------------------------------------------------------------------
    def check(self, cluster, root, seed, divergent_replicas):
        """Final reads, then the checks; returns (counts, number of violations)."""
        bootstrap = cluster.bootstrap()
        tag = write_sentinels(bootstrap, [TOPIC, INPUT, OUTPUT])
        final, stuck = {}, []
        for topic, isolation in ((TOPIC, "read_committed"), (TOPIC, "read_uncommitted"),
                                 (OUTPUT, "read_committed"), (OUTPUT, "read_uncommitted"),
                                 (INPUT, "read_uncommitted")):
            records, pending = read_to_sentinel(bootstrap, topic, isolation, tag)
            final[(topic, isolation)] = records
            stuck += [f"{topic}-{p} {isolation}: {why}" for p, why in pending.items()]
        committed_offsets = group_offsets(bootstrap, self.ctp_group, INPUT) if self.ctp_ids else {}
        codes = cluster.stop_all()
        if self.stalled or self.close_stalls:
            self.show_group_logs(root)
        divergent = divergent_replicas([(TOPIC, PARTITIONS), (INPUT, PARTITIONS), (OUTPUT, PARTITIONS)])
        panicked = [i for i in cluster.ids if "panicked" in
                    open(os.path.join(root, f"n{i}.log"), errors="replace").read()]

        v = collections.defaultdict(list)  # category -> details
        rc = {t: final[(t, "read_committed")] for t in (TOPIC, OUTPUT)}
        ru = {t: final[(t, "read_uncommitted")] for t in (TOPIC, OUTPUT, INPUT)}
        rc_at = {(t, p, o): val for t, recs in rc.items() for p, o, val in recs}
        ru_at = {(t, p, o): val for t, recs in ru.items() for p, o, val in recs}
        rc_where = collections.defaultdict(list)  # value -> [(topic, partition, offset)]
        for (t, p, o), val in rc_at.items():
            rc_where[val].append((t, p, o))

        for (topic, isolation), records in final.items():
            counts = collections.Counter(val for _, _, val in records)
            v["duplicated"] += [f"{topic} {isolation}: {val} x{c}" for val, c in counts.items() if c > 1]
            last = {}
            for p, o, _ in records:
                if o <= last.get(p, -1):
                    v["non_monotonic"].append(f"final {topic}-{p} {isolation}: {o} after {last[p]}")
                last[p] = o
            if topic != INPUT:
                v["unexpected"] += [f"{topic}-{p}@{o} {isolation}: {val}" for p, o, val in records
                                    if txn_of(val) not in self.txns]

        fates = collections.Counter()
        unknown_visible = aborted_after_commit_visible = 0
        durations = []
        for key, txn in sorted(self.txns.items()):
            fate = txn.fate or "unknown"  # a thread stopped mid-transaction
            fates[fate] += 1
            visible = []
            for topic, partition, val in txn.records:
                for where in rc_where.get(val, []):
                    if where[:2] == (topic, partition):
                        visible.append((val, where))
                    else:
                        v["unexpected"].append(f"{key}: {val} at {where}, written to partition {partition}")
            shown = {val for val, _ in visible}
            detail = (f"{key} ({fate}, {txn.ended - txn.started if txn.ended else 0:.1f} s, "
                      f"events {txn.events[-4:]}): {len(shown)}/{len(txn.records)} visible "
                      f"{sorted(visible)[:8]}")
            if fate == "committed":
                durations.append(txn.ended - txn.started)
                missing, moved = [], []
                for t, p, val in txn.records:
                    acked = txn.delivered.get(val)  # (partition, offset or None), or an error
                    if val not in shown:
                        missing.append((t, p, val, acked))
                    elif isinstance(acked, tuple) and acked[1] is not None and rc_at.get((t,) + acked) != val:
                        moved.append((t, val, acked, rc_at.get((t,) + acked)))
                if missing or moved:
                    v["lost"].append(f"{detail}; missing {missing[:8]}; not at the acknowledged "
                                     f"offset {moved[:8]}")
            elif fate in ("aborted", "abandoned"):
                if shown:
                    v["aborted_read"].append(detail)
            else:
                if shown:
                    unknown_visible += 1
                    aborted_after_commit_visible += txn.aborted_after_commit
                if 0 < len(shown) < len(txn.records):
                    v["partial"].append(detail)

        # What the readers got under read_committed, against the final logs.
        sessions = {}
        for r, session, topic, p, o, val in self.reads:
            if ru_at.get((topic, p, o)) != val:
                v["phantom"].append(f"reader {r}: {topic}-{p}@{o} {val}, final log has "
                                    f"{ru_at.get((topic, p, o))}")
            elif rc_at.get((topic, p, o)) != val:
                txn = self.txns.get(txn_of(val))
                v["aborted_read"].append(f"reader {r}: {topic}-{p}@{o} {val} ({txn.fate if txn else '?'}), "
                                         "hidden from the final read_committed read")
            previous = sessions.get((r, session, topic, p))
            if previous is not None and o <= previous:
                v["non_monotonic"].append(f"reader {r} session {session}: {topic}-{p} {o} after {previous}")
            sessions[(r, session, topic, p)] = o

        # Consume-transform-produce: exactly once per input record, against the offsets.
        ctp = {}
        if self.ctp_ids:
            input_at = {(p, o): val for p, o, val in ru[INPUT]}
            outputs = collections.defaultdict(list)  # input value -> committed output values
            for _, _, val in rc[OUTPUT]:
                outputs[val.split("=", 1)[1]].append(val)
            for key, txn in self.txns.items():
                for p, o, val in txn.inputs:
                    if input_at.get((p, o)) != val:
                        v["phantom"].append(f"{key}: consumed {INPUT}-{p}@{o} {val}, final log has "
                                            f"{input_at.get((p, o))}")
            v["ctp_duplicated"] = [f"{val}: {outs}" for val, outs in outputs.items() if len(outs) > 1]
            for p, o, val in ru[INPUT]:
                below = o < committed_offsets.get(p, -1)
                if below and val not in outputs:
                    v["ctp_lost"].append(f"{INPUT}-{p}@{o} {val} (committed offset {committed_offsets[p]})")
                if not below and val in outputs:
                    v["ctp_ahead"].append(f"{INPUT}-{p}@{o} {val} -> {outputs[val]} (committed offset "
                                          f"{committed_offsets.get(p)})")
            transformed = sum(1 for _, _, val in ru[INPUT] if val in outputs)
            per_worker = collections.Counter(k.split("-")[0] for k, t in self.txns.items()
                                             if k.startswith("c") and t.fate == "committed")
            ctp = {"input_records": len(ru[INPUT]), "input_acked": len(self.input_acked),
                   "transformed": transformed, "committed_offsets": committed_offsets,
                   "committed_by_worker": {f"c{w}": per_worker[f"c{w}"] for w in range(len(self.ctp_ids))}}
            # Progress, not safety: reported, not counted as a violation.
            for w in range(len(self.ctp_ids)):
                if not per_worker[f"c{w}"]:
                    log(f"WARNING: ctp worker {w} ({self.ctp_ids[w]}) committed no transaction")
            if transformed < len(ru[INPUT]) / 2:
                log(f"WARNING: the ctp workers transformed only {transformed} of {len(ru[INPUT])} "
                    "input records")

        v["stuck"] = stuck
        v["stalled"] = list(self.stalled)
        v["divergent"] = divergent
        v["panicked"] = [f"node {i}" for i in panicked]
        durations.sort()
        pct = (lambda q: round(durations[min(len(durations) - 1, int(q * len(durations)))], 3)
               if durations else None)
        by_kind = {kind: dict(collections.Counter(t.fate or "unknown" for k, t in self.txns.items()
                                                  if k.startswith(kind)))
                   for kind in ("t", "c")}
        categories = ["lost", "aborted_read", "partial", "duplicated", "non_monotonic", "phantom",
                      "unexpected", "stuck", "ctp_duplicated", "ctp_lost", "ctp_ahead",
                      "divergent", "panicked", "stalled"]
        counts = {
            "seed": seed, "transactions": dict(fates), "producer_transactions": by_kind["t"],
            "ctp_transactions": by_kind["c"], "unknown_visible": unknown_visible,
            "unknown_then_aborted_visible": aborted_after_commit_visible,
            "committed_seconds": {"p50": pct(0.5), "p99": pct(0.99), "max": pct(1.0)},
            "producer_instances": dict(self.instances), "errors": dict(self.errors.most_common(12)),
            "read_committed_records": {t: len(r) for t, r in rc.items()},
            "read_uncommitted_records": {t: len(r) for t, r in ru.items()},
            "read_by_group": len(self.reads), "ctp": ctp, "exit_codes": codes,
            "reader_close_stalls": list(self.close_stalls),
        }
        counts.update({c: len(v[c]) for c in categories})
        log("result: " + json.dumps(counts))
        for c in categories:
            if v[c]:
                log(f"{c} ({len(v[c])}; first 10):")
                for item in v[c][:10]:
                    log(f"    {item}")
        bad = sum(len(v[c]) for c in categories)
        if fates["committed"] == 0:
            log("FAIL: no transaction committed")
            bad += 1
        return counts, bad


def write_sentinels(bootstrap, topics):
    """A unique value on every partition of the topics, written after everything else:
    a final read is complete once it has read the sentinel of every partition."""
    tag = SENTINEL + uuid.uuid4().hex
    writer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                       "message.timeout.ms": 60000, "log_level": 2})
    for topic in topics:
        for p in range(PARTITIONS):
            writer.produce(topic, value=tag.encode(), partition=p)
    if writer.flush(90):
        log("WARNING: sentinels not acknowledged within 90 s; the final reads will say stuck")
    return tag


def read_to_sentinel(bootstrap, topic, isolation, tag):
    """([(partition, offset, value)] before each partition's sentinel, {partition: why}
    for the partitions whose sentinel was not reached before the deadline)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"nemesis-final-{uuid.uuid4().hex[:6]}",
                       "enable.auto.commit": False, "isolation.level": isolation, "log_level": 2})
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    pending, records, errors = set(range(PARTITIONS)), [], collections.Counter()
    deadline = time.time() + FINAL_READ_DEADLINE
    while pending and time.time() < deadline:
        message = reader.poll(0.5)
        if message is None:
            continue
        if message.error():
            errors[message.error().name()] += 1
            continue
        value = message.value().decode()
        if value == tag:
            pending.discard(message.partition())
        elif not value.startswith(SENTINEL) and message.partition() in pending:
            records.append((message.partition(), message.offset(), value))
    why = {}
    for p in sorted(pending):
        try:
            low, high = reader.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
            position = reader.position([TopicPartition(topic, p)])[0].offset
            why[p] = f"at {position}, watermarks {low}..{high}, errors {dict(errors)}"
        except Exception as exc:  # diagnostics only
            why[p] = str(exc)
    reader.close()
    log(f"final read {topic} {isolation}: {len(records)} records"
        + (f"; no sentinel from {why}" if why else ""))
    return records, why


def group_offsets(bootstrap, group, topic):
    """{partition: committed offset} of a group, read without joining it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "log_level": 2})
    deadline = time.time() + 90
    try:
        while True:
            try:
                tps = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], CALL_TIMEOUT)
                return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
            except KafkaException as exc:
                if time.time() > deadline:
                    raise
                log(f"committed offsets of {group}: {error_name(exc)}; retrying")
                time.sleep(1)
    finally:
        consumer.close()


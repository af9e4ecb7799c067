"""Consumer groups with Apache Kafka's Java clients (kafka-clients 4.4.0, group.protocol=
classic, and group.protocol=consumer: KIP-848) and Kafka's kafka-consumer-groups tool,
against a broker this test starts.

Run through interop/java/groups.sh, which compiles interop/java/src/GroupDriver.java and
sets GROUP_DRIVER_CLASSPATH / GROUP_DRIVER_LOG4J. Every group member is its own JVM
(GroupDriver member), driven over stdin/stdout, so it can be killed with kill -9.

Sections (default: the classic ones, eager .. cli; "kip848" names the four KIP-848 ones;
name some to run only those; --kafka runs them against Apache Kafka 4.4.0 from
interop/kafka/run-kafka.sh, to compare):

  eager        default assignors ([range, cooperative-sticky] -> eager range):
               a. 6 partitions, 600 keyed records; two members split them 3/3, every record
                  consumed exactly once;
               b. a third member joins -> 2/2/2; 600 new records consumed exactly once, each
                  by its partition's owner;
               c. kill -9 of one member (session.timeout.ms=4000): after the session timeout
                  its partitions move to the two survivors (3/3); exactly once after;
               d. members leave, broker restarted with SIGTERM: committed offsets survive, a
                  new member resumes after the last commit and reads only new records.
  cooperative  the same with partition.assignment.strategy=cooperative-sticky.
  live-restart the broker restarts (SIGTERM) under an active two-member group: exactly once
               across it, and the members keep their member ids and partitions.
  static       static membership (group.instance.id, session.timeout.ms=10000): the leader
               killed with kill -9 and restarted, then the follower closed (static: stays in
               the group) and restarted: each gets its partitions back, the other member sees
               no rebalance and keeps its generation; no rebalance when the old sessions
               would have expired.
  cli          kafka-consumer-groups: --describe (offsets, lag, member ids, hosts, client
               ids), --describe --members [--verbose], --describe --state, --list [--state]
               [--type], --reset-offsets refused while active, --delete refused while
               active, --reset-offsets --to-earliest (--dry-run, --execute) while inactive
               and a member re-reading from 0, --to-offset, --shift-by, --to-latest,
               --delete-offsets (two of four partitions), --delete, then --list and
               --describe of the deleted group. Every expected output was taken from Kafka.

  KIP-848 (group.protocol=consumer; the broker gets a 6000 ms consumer session timeout and
  a 1000 ms heartbeat interval: Strand's group_consumer_session_timeout_ms /
  group_consumer_heartbeat_interval_ms, Kafka's group.consumer.session.timeout.ms /
  group.consumer.heartbeat.interval.ms and their group.consumer.min.* bounds):
  consumer     default (uniform) assignor: two members split 6 partitions 3/3, every
               record consumed exactly once (commits after processing), same member
               epoch; a third joins -> 2/2/2, A and B revoke only the partition that moves
               (incremental, sticky), exactly once; kill -9 of A -> after the session
               timeout B and C hold 3/3, keeping theirs; the others leave, the broker
               restarts (SIGTERM): committed offsets unchanged, a new member resumes after
               them.
  consumer-range  the same with group.remote.assignor=range (no restart), each layout
               checked against Kafka's range assignor (4.1.1 and 4.4.0): members sorted by member id,
               contiguous ranges, not sticky.
  consumer-live-restart  the broker restarts (SIGTERM) under an active two-member group:
               exactly once across it, 3/3 again; member ids and epochs reported (Strand
               does not persist KIP-848 group state: its members rejoin).
  consumer-cli kafka-consumer-groups on a KIP-848 group: --describe, --members [--verbose]
               (epochs, current and target assignment), --state [--verbose] (assignor,
               group and target-assignment epochs), --list --state / --type, refusals while
               active, the empty group after both left, --delete; paused members are idle.
               Every expected output was taken from Kafka.
  consumer-regex  subscribe(java.util.regex.Pattern) (resolved by the client;
               metadata.max.age.ms=5000) and subscribe(SubscriptionPattern) (resolved by the
               broker): the member gets the matching topics (not the other one), reads them
               exactly once, and picks up a matching topic created afterwards.
  consumer-static  group.instance.id: B's close() is a temporary leave (epoch -2): A keeps
               its 3 and sees no rebalance, B2 with B's instance id takes B's partitions
               back; B2 killed, B3 with the same instance id while B2's session runs is
               refused (UnreleasedInstanceIdException, fatal), B4 after it ran out joins.

Prints "ok: ..." per check and "FAIL: ..." per failure (a failed check the section depends
on abandons it, others are reported and the section goes on; the other sections still run);
exits 1 if anything failed. Leaves no process running. GROUP_TEST_CLI_TRANSCRIPT=FILE appends
every kafka-consumer-groups call and its output to FILE (to diff Strand against Kafka).
"""
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from group_brokers import KAFKA_CLI, _tail, make_broker  # noqa: E402

CLASSPATH = os.environ.get("GROUP_DRIVER_CLASSPATH")
LOG4J = os.environ.get("GROUP_DRIVER_LOG4J")
JAVA = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
        f"-Dlog4j2.configurationFile=file:{LOG4J}", "-cp", CLASSPATH or "", "GroupDriver"]
PARTITIONS = 6
KILL_SESSION_MS = 4000
STATIC_SESSION_MS = 10000


class Failure(Exception):
    pass


def ok(message):
    print(f"ok: {message}", flush=True)


def fail(message):
    raise Failure(message)


def check(condition, message):
    """A check the rest of the section depends on: a failure abandons the section."""
    if not condition:
        fail(message)
    ok(message)


SOFT_FAILURES = []


def expect(condition, message):
    """A check the rest of the section does not depend on: a failure is reported, the
    section goes on, and it counts as failed at its end."""
    if condition:
        ok(message)
    else:
        print(f"FAIL: {message}", flush=True)
        SOFT_FAILURES.append(message)


def parse_kv(tokens):
    out = {}
    for token in tokens:
        if "=" in token:
            key, value = token.split("=", 1)
            out[key] = value
    return out


def partition_set(text):
    return set() if text in ("-", "") else {int(p) for p in text.split(",")}


def topic_partition_set(text):
    """ "t:0,t:1,u:0" -> {(t, 0), (t, 1), (u, 0)} """
    if text in ("-", ""):
        return set()
    return {(tp.rsplit(":", 1)[0], int(tp.rsplit(":", 1)[1])) for tp in text.split(",")}


class Ctx:
    def __init__(self, broker, workdir):
        self.broker, self.workdir = broker, workdir
        self.members = []

    @property
    def bootstrap(self):
        return self.broker.bootstrap

    def java(self, mode, timeout=120, **opts):
        """Runs a one-shot GroupDriver mode; returns its stdout lines."""
        args = JAVA + [mode, "--bootstrap", self.bootstrap]
        for key, value in opts.items():
            args += [f"--{key.replace('_', '-')}", str(value)]
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            fail(f"GroupDriver {mode} timed out after {timeout}s")
        if done.returncode != 0:
            fail(f"GroupDriver {mode} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        return done.stdout.splitlines()

    def create(self, topic, partitions=PARTITIONS):
        self.java("create", topic=topic, partitions=partitions)

    def produce(self, topic, start, count):
        """Produces keyed records k-start .. k-(start+count-1); returns {index: (partition, offset)}."""
        out = {}
        for line in self.java("produce", topic=topic, **{"from": start}, count=count):
            if line.startswith("P "):
                _, index, partition, offset = line.split()
                out[int(index)] = (int(partition), int(offset))
        if len(out) != count:
            fail(f"produced {len(out)} of {count} records")
        return out

    def committed(self, group, topic):
        out = {}
        for line in self.java("committed", group=group, topic=topic):
            if line.startswith("C "):
                _, partition, offset = line.split()
                out[int(partition)] = int(offset)
        return out

    def cli(self, *args, timeout=90):
        """Runs kafka-consumer-groups; returns (status, stdout, stderr)."""
        cmd = [KAFKA_CLI, "kafka-consumer-groups", "--bootstrap-server", self.bootstrap] + list(args)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            fail(f"kafka-consumer-groups {' '.join(args)} timed out after {timeout}s")
        transcript = os.environ.get("GROUP_TEST_CLI_TRANSCRIPT")
        if transcript:  # every CLI call and its output, to compare brokers
            with open(transcript, "a") as f:
                f.write(f"$ kafka-consumer-groups {' '.join(args)}\n[status {done.returncode}]\n{done.stdout}"
                        f"[stderr]\n{done.stderr}\n")
        return done.returncode, done.stdout, done.stderr

    def note(self, text):
        """Output to read, not checked (e.g. to compare brokers)."""
        print("  | " + text.rstrip("\n").replace("\n", "\n  | "), flush=True)

    def member(self, name, group, topic, **opts):
        m = Member(self, name, group, topic, **opts)
        self.members.append(m)
        m.start()
        return m

    def kill_members(self):
        for m in self.members:
            m.kill9(quiet=True)
        self.members = []


class Member:
    """One GroupDriver member JVM, its output parsed as it arrives."""

    def __init__(self, ctx, name, group, topic, strategy="default", instance_id=None, session_ms=KILL_SESSION_MS,
                 heartbeat_ms=None, protocol="classic", remote_assignor=None, pattern=None, broker_pattern=None,
                 metadata_max_age_ms=None):
        self.ctx, self.name, self.group, self.topic = ctx, name, group, topic
        self.args = ["--group", group, "--name", name]
        if topic is not None:
            self.args += ["--topic", topic]
        if protocol == "consumer":
            # KIP-848: session timeout, heartbeat interval and assignor are the broker's
            # (group.remote.assignor picks one of its assignors).
            self.args += ["--protocol", "consumer"]
            if remote_assignor:
                self.args += ["--remote-assignor", remote_assignor]
        else:
            self.args += ["--strategy", strategy, "--session-ms", str(session_ms)]
            if heartbeat_ms is None:
                heartbeat_ms = min(1000, session_ms // 3)
            self.args += ["--heartbeat-ms", str(heartbeat_ms)]
        if instance_id:
            self.args += ["--instance-id", instance_id]
        if pattern is not None:
            self.args += ["--pattern", pattern]
        if broker_pattern is not None:
            self.args += ["--broker-pattern", broker_pattern]
        if metadata_max_age_ms is not None:
            self.args += ["--metadata-max-age-ms", str(metadata_max_age_ms)]
        self.cond = threading.Condition()
        self.lines = []         # (time, line)
        self.events = []        # (time, kind, dict) for ASSIGNED/REVOKED/LOST
        self.records = []       # (partition, offset, key, time)
        self.trecords = []      # (topic, partition, offset)
        self.tnow = set()       # {(topic, partition)}
        self.committed = {}     # partition -> last committed offset
        self.commit_failures = []
        self.errors = []
        self.statuses = []
        self.now = set()
        self.gen = None
        self.member_id = None
        self.closed = False
        self.process = None

    def start(self):
        self.stderr_path = os.path.join(self.ctx.workdir, f"member-{self.name}-{time.time_ns()}.err")
        stderr = open(self.stderr_path, "w")
        self.process = subprocess.Popen(JAVA + ["member", "--bootstrap", self.ctx.bootstrap] + self.args,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                        bufsize=1)
        stderr.close()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            line = line.rstrip("\n")
            now = time.time()
            tokens = line.split()
            with self.cond:
                self.lines.append((now, line))
                kind = tokens[0] if tokens else ""
                if kind in ("ASSIGNED", "REVOKED", "LOST"):
                    kv = parse_kv(tokens[1:])
                    self.events.append((now, kind, kv))
                    self.now = partition_set(kv["now"])
                    self.tnow = topic_partition_set(kv.get("tnow", "-"))
                    self.gen = int(kv["gen"])
                    if "member" in kv:
                        self.member_id = kv["member"]
                elif kind == "REC":
                    self.records.append((int(tokens[1]), int(tokens[2]), tokens[3], now))
                    if len(tokens) > 4:
                        self.trecords.append((tokens[4], int(tokens[1]), int(tokens[2])))
                elif kind == "COMMITTED":
                    for item in tokens[1].split(","):
                        p, o = item.split(":")
                        self.committed[int(p)] = int(o)
                elif kind == "COMMIT_FAILED":
                    self.commit_failures.append(line)
                elif kind == "STATUS":
                    kv = parse_kv(tokens[1:])
                    self.statuses.append(kv)
                elif kind == "CLOSED":
                    self.closed = True
                elif kind == "ERROR":
                    self.errors.append(line)
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def describe_tail(self, n=15):
        with self.cond:
            lines = [line for _, line in self.lines if not line.startswith("REC ")][-n:]
        return f"{self.name} last lines:\n  " + "\n  ".join(lines) + f"\n  stderr tail:\n{_tail(self.stderr_path, 10)}"

    def wait(self, predicate, timeout, what):
        deadline = time.time() + timeout
        with self.cond:
            while not predicate():
                remaining = deadline - time.time()
                if remaining <= 0:
                    break
                self.cond.wait(min(remaining, 0.5))
            if predicate():
                return
        fail(f"{self.name}: timed out after {timeout}s waiting for {what}\n{self.describe_tail()}")

    def send(self, command):
        try:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            fail(f"{self.name}: cannot send '{command}' (process gone)\n{self.describe_tail()}")

    def status(self):
        n = len(self.statuses)
        self.send("status")
        self.wait(lambda: len(self.statuses) > n, 30, "STATUS")
        kv = self.statuses[-1]
        return {"gen": int(kv["gen"]), "member": kv["member"], "now": partition_set(kv["now"]),
                "tnow": topic_partition_set(kv.get("tnow", "-"))}

    def pause(self):
        n = len(self.lines)
        self.send("pause")
        self.wait(lambda: any(line.startswith("PAUSED") for _, line in self.lines[n:]), 30, "PAUSED")

    def close(self, command="close"):
        self.send(command)
        self.wait(lambda: self.closed, 60, "CLOSED")
        self.process.wait(30)

    def kill9(self, quiet=False):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        elif not quiet:
            fail(f"{self.name}: not running")

    def event_count(self):
        with self.cond:
            return len(self.events)


def wait_split(members, counts, timeout, partitions=PARTITIONS, what=""):
    """Waits until the members hold disjoint assignments of the given sizes covering every
    partition; returns {name: set}."""
    deadline = time.time() + timeout
    while True:
        for m in members:
            if m.errors:
                fail(f"{m.name}: {m.errors[0]}")
            if m.process.poll() is not None:
                fail(f"{m.name} exited {m.process.returncode}\n{m.describe_tail()}")
        now = [set(m.now) for m in members]
        union = set().union(*now)
        if ([len(s) for s in now] == counts and sum(counts) == len(union) and union == set(range(partitions))):
            return {m.name: s for m, s in zip(members, now)}
        if time.time() > deadline:
            detail = "\n".join(m.describe_tail(8) for m in members)
            fail(f"{what}: no split {counts} within {timeout}s; assignments "
                 f"{ {m.name: sorted(m.now) for m in members} }\n{detail}")
        time.sleep(0.05)


def consumed(members):
    counter = collections.Counter()
    for m in members:
        with m.cond:
            for p, o, _key, _t in m.records:
                counter[(p, o)] += 1
    return counter


def wait_consumed(members, expected, timeout, what):
    deadline = time.time() + timeout
    want = set(expected)
    while True:
        seen = set(consumed(members))
        missing = want - seen
        if not missing:
            return
        if time.time() > deadline:
            detail = "\n".join(m.describe_tail(8) for m in members)
            fail(f"{what}: {len(missing)} of {len(want)} records not consumed within {timeout}s "
                 f"(e.g. {sorted(missing)[:5]})\n{detail}")
        time.sleep(0.1)


def check_exactly_once(members, produced, what):
    counter = consumed(members)
    expected = set(produced.values())
    duplicates = {k: c for k, c in counter.items() if c > 1}
    missing = expected - set(counter)
    unexpected = set(counter) - expected
    if duplicates or missing or unexpected:
        failures = [m.commit_failures[:3] for m in members if m.commit_failures]
        return expect(False, f"{what}: not exactly once: {len(duplicates)} duplicated (e.g. {sorted(duplicates.items())[:5]}), "
             f"{len(missing)} missing, {len(unexpected)} unexpected; commit failures: {failures}")
    ok(f"{what}: all {len(expected)} records consumed exactly once across "
       f"{', '.join(m.name for m in members)}")


def check_owners(members, produced, indexes, split, what):
    """Records with the given indexes were consumed by the member that owns their partition."""
    owner = {p: name for name, parts in split.items() for p in parts}
    by_member = {}
    for m in members:
        with m.cond:
            for p, o, _k, _t in m.records:
                by_member.setdefault((p, o), []).append(m.name)
    wrong = []
    for i in indexes:
        p, o = produced[i]
        if by_member.get((p, o)) != [owner[p]]:
            wrong.append((i, p, o, by_member.get((p, o)), owner[p]))
    if wrong:
        return expect(False, f"{what}: {len(wrong)} records not consumed (only) by their partition's owner, e.g. {wrong[:5]}")
    ok(f"{what}: each of {len(indexes)} records consumed by the owner of its partition")


def end_offsets(produced, partitions=PARTITIONS):
    ends = {p: 0 for p in range(partitions)}
    for p, o in produced.values():
        ends[p] = max(ends[p], o + 1)
    return ends


def unique(prefix):
    return f"{prefix}-{time.time_ns() % 10**10}"


# ---------------------------------------------------------------- sections

def section_rebalance(ctx, strategy):
    label = "eager" if strategy == "default" else strategy
    topic, group = unique(f"jg-{label}"), unique(f"jg-{label}-group")
    ctx.create(topic)
    produced = ctx.produce(topic, 0, 300)
    A = ctx.member("A", group, topic, strategy=strategy)
    B = ctx.member("B", group, topic, strategy=strategy)

    # a. two members split six partitions.
    split = wait_split([A, B], [3, 3], 60, what=f"{label} a")
    ok(f"{label} a: two members split 6 partitions 3/3, disjoint: {split}")
    produced.update(ctx.produce(topic, 300, 300))
    wait_consumed([A, B], produced.values(), 60, f"{label} a")
    time.sleep(1)
    check_exactly_once([A, B], produced, f"{label} a (600 records, 300 produced before the group formed)")
    check_owners([A, B], produced, range(300, 600), split, f"{label} a")
    expect(A.gen == B.gen, f"{label} a: both members in generation {A.gen}")

    # b. a third member joins.
    C = ctx.member("C", group, topic, strategy=strategy)
    split = wait_split([A, B, C], [2, 2, 2], 60, what=f"{label} b")
    ok(f"{label} b: third member joined -> 2/2/2, disjoint: {split}")
    produced.update(ctx.produce(topic, 600, 600))
    wait_consumed([A, B, C], produced.values(), 60, f"{label} b")
    time.sleep(1)
    check_exactly_once([A, B, C], produced, f"{label} b (1200 records)")
    check_owners([A, B, C], produced, range(600, 1200), split, f"{label} b")
    expect(A.gen == B.gen == C.gen, f"{label} b: all three in generation {A.gen}")

    # c. kill -9 of a member; its partitions move to the survivors after the session timeout.
    A.kill9()
    killed_at = time.time()
    split = wait_split([B, C], [3, 3], KILL_SESSION_MS / 1000 + 30, what=f"{label} c")
    took = time.time() - killed_at
    ok(f"{label} c: after kill -9 of A the survivors hold 3/3 after {took:.1f}s "
       f"(session.timeout.ms={KILL_SESSION_MS}): {split}")
    expect(took >= KILL_SESSION_MS / 1000 - 1.5,
          f"{label} c: reassignment came no earlier than the session timeout allows ({took:.1f}s)")
    produced.update(ctx.produce(topic, 1200, 600))
    wait_consumed([A, B, C], produced.values(), 60, f"{label} c")
    time.sleep(1)
    check_exactly_once([A, B, C], produced, f"{label} c (1800 records)")
    check_owners([B, C], produced, range(1200, 1800), split, f"{label} c")

    # d. committed offsets survive a broker restart.
    B.close()
    C.close()
    ok(f"{label} d: B and C closed (left the group)")
    ends = end_offsets(produced)
    before = ctx.committed(group, topic)
    expect(before == ends, f"{label} d: committed offsets = log end offsets before the restart: {before}")
    produced_d = ctx.produce(topic, 1800, 60)
    code = ctx.broker.stop(signal.SIGTERM)
    check(code == ctx.broker.clean_stop_code(), f"{label} d: broker stopped with SIGTERM (exit {code})")
    ctx.broker.start()
    ok(f"{label} d: broker restarted on the same data dir")
    after = ctx.committed(group, topic)
    expect(after == before, f"{label} d: committed offsets after the restart = before: {after}")
    produced_d.update(ctx.produce(topic, 1860, 60))
    D = ctx.member("D", group, topic, strategy=strategy)
    wait_split([D], [6], 60, what=f"{label} d")
    wait_consumed([D], produced_d.values(), 60, f"{label} d")
    time.sleep(1.5)
    check_exactly_once([D], produced_d, f"{label} d (new member after restart: only the 120 records after the commit)")
    first = {}
    for p, o, _k, _t in D.records:
        first.setdefault(p, o)
    expect(all(first.get(p, ends[p]) == ends[p] for p in range(PARTITIONS)),
          f"{label} d: D started each partition at the committed offset {ends}")
    D.close()


def section_live_restart(ctx):
    """The broker restarts (SIGTERM) under an active group: the members reconnect, no record
    is lost or read twice, and (as in Kafka, whose coordinator reloads the group from
    __consumer_offsets) they keep their member ids and partitions."""
    topic, group = unique("jg-live"), unique("jg-live-group")
    ctx.create(topic)
    A = ctx.member("LA", group, topic, session_ms=10000, heartbeat_ms=1000)
    B = ctx.member("LB", group, topic, session_ms=10000, heartbeat_ms=1000)
    split = wait_split([A, B], [3, 3], 60, what="live restart")
    produced = ctx.produce(topic, 0, 120)
    wait_consumed([A, B], produced.values(), 60, "live restart")
    before = {m.name: (m.gen, m.member_id, set(m.now), m.event_count()) for m in (A, B)}
    code = ctx.broker.stop(signal.SIGTERM)
    check(code == ctx.broker.clean_stop_code(), f"live restart: broker stopped with SIGTERM (exit {code})")
    time.sleep(1)
    ctx.broker.start()
    ok("live restart: broker restarted under the active group")
    produced.update(ctx.produce(topic, 120, 120))
    wait_consumed([A, B], produced.values(), 60, "live restart")
    time.sleep(1)
    check_exactly_once([A, B], produced, "live restart (240 records, 120 after the restart)")
    after = {m.name: (m.status()["gen"], m.member_id, set(m.now), m.event_count()) for m in (A, B)}
    expect(all(after[n][1:3] == before[n][1:3] for n in before),
           f"live restart: members kept their member ids and partitions")
    # Kafka 4.1.1 and 4.4.0 reload the group and then go through one rebalance (generation + 1) as
    # the members reconnect; reported, not checked.
    ok(f"live restart: generation {before['LA'][0]} -> {after['LA'][0]}, rebalance callbacks "
       f"{after['LA'][3] - before['LA'][3]} (LA) / {after['LB'][3] - before['LB'][3]} (LB)")
    A.close()
    B.close()


def section_static(ctx, strategy="default"):
    topic, group = unique("jg-static"), unique("jg-static-group")
    ctx.create(topic)
    opts = dict(strategy=strategy, session_ms=STATIC_SESSION_MS, heartbeat_ms=1000)
    S1 = ctx.member("S1", group, topic, instance_id="static-1", **opts)
    wait_split([S1], [6], 60, what="static: first member")
    S2 = ctx.member("S2", group, topic, instance_id="static-2", **opts)
    split = wait_split([S1, S2], [3, 3], 60, what="static: second member")
    ok(f"static: two static members split 3/3: {split}")
    produced = ctx.produce(topic, 0, 120)
    wait_consumed([S1, S2], produced.values(), 60, "static")
    time.sleep(0.5)
    check_exactly_once([S1, S2], produced, "static (120 records)")
    gen = S2.status()["gen"]
    check(S1.gen == gen, f"static: both in generation {gen}")

    def restart(old, other, name, instance, how):
        others_events = other.event_count()
        parts = set(old.now)
        if how == "kill":
            old.kill9()
        else:
            old.close(how)
        started = time.time()
        new = ctx.member(name, group, topic, instance_id=instance, **opts)
        new.wait(lambda: new.events and new.events[-1][1] == "ASSIGNED", 60, "its assignment after the restart")
        took = time.time() - started
        check(new.now == parts, f"static: {name} ({how}, restart) got the same partitions back "
                                f"{sorted(new.now)} after {took:.1f}s")
        expect(new.gen == gen, f"static: {name} rejoined in the same generation {gen} (got {new.gen})")
        st = other.status()
        with other.cond:
            seen = [f"{kind} {kv}" for _t, kind, kv in other.events[others_events:]]
        expect(other.event_count() == others_events and st["gen"] == gen and st["now"] == set(other.now),
              f"static: the other member {other.name} saw no rebalance (generation {st['gen']}, "
              f"partitions {sorted(st['now'])}, callbacks since the restart: {seen or 'none'})")
        return new

    # The first member (S1) is the group leader: restart it after kill -9.
    S1b = restart(S1, S2, "S1b", "static-1", "kill")
    more = ctx.produce(topic, 120, 120)
    produced.update(more)
    wait_consumed([S1, S1b, S2], produced.values(), 60, "static after leader restart")
    time.sleep(0.5)
    check_exactly_once([S1, S1b, S2], produced, "static after the leader's kill -9 and restart (240 records)")
    expect({p for p, _o, _k, _t in S1b.records} <= S1b.now
          and all((p, o) in set(more.values()) for p, o, _k, _t in S1b.records),
          "static: S1b resumed after S1's commits (only new records)")

    # The follower closes (a static member's close() does not leave the group) and restarts.
    S2b = restart(S2, S1b, "S2b", "static-2", "close")
    more = ctx.produce(topic, 240, 120)
    produced.update(more)
    members = [S1, S1b, S2, S2b]
    wait_consumed(members, produced.values(), 60, "static after follower restart")
    time.sleep(0.5)
    check_exactly_once(members, produced, "static after the follower's close and restart (360 records)")

    # The replaced members' sessions would have expired by now: no rebalance may follow.
    counts = (S1b.event_count(), S2b.event_count())
    gens = (S1b.status()["gen"], S2b.status()["gen"])
    time.sleep(STATIC_SESSION_MS / 1000 + 3)
    s1, s2 = S1b.status(), S2b.status()
    expect((S1b.event_count(), S2b.event_count()) == counts and (s1["gen"], s2["gen"]) == gens,
           f"static: no rebalance {STATIC_SESSION_MS / 1000 + 3:.0f}s later, when the replaced members' sessions "
           f"would have expired (generation {gens} -> {(s1['gen'], s2['gen'])})")
    status, out, err = ctx.cli("--describe", "--group", group, "--members", "--verbose")
    ids = set(re.findall(r"static-[12]", out))
    expect(status == 0 and S1b.member_id in out and S2b.member_id in out and S1.member_id not in out,
          f"static: --describe --members lists the two current member ids ({'instance ids shown' if ids else 'no instance ids'})")
    status, out, err = ctx.cli("--describe", "--group", group, "--state")
    expect(status == 0 and re.search(r"\bStable\s+2\s*$", out, re.M),
          "static: --describe --state: Stable, 2 members")
    S1b.close("close-leave")
    S2b.close("close-leave")
    status, out, err = ctx.cli("--describe", "--group", group, "--state")
    expect(status == 0 and re.search(r"\bEmpty\s+0\s*$", out, re.M),
          f"static: after both closed with LEAVE_GROUP the group is Empty:\n{out}{err}")


def table(out, header_start="GROUP"):
    """Rows of a kafka-consumer-groups table, as lists of whitespace-separated cells."""
    rows, header = [], None
    for line in out.splitlines():
        cells = line.split()
        if not cells:
            continue
        if cells[0] == header_start and header is None:
            header = cells
            continue
        if header is not None:
            rows.append(cells)
    return header, rows


def section_consumer_static(ctx):
    """KIP-848 static members: a static member's close() is a temporary leave (member
    epoch -2): it keeps its place and partitions until a new process with its instance id
    comes back and takes them, and the other member sees no rebalance."""
    topic, group = unique("jg-k848-static"), unique("jg-k848-static-group")
    ctx.create(topic)
    opts = dict(protocol="consumer")
    A = ctx.member("A", group, topic, instance_id="static-a", **opts)
    B = ctx.member("B", group, topic, instance_id="static-b", **opts)
    split = wait_split([A, B], [3, 3], 60, what="consumer-static: two static members")
    ok(f"consumer-static: two static members split 3/3: {show_layout(split)}")
    b_parts, a_parts, a_events = set(B.now), set(A.now), A.event_count()
    B.close("close")
    time.sleep(2)
    expect(A.event_count() == a_events and set(A.now) == a_parts,
           f"consumer-static: while B is away A keeps its 3 and gets none of B's (now {sorted(A.now)})")
    B2 = ctx.member("B2", group, topic, instance_id="static-b", **opts)
    B2.wait(lambda: B2.events and set(B2.now) == b_parts, 60, "B's partitions")
    check(set(B2.now) == b_parts, f"consumer-static: B2 (B's instance id) took B's partitions back: {sorted(B2.now)}")
    time.sleep(2)
    expect(A.event_count() == a_events and set(A.now) == a_parts,
           f"consumer-static: A saw no rebalance (callbacks since B left: {A.event_count() - a_events})")
    # B2 is killed (no leave): a new process with its instance id while B2's session runs
    # is refused UNRELEASED_INSTANCE_ID, fatal to the Java client (Kafka's
    # throwIfInstanceIdIsUnreleased); once the session ran out, the next one joins.
    B2.kill9()
    killed_at = time.time()
    B3 = ctx.member("B3", group, topic, instance_id="static-b", **opts)
    B3.wait(lambda: B3.errors or B3.events, 60, "an answer to B3's join")
    check(any("UnreleasedInstanceId" in e for e in B3.errors) and not B3.events,
          f"consumer-static: B3 (B2's instance id, B2 killed {time.time() - killed_at:.1f}s before) was refused: "
          f"{B3.errors[:1]}")
    B3.kill9(quiet=True)
    time.sleep(max(0.0, killed_at + CONSUMER_SESSION_MS / 1000 + 2 - time.time()))
    B4 = ctx.member("B4", group, topic, instance_id="static-b", **opts)
    B4.wait(lambda: len(B4.now) == 3 and len(A.now) == 3, 60, "B4 and A 3 partitions each")
    check(not B4.errors, f"consumer-static: B4 joined after B2's session ran out and holds {sorted(B4.now)}")
    A.close("close-leave")
    B4.close("close-leave")


def section_cli(ctx):
    partitions = 4
    topic, group = unique("jg-cli"), unique("jg-cli-group")
    ctx.create(topic, partitions)
    A = ctx.member("cli-a", group, topic)
    B = ctx.member("cli-b", group, topic)
    split = wait_split([A, B], [2, 2], 60, partitions=partitions, what="cli")
    owner = {p: m for m in (A, B) for p in m.now}
    first = ctx.produce(topic, 0, 100)
    wait_consumed([A, B], first.values(), 60, "cli")
    committed = end_offsets(first, partitions)
    for m in (A, B):
        m.wait(lambda m=m: all(m.committed.get(p) == committed[p] for p in m.now), 30, "commits")
    A.pause()
    B.pause()
    second = ctx.produce(topic, 100, 40)
    ends = end_offsets({**first, **second}, partitions)
    time.sleep(1)

    def describe_rows(*extra):
        status, out, err = ctx.cli("--describe", "--group", group, *extra)
        if status != 0:
            fail(f"--describe {' '.join(extra)} exited {status}:\n{out}\n{err}")
        return out, err

    out, err = describe_rows()
    header, rows = table(out)
    want_header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                   "CLIENT-ID"]
    check(header == want_header, f"cli --describe: header {header}")
    got = {int(r[2]): r for r in rows if len(r) == 9 and r[1] == topic}
    check(sorted(got) == list(range(partitions)), f"cli --describe: one row per partition ({len(rows)} rows)")
    for p in range(partitions):
        r = got[p]
        m = owner[p]
        want = [group, topic, str(p), str(committed[p]), str(ends[p]), str(ends[p] - committed[p]), m.member_id,
                "/127.0.0.1", m.name]
        expect(r == want, f"cli --describe: partition {p}: current {r[3]} end {r[4]} lag {r[5]} member {r[6][:20]}.. "
                         f"host {r[7]} client {r[8]} (want {want[3:6]}, {m.name})")

    out, err = describe_rows("--members")
    header, rows = table(out)
    expect(header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"], f"cli --members: header {header}")
    expect(sorted((r[1], r[2], r[3], r[4]) for r in rows)
          == sorted((m.member_id, "/127.0.0.1", m.name, "2") for m in (A, B)),
          "cli --describe --members: both members with host, client id and 2 partitions each")
    out, err = describe_rows("--members", "--verbose")
    header, rows = table(out)
    # Kafka 4.1 and 4.4 print the KIP-848 columns for classic groups too: CURRENT-EPOCH "-",
    # CURRENT-ASSIGNMENT "topic:0,1", TARGET-EPOCH "-", TARGET-ASSIGNMENT "-".
    want = sorted((m.member_id, f"{topic}:{','.join(str(p) for p in sorted(m.now))}") for m in (A, B))
    column = header.index("CURRENT-ASSIGNMENT") if header and "CURRENT-ASSIGNMENT" in header else None
    got = sorted((r[1], r[column]) for r in rows if column is not None and len(r) > column)
    expect(got == want, f"cli --describe --members --verbose: CURRENT-ASSIGNMENT {got}:\n{out}")

    out, err = describe_rows("--state")
    coordinator = f"{ctx.bootstrap} (1)"
    pattern = rf"^{re.escape(group)}\s+{re.escape(ctx.bootstrap)}\s+\(1\)\s+range\s+Stable\s+2\s*$"
    expect(re.search(pattern, out, re.M),
          f"cli --describe --state: coordinator {coordinator}, strategy range, Stable, 2 members:\n{out}")

    status, out, err = ctx.cli("--list")
    expect(status == 0 and group in out.split(), "cli --list: group listed")
    status, out, err = ctx.cli("--list", "--state")
    expect(status == 0 and re.search(rf"^{re.escape(group)}\s+Stable\s*$", out, re.M),
          f"cli --list --state: Stable:\n{out}{err}")
    status, out, err = ctx.cli("--list", "--type")
    expect(status == 0 and re.search(rf"^{re.escape(group)}\s+Classic\s*$", out, re.M),
          f"cli --list --type: Classic:\n{out}{err}")

    status, out, err = ctx.cli("--reset-offsets", "--to-earliest", "--group", group, "--topic", topic, "--execute")
    expect(f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state is "
           "Stable." in out and ctx.committed(group, topic) == committed,
          f"cli --reset-offsets on an active group refused, offsets unchanged (status {status}): "
          f"{(out + err).strip().splitlines()[-1:]}")
    status, out, err = ctx.cli("--delete", "--group", group)
    expect(f"* Group '{group}' could not be deleted due to: org.apache.kafka.common.errors.GroupNotEmptyException: "
           "The group is not empty." in out,
           f"cli --delete on an active group refused: {(out + err).strip().splitlines()[-1:]}")

    A.close()
    B.close()
    out, err = describe_rows("--state")
    expect(re.search(rf"^{re.escape(group)}\s+{re.escape(ctx.bootstrap)}\s+\(1\)\s+\S*\s*Empty\s+0\s*$", out, re.M),
          f"cli --describe --state after both left: Empty, 0 members:\n{out}")
    out, err = describe_rows()
    header, rows = table(out)
    got = {int(r[2]): r for r in rows if len(r) >= 6 and r[1] == topic}
    expect("has no active members" in (out + err)
          and all(got.get(p, [None] * 9)[3:7] == [str(committed[p]), str(ends[p]), str(ends[p] - committed[p]), "-"]
                  for p in range(partitions)),
          f"cli --describe of the inactive group: no active members, offsets and lag kept:\n{out}{err}")

    status, out, err = ctx.cli("--reset-offsets", "--to-earliest", "--group", group, "--topic", topic, "--dry-run")
    header, rows = table(out)
    expect(status == 0 and header == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
          and sorted((int(r[2]), r[3]) for r in rows) == [(p, "0") for p in range(partitions)]
          and ctx.committed(group, topic) == committed,
          f"cli --reset-offsets --to-earliest --dry-run: NEW-OFFSET 0, nothing changed:\n{out}{err}")
    status, out, err = ctx.cli("--reset-offsets", "--to-earliest", "--group", group, "--topic", topic, "--execute")
    header, rows = table(out)
    expect(status == 0 and sorted((int(r[2]), r[3]) for r in rows) == [(p, "0") for p in range(partitions)],
          f"cli --reset-offsets --to-earliest --execute: NEW-OFFSET 0:\n{out}{err}")
    expect(ctx.committed(group, topic) == {p: 0 for p in range(partitions)}, "cli: committed offsets are 0 after reset")
    C = ctx.member("cli-c", group, topic)
    all_records = {**first, **second}
    wait_consumed([C], all_records.values(), 60, "cli re-read after reset")
    time.sleep(1)
    check_exactly_once([C], all_records, "cli: after --to-earliest a new member re-reads from offset 0")
    expect(all(min(o for p2, o, _k, _t in C.records if p2 == p) == 0 for p in range(partitions)),
          "cli: the re-read starts at offset 0 on every partition")
    C.wait(lambda: all(C.committed.get(p) == ends[p] for p in range(partitions)), 30, "commits")
    C.close()

    status, out, err = ctx.cli("--reset-offsets", "--to-offset", "5", "--group", group, "--topic", topic, "--execute")
    expect(status == 0 and ctx.committed(group, topic) == {p: 5 for p in range(partitions)},
          "cli --reset-offsets --to-offset 5 --execute")
    status, out, err = ctx.cli("--reset-offsets", "--shift-by", "-2", "--group", group, "--topic", f"{topic}:0,1",
                               "--execute")
    expect(status == 0 and ctx.committed(group, topic) == {0: 3, 1: 3, 2: 5, 3: 5},
          "cli --reset-offsets --shift-by -2 on partitions 0,1")
    status, out, err = ctx.cli("--reset-offsets", "--to-latest", "--group", group, "--topic", topic, "--execute")
    expect(status == 0 and ctx.committed(group, topic) == ends, "cli --reset-offsets --to-latest --execute")

    # Offsets of partitions 0 and 1 only: a group with no offsets left at all may be removed
    # by the broker's periodic cleanup (Kafka: offsets.retention.check.interval.ms) before
    # the --delete below.
    status, out, err = ctx.cli("--delete-offsets", "--group", group, "--topic", f"{topic}:0,1")
    header, rows = table(out, "TOPIC")
    expect(status == 0 and sorted((int(r[1]), r[2]) for r in rows) == [(0, "Successful"), (1, "Successful")],
           f"cli --delete-offsets --topic {topic}:0,1: both Successful:\n{out}{err}")
    expect(ctx.committed(group, topic) == {0: -1, 1: -1, 2: ends[2], 3: ends[3]},
           "cli: partitions 0 and 1 have no committed offset after --delete-offsets, 2 and 3 kept theirs")

    status, out, err = ctx.cli("--delete", "--group", group)
    expect(status == 0 and f"Deletion of requested consumer groups ('{group}') was successful." in out,
          f"cli --delete of the inactive group: {(out + err).strip()}")
    status, out, err = ctx.cli("--list")
    expect(status == 0 and group not in out.split(), "cli --list: deleted group no longer listed")
    status, out, err = ctx.cli("--describe", "--group", group)
    expect(f"GroupIdNotFoundException: Group {group} not found." in err,
          f"cli --describe of the deleted group: GroupIdNotFoundException (status {status}): "
          f"{(out + err).strip().splitlines()[-1:]}")


# ---------------------------------------------------------------- KIP-848 sections
#
# group.protocol=consumer: the broker assigns (uniform by default, range on request) and
# reconciles incrementally; session timeout and heartbeat interval are broker settings
# (CONSUMER_SESSION_MS / CONSUMER_HEARTBEAT_MS, given to both brokers in main()).

CONSUMER_SESSION_MS = 6000
CONSUMER_HEARTBEAT_MS = 1000


def kafka_range(member_ids, partitions=PARTITIONS):
    """Apache Kafka's server-side range assignor, 4.1.1 and 4.4.0 (group-coordinator RangeAssignor,
    one topic, every member subscribed, no static members): the members sorted by member
    id, each gets the next contiguous range of partitions // members partitions, the first
    partitions % members of them one more. Not sticky. member_ids: {name: member id};
    returns {name: set}."""
    order = sorted(member_ids, key=lambda name: member_ids[name])
    quota, extra = divmod(partitions, len(order))
    out, start = {}, 0
    for i, name in enumerate(order):
        end = start + quota + (1 if i < extra else 0)
        out[name] = set(range(start, end))
        start = end
    return out


def show_layout(split):
    return "{" + ", ".join(f"{m}: {sorted(ps)}" for m, ps in sorted(split.items())) + "}"


def check_range_layout(split, members, label, when):
    ids = {m.name: m.member_id for m in members}
    want = kafka_range(ids)
    order = " < ".join(sorted(ids, key=lambda name: ids[name]))
    expect(split == want, f"{label}: range layout {when} is Kafka's (contiguous ranges in member-id order "
                          f"{order}): {show_layout(split)}, Kafka's: {show_layout(want)}")


def cpu_percent(members, seconds):
    """CPU use of the members' JVMs over the next seconds, in % of one core (Linux /proc)."""
    def used(pid):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    before = {m.name: used(m.process.pid) for m in members}
    time.sleep(seconds)
    return {m.name: (used(m.process.pid) - before[m.name]) / seconds * 100 for m in members}


def wait_same_epoch(members, timeout=20):
    """Polls the members' groupMetadata().generationId() (the member epoch) until they are
    all equal; returns it, or None and the last epochs seen."""
    deadline = time.time() + timeout
    while True:
        epochs = {m.name: m.status()["gen"] for m in members}
        if len(set(epochs.values())) == 1:
            return next(iter(epochs.values())), epochs
        if time.time() > deadline:
            return None, epochs
        time.sleep(0.5)


def events_since(member, start):
    with member.cond:
        return list(member.events[start:])


def check_incremental(member, start, before, what):
    """Since event index start, the member lost only the partitions it no longer holds
    (onPartitionsRevoked with exactly those), kept the others without a revocation, and
    saw no onPartitionsLost."""
    events = events_since(member, start)
    revoked = set().union(*[partition_set(kv["removed"]) for _t, kind, kv in events if kind == "REVOKED"] or [set()])
    lost = [kv for _t, kind, kv in events if kind == "LOST"]
    now = set(member.now)
    expect(not lost and revoked == before - now and now <= before | set().union(
        *[partition_set(kv["added"]) for _t, kind, kv in events if kind == "ASSIGNED"] or [set()]),
        f"{what}: {member.name} {sorted(before)} -> {sorted(now)}: revoked only {sorted(revoked)}"
        f"{', LOST ' + str(lost) if lost else ''} (incremental)")


def section_consumer(ctx, assignor=None, restart=True):
    """a. (uniform) / b. (range): two members split 3/3, a third joins -> 2/2/2, exactly once,
    incremental revocation; c. kill -9 -> the survivors get its partitions after the
    session timeout; d. offsets survive a broker restart."""
    name = assignor or "uniform"
    label = f"consumer-{name}"
    topic, group = unique(f"jg-k848-{name}"), unique(f"jg-k848-{name}-group")
    mopts = dict(protocol="consumer", remote_assignor=assignor)
    ctx.create(topic)
    produced = ctx.produce(topic, 0, 300)
    A = ctx.member("A", group, topic, **mopts)
    B = ctx.member("B", group, topic, **mopts)

    # Two members.
    split = wait_split([A, B], [3, 3], 60, what=f"{label} two members")
    ok(f"{label}: two members split 6 partitions 3/3, disjoint: {show_layout(split)}")
    if assignor == "range":
        check_range_layout(split, [A, B], label, "two members")
    produced.update(ctx.produce(topic, 300, 300))
    wait_consumed([A, B], produced.values(), 60, f"{label} two members")
    time.sleep(1)
    check_exactly_once([A, B], produced, f"{label}: two members (600 records, 300 produced before the group formed)")
    check_owners([A, B], produced, range(300, 600), split, f"{label}: two members")
    epoch, epochs = wait_same_epoch([A, B])
    expect(epoch is not None, f"{label}: both members at the same member epoch: {epochs}")

    # A third member joins.
    before = {m.name: set(m.now) for m in (A, B)}
    marks = {m.name: m.event_count() for m in (A, B)}
    C = ctx.member("C", group, topic, **mopts)
    joined_at = time.time()
    split = wait_split([A, B, C], [2, 2, 2], 60, what=f"{label} third member")
    ok(f"{label}: a third member joined -> 2/2/2 after {time.time() - joined_at:.1f}s, disjoint: {show_layout(split)}")
    for m in (A, B):
        check_incremental(m, marks[m.name], before[m.name], f"{label}: third member")
    expect(not any(kind in ("REVOKED", "LOST") for _t, kind, _kv in C.events),
           f"{label}: C was only assigned partitions: {[(kind, kv['now']) for _t, kind, kv in C.events]}")
    if assignor == "range":
        check_range_layout(split, [A, B, C], label, "after the join")
    else:
        expect(all(split[n] <= before[n] for n in before),
               f"{label}: uniform is sticky: A and B kept 2 of their 3 partitions: {show_layout(split)}")
    produced.update(ctx.produce(topic, 600, 600))
    wait_consumed([A, B, C], produced.values(), 60, f"{label} third member")
    time.sleep(1)
    check_exactly_once([A, B, C], produced, f"{label}: three members (1200 records)")
    check_owners([A, B, C], produced, range(600, 1200), split, f"{label}: three members")
    epoch, epochs = wait_same_epoch([A, B, C])
    expect(epoch is not None, f"{label}: all three at the same member epoch: {epochs}")

    # kill -9 of A: after the session timeout its partitions move to B and C.
    before = {m.name: set(m.now) for m in (B, C)}
    marks = {m.name: m.event_count() for m in (B, C)}
    A.kill9()
    killed_at = time.time()
    split = wait_split([B, C], [3, 3], CONSUMER_SESSION_MS / 1000 + 30, what=f"{label} kill -9")
    took = time.time() - killed_at
    ok(f"{label}: after kill -9 of A the survivors hold 3/3 after {took:.1f}s "
       f"(session timeout {CONSUMER_SESSION_MS} ms): {show_layout(split)}")
    expect(took >= CONSUMER_SESSION_MS / 1000 - 1.5,
           f"{label}: reassignment came no earlier than the session timeout allows ({took:.1f}s)")
    if assignor == "range":
        check_range_layout(split, [B, C], label, "after the kill")
        for m in (B, C):
            check_incremental(m, marks[m.name], before[m.name], f"{label}: after the kill")
    else:
        for m in (B, C):
            events = events_since(m, marks[m.name])
            expect(split[m.name] >= before[m.name]
                   and not any(kind in ("REVOKED", "LOST") for _t, kind, _kv in events),
                   f"{label}: {m.name} kept {sorted(before[m.name])} without a revocation and gained "
                   f"{sorted(split[m.name] - before[m.name])}")
    produced.update(ctx.produce(topic, 1200, 600))
    wait_consumed([A, B, C], produced.values(), 60, f"{label} kill -9")
    time.sleep(1)
    check_exactly_once([A, B, C], produced, f"{label}: after the kill (1800 records)")
    check_owners([B, C], produced, range(1200, 1800), split, f"{label}: after the kill")
    if restart:
        restart_and_resume(ctx, label, group, topic, produced, mopts, [B, C])
    else:
        B.close()
        C.close()


def restart_and_resume(ctx, label, group, topic, produced, mopts, members):
    """The members leave; the broker restarts with SIGTERM; the committed offsets are
    unchanged and a new member of the group reads only the records after them."""
    for m in members:
        m.close()
    ok(f"{label} restart: {', '.join(m.name for m in members)} closed (left the group)")
    ends = end_offsets(produced)
    before = ctx.committed(group, topic)
    expect(before == ends, f"{label} restart: committed offsets = log end offsets before the restart: {before}")
    status, out, err = ctx.cli("--describe", "--group", group, "--state")
    ok(f"{label} restart: --describe --state before the restart: {out.strip().splitlines()[-1:]}")
    produced_d = ctx.produce(topic, 1800, 60)
    code = ctx.broker.stop(signal.SIGTERM)
    check(code == ctx.broker.clean_stop_code(), f"{label} restart: broker stopped with SIGTERM (exit {code})")
    ctx.broker.start()
    ok(f"{label} restart: broker restarted on the same data dir")
    after = ctx.committed(group, topic)
    expect(after == before, f"{label} restart: committed offsets after the restart = before: {after}")
    produced_d.update(ctx.produce(topic, 1860, 60))
    D = ctx.member("D", group, topic, **mopts)
    wait_split([D], [PARTITIONS], 60, what=f"{label} restart")
    wait_consumed([D], produced_d.values(), 60, f"{label} restart")
    time.sleep(1.5)
    check_exactly_once([D], produced_d, f"{label} restart: a new member after the restart reads only the 120 "
                                        "records after the commit")
    first = {}
    for p, o, _k, _t in D.records:
        first.setdefault(p, o)
    expect(all(first.get(p, ends[p]) == ends[p] for p in range(PARTITIONS)),
           f"{label} restart: D started each partition at the committed offset {ends}")
    D.close()


def section_consumer_live_restart(ctx):
    """The broker restarts (SIGTERM) under an active KIP-848 group: the members carry on, no
    record is lost or read twice, and they end up with 3/3 again. Whether they keep their
    member ids and epochs is reported, not checked (Kafka reloads the group from
    __consumer_offsets; Strand does not persist KIP-848 group state, so there the members
    rejoin)."""
    topic, group = unique("jg-k848-live"), unique("jg-k848-live-group")
    ctx.create(topic)
    A = ctx.member("KA", group, topic, protocol="consumer")
    B = ctx.member("KB", group, topic, protocol="consumer")
    wait_split([A, B], [3, 3], 60, what="consumer-live-restart")
    produced = ctx.produce(topic, 0, 120)
    wait_consumed([A, B], produced.values(), 60, "consumer-live-restart")
    for m in (A, B):
        m.wait(lambda m=m: all(m.committed.get(p) == end_offsets(produced)[p] for p in m.now), 30, "commits")
    before = {m.name: (m.status()["gen"], m.member_id, sorted(m.now), m.event_count()) for m in (A, B)}
    code = ctx.broker.stop(signal.SIGTERM)
    check(code == ctx.broker.clean_stop_code(), f"consumer-live-restart: broker stopped with SIGTERM (exit {code})")
    time.sleep(1)
    restarted = time.time()
    ctx.broker.start()
    ok("consumer-live-restart: broker restarted under the active group")
    produced.update(ctx.produce(topic, 120, 120))
    wait_consumed([A, B], produced.values(), 90, "consumer-live-restart")
    split = wait_split([A, B], [3, 3], 60, what="consumer-live-restart after the restart")
    ok(f"consumer-live-restart: records after the restart consumed {time.time() - restarted:.1f}s after it; "
       f"3/3 again: {show_layout(split)}")
    time.sleep(1)
    check_exactly_once([A, B], produced, "consumer-live-restart (240 records, 120 after the restart)")
    after = {m.name: (m.status()["gen"], m.member_id, sorted(m.now), m.event_count()) for m in (A, B)}
    for m in (A, B):
        with m.cond:
            seen = [f"{kind} {kv['removed'] if kind != 'ASSIGNED' else kv['added']}"
                    for _t, kind, kv in m.events[before[m.name][3]:]]
        ok(f"consumer-live-restart: {m.name}: member id {'kept' if after[m.name][1] == before[m.name][1] else 'new'}, "
           f"epoch {before[m.name][0]} -> {after[m.name][0]}, partitions {before[m.name][2]} -> {after[m.name][2]}, "
           f"callbacks since the restart: {seen or 'none'}; commit failures: {m.commit_failures or 'none'}")
    A.close()
    B.close()


def section_consumer_cli(ctx):
    """e. kafka-consumer-groups on a KIP-848 group: --describe, --members [--verbose],
    --state [--verbose], --list --state/--type, refusals while active, then the empty group."""
    partitions = 4
    topic, group = unique("jg-k848-cli"), unique("jg-k848-cli-group")
    ctx.create(topic, partitions)
    A = ctx.member("k848-cli-a", group, topic, protocol="consumer")
    B = ctx.member("k848-cli-b", group, topic, protocol="consumer")
    wait_split([A, B], [2, 2], 60, partitions=partitions, what="consumer-cli")
    owner = {p: m for m in (A, B) for p in m.now}
    first = ctx.produce(topic, 0, 100)
    wait_consumed([A, B], first.values(), 60, "consumer-cli")
    committed = end_offsets(first, partitions)
    for m in (A, B):
        m.wait(lambda m=m: all(m.committed.get(p) == committed[p] for p in m.now), 30, "commits")
    epoch, epochs = wait_same_epoch([A, B])
    check(epoch is not None, f"consumer-cli: both members at member epoch {epoch} ({epochs})")
    A.pause()
    B.pause()
    # A paused consumer has nothing to do but heartbeat. (Kafka's AsyncKafkaConsumer spins
    # in poll() while its fetch buffer holds an empty fetch for a paused partition: that
    # happens when the broker answers full fetch responses, without KIP-227 fetch sessions.)
    time.sleep(1)
    busy = cpu_percent([A, B], 3)
    expect(all(v < 25 for v in busy.values()),
           f"consumer-cli: the two paused consumers are idle (CPU over 3 s: "
           f"{', '.join(f'{n} {v:.0f}%' for n, v in busy.items())})")
    second = ctx.produce(topic, 100, 40)
    ends = end_offsets({**first, **second}, partitions)
    time.sleep(1)

    def run(*args):
        status, out, err = ctx.cli(*args)
        if status != 0:
            fail(f"kafka-consumer-groups {' '.join(args)} exited {status}:\n{out}\n{err}")
        return out, err

    out, err = run("--describe", "--group", group)
    header, rows = table(out)
    want_header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                   "CLIENT-ID"]
    check(header == want_header, f"consumer-cli --describe: header {header}")
    got = {int(r[2]): r for r in rows if len(r) == 9 and r[1] == topic}
    check(sorted(got) == list(range(partitions)), f"consumer-cli --describe: one row per partition:\n{out}{err}")
    for p in range(partitions):
        r, m = got[p], owner[p]
        want = [group, topic, str(p), str(committed[p]), str(ends[p]), str(ends[p] - committed[p]), m.member_id,
                "/127.0.0.1", m.name]
        expect(r == want, f"consumer-cli --describe: partition {p}: {r[3:]} (want {want[3:]})")

    out, err = run("--describe", "--group", group, "--members")
    header, rows = table(out)
    expect(header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
           f"consumer-cli --members: header {header}")
    expect(sorted(r[1:] for r in rows) == sorted([m.member_id, "/127.0.0.1", m.name, "2"] for m in (A, B)),
           f"consumer-cli --describe --members: both members with host, client id and 2 partitions each:\n{out}")

    out, err = run("--describe", "--group", group, "--members", "--verbose")
    header, rows = table(out)
    want_header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                   "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    expect(header == want_header, f"consumer-cli --members --verbose: header {header}")
    want = sorted([group, m.member_id, "/127.0.0.1", m.name, "2", str(epoch),
                   f"{topic}:{','.join(str(p) for p in sorted(m.now))}", str(epoch),
                   f"{topic}:{','.join(str(p) for p in sorted(m.now))}"] for m in (A, B))
    expect(sorted(rows) == want,
           f"consumer-cli --describe --members --verbose: epochs {epoch} and assignments (current = target):\n{out}")

    out, err = run("--describe", "--group", group, "--state")
    expect(re.search(rf"^{re.escape(group)}\s+{re.escape(ctx.bootstrap)}\s+\(1\)\s+uniform\s+Stable\s+2\s*$", out, re.M),
           f"consumer-cli --describe --state: coordinator, assignor uniform, Stable, 2 members:\n{out}")
    out, err = run("--describe", "--group", group, "--state", "--verbose")
    header, rows = table(out)
    expect(header == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                      "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
           and rows == [[group, ctx.bootstrap, "(1)", "uniform", "Stable", str(epoch), str(epoch), "2"]],
           f"consumer-cli --describe --state --verbose: uniform, Stable, group epoch = target assignment epoch = "
           f"{epoch}, 2 members:\n{out}")

    status, out, err = ctx.cli("--list", "--state")
    expect(status == 0 and re.search(rf"^{re.escape(group)}\s+Stable\s*$", out, re.M),
           f"consumer-cli --list --state: Stable:\n{out}{err}")
    status, out, err = ctx.cli("--list", "--type")
    expect(status == 0 and re.search(rf"^{re.escape(group)}\s+Consumer\s*$", out, re.M),
           f"consumer-cli --list --type: Consumer:\n{out}{err}")
    status, out, err = ctx.cli("--list", "--type", "consumer")
    expect(status == 0 and group in out.split(), f"consumer-cli --list --type consumer lists the group:\n{out}{err}")
    status, out, err = ctx.cli("--list", "--type", "classic")
    expect(status == 0 and group not in out.split(), f"consumer-cli --list --type classic does not list it:\n{out}{err}")

    status, out, err = ctx.cli("--reset-offsets", "--to-earliest", "--group", group, "--topic", topic, "--execute")
    expect(f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state is "
           "Stable." in out and ctx.committed(group, topic) == committed,
           f"consumer-cli --reset-offsets on the active group refused, offsets unchanged (status {status}): "
           f"{(out + err).strip().splitlines()[-1:]}")
    status, out, err = ctx.cli("--delete", "--group", group)
    expect(f"* Group '{group}' could not be deleted due to: org.apache.kafka.common.errors.GroupNotEmptyException: "
           "The group is not empty." in out,
           f"consumer-cli --delete on the active group refused: {(out + err).strip().splitlines()[-1:]}")

    A.close()
    B.close()
    out, err = run("--describe", "--group", group, "--state")
    expect(re.search(rf"^{re.escape(group)}\s+{re.escape(ctx.bootstrap)}\s+\(1\)\s+\S+\s+Empty\s+0\s*$", out, re.M),
           f"consumer-cli --describe --state after both left: Empty, 0 members:\n{out}")
    out, err = run("--describe", "--group", group)
    header, rows = table(out)
    got = {int(r[2]): r for r in rows if len(r) >= 6 and r[1] == topic}
    expect("has no active members" in (out + err)
           and all(got.get(p, [None] * 9)[3:7] == [str(committed[p]), str(ends[p]), str(ends[p] - committed[p]), "-"]
                   for p in range(partitions)),
           f"consumer-cli --describe of the empty group: no active members, offsets and lag kept:\n{out}{err}")
    out, err = run("--describe", "--group", group, "--members")
    expect("has no active members" in (out + err), f"consumer-cli --describe --members of the empty group:\n{out}{err}")
    status, out, err = ctx.cli("--list", "--state")
    expect(status == 0 and re.search(rf"^{re.escape(group)}\s+Empty\s*$", out, re.M),
           f"consumer-cli --list --state: Empty:\n{out}{err}")
    status, out, err = ctx.cli("--delete", "--group", group)
    expect(status == 0 and f"Deletion of requested consumer groups ('{group}') was successful." in out,
           f"consumer-cli --delete of the empty group: {(out + err).strip()}")


def section_consumer_regex(ctx):
    """f. Regex subscriptions under KIP-848: subscribe(java.util.regex.Pattern) (the client
    resolves it from metadata, refreshed every metadata.max.age.ms = 5000 here) and
    subscribe(SubscriptionPattern) (the broker resolves it): the member gets the matching
    topics' partitions and no others, and a matching topic created later is picked up."""
    for mode in ("pattern", "broker-pattern"):
        prefix = unique(f"jg-rx{'c' if mode == 'pattern' else 'b'}")
        label = f"consumer-regex ({'subscribe(Pattern)' if mode == 'pattern' else 'subscribe(SubscriptionPattern)'})"
        ta, tb, tc, other = f"{prefix}-a", f"{prefix}-b", f"{prefix}-c", f"{prefix}_other"
        ctx.create(ta, 3)
        ctx.create(tb, 2)
        ctx.create(other, 2)
        regex = f"{prefix}-.*"
        opts = {mode.replace("-", "_"): regex}
        R = ctx.member(f"R-{mode}", unique(f"{prefix}-group"), None, protocol="consumer",
                       metadata_max_age_ms=5000, **opts)
        want = {(ta, p) for p in range(3)} | {(tb, p) for p in range(2)}
        R.wait(lambda: R.tnow == want, 60, f"the partitions of {ta} and {tb}")
        ok(f"{label}: '{regex}' -> {sorted(R.tnow)} ({other} not matched)")
        produced = set()
        for t in (ta, tb, other):
            produced |= {(t, p, o) for p, o in ctx.produce(t, 0, 30).values()}
        wanted = {r for r in produced if r[0] != other}
        R.wait(lambda: wanted <= set(R.trecords), 60, "the records of the matching topics")
        time.sleep(1)
        counts = collections.Counter(R.trecords)
        expect(set(counts) == wanted and max(counts.values()) == 1,
               f"{label}: the {len(wanted)} records of {ta} and {tb} consumed exactly once, none of {other} "
               f"({sum(1 for r in counts if r[0] == other)} of those read)")
        marks = R.event_count()
        ctx.create(tc, 2)
        created = time.time()
        want |= {(tc, 0), (tc, 1)}
        R.wait(lambda: R.tnow == want, 90, f"the partitions of {tc}, created after subscribing")
        took = time.time() - created
        events = events_since(R, marks)
        ok(f"{label}: {tc}, created afterwards, picked up after {took:.1f}s: {sorted(R.tnow)}")
        expect(not any(kind in ("REVOKED", "LOST") for _t, kind, _kv in events),
               f"{label}: adding {tc} revoked nothing: {[kind + ' ' + kv.get('tnow', '') for _t, kind, kv in events]}")
        more = {(tc, p, o) for p, o in ctx.produce(tc, 0, 30).values()}
        more |= {(ta, p, o) for p, o in ctx.produce(ta, 30, 30).values()}
        wanted |= more
        R.wait(lambda: wanted <= set(R.trecords), 60, f"the records of {tc}")
        time.sleep(1)
        counts = collections.Counter(R.trecords)
        expect(set(counts) == wanted and max(counts.values()) == 1,
               f"{label}: all {len(wanted)} records of {ta}, {tb}, {tc} consumed exactly once, none of {other}")
        R.close()


SECTIONS = {
    "eager": lambda ctx: section_rebalance(ctx, "default"),
    "cooperative": lambda ctx: section_rebalance(ctx, "cooperative-sticky"),
    "live-restart": section_live_restart,
    "static": section_static,
    "consumer-static": section_consumer_static,
    "cli": section_cli,
    "consumer": section_consumer,
    "consumer-range": lambda ctx: section_consumer(ctx, "range", restart=False),
    "consumer-live-restart": section_consumer_live_restart,
    "consumer-cli": section_consumer_cli,
    "consumer-regex": section_consumer_regex,
}
# Without section names, the classic-protocol sections run; "kip848" names the KIP-848 ones.
DEFAULT_SECTIONS = ["eager", "cooperative", "live-restart", "static", "cli"]
KIP848_SECTIONS = ["consumer", "consumer-range", "consumer-live-restart", "consumer-cli", "consumer-regex",
                   "consumer-static"]


def main():
    args = sys.argv[1:]
    kind = "strand"
    if "--kafka" in args:
        kind = "kafka"
        args.remove("--kafka")
    names = []
    for name in args or DEFAULT_SECTIONS:
        names += KIP848_SECTIONS if name == "kip848" else [name]
    for name in names:
        if name not in SECTIONS:
            print(f"unknown section {name}; known: {' '.join(SECTIONS)}")
            return 2
    if not CLASSPATH or not LOG4J:
        print("FAIL: GROUP_DRIVER_CLASSPATH / GROUP_DRIVER_LOG4J unset (run interop/java/groups.sh)")
        return 2
    failed = []
    total = time.time()
    with tempfile.TemporaryDirectory(prefix="java-groups-") as workdir:
        broker = make_broker(kind, workdir, consumer_session_timeout_ms=CONSUMER_SESSION_MS,
                             consumer_heartbeat_interval_ms=CONSUMER_HEARTBEAT_MS)
        ctx = Ctx(broker, workdir)
        try:
            broker.start()
            print(f"=== {kind} broker on {broker.bootstrap}", flush=True)
            for name in names:
                started = time.time()
                print(f"--- section {name}", flush=True)
                soft = len(SOFT_FAILURES)
                try:
                    if broker.process is None:
                        broker.start()
                    SECTIONS[name](ctx)
                    if len(SOFT_FAILURES) > soft:
                        raise Failure(f"{len(SOFT_FAILURES) - soft} check(s) failed in section {name}")
                    print(f"--- section {name} passed in {time.time() - started:.1f}s", flush=True)
                except Failure as error:
                    print(f"FAIL: {error}", flush=True)
                    print(f"--- section {name} FAILED after {time.time() - started:.1f}s", flush=True)
                    failed.append(name)
                finally:
                    ctx.kill_members()
        finally:
            ctx.kill_members()
            code = broker.stop(signal.SIGTERM)
            if code != broker.clean_stop_code():
                print(f"FAIL: broker exit status after SIGTERM was {code}\n{_tail(broker.log_path)}", flush=True)
                failed.append("broker-stop")
            for path in broker.panics():
                print(f"FAIL: broker panicked ({path}):\n{_tail(path)}", flush=True)
                failed.append("panic")
            if failed:
                print(f"--- broker log tail ({broker.log_path}):\n{_tail(broker.log_path, 30)}", flush=True)
    passed = [n for n in names if n not in failed]
    print(f"java groups took {time.time() - total:.1f}s", flush=True)
    print(f"sections: {len(passed)} passed, {len(set(failed))} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Strand's native CLI (`strand topic|produce|consume|group|cluster`) against a Kafka broker,
cross-checked with librdkafka (confluent-kafka) and kafka-python, which see the broker
directly. Checks:

- errors: an unreachable broker, an existing topic (TOPIC_ALREADY_EXISTS), a bad config
  value (INVALID_CONFIG), replication factor 2 on one broker (INVALID_REPLICATION_FACTOR),
  an unknown topic (UNKNOWN_TOPIC_OR_PARTITION), a non-empty or unknown group
  (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND), a bad JSON input line: non-zero exit, stderr
  starting "strand: " and naming Kafka's error;
- topic create (-p, -r, -c), list (--json: name, id = the broker's topic id, partitions,
  replication factor; internal topics only with --internal), describe (partitions, leader,
  replicas, ISR, offsets; overridden configs as DYNAMIC_TOPIC_CONFIG, --all-configs adds
  DEFAULT_CONFIG), alter-config --set/--delete (seen by describe and by librdkafka), delete;
- produce: text with --key-separator and -H headers, --file, -p, --acks 0|1|all, every
  -z codec (the log really is smaller: DescribeLogDirs), -f json (null key and value,
  explicit partition), --json acks report; keyed records land on the partition Kafka's
  murmur2 partitioner picks (the same as librdkafka's murmur2_random, key by key), keyless
  records spread;
- consume: -o start|end|N, --timestamp, -n, --timeout-ms, -p (several), -f text|json|hex,
  --print-key, --read-committed (librdkafka transactions); records from librdkafka read by
  the CLI and records from the CLI read by librdkafka, headers included;
- groups: two `strand consume -g G` processes split a 4-partition topic by range
  assignment and together read every record once; group list/describe (members,
  assignments, committed offsets, lag); a restarted member resumes from the commits;
  reset-offsets (dry run commits nothing; --to-earliest/--to-latest/--to-offset/
  --to-timestamp/--shift-by, clamped to the log as kafka-consumer-groups does, --topic T:P,
  --all-topics) and its refusal while a librdkafka member is active; group delete;
- cluster info: cluster id, controller, the one broker, topic and partition counts;
- human (non --json) output names the topics, groups and cluster.

Against Strand: STRAND_BOOTSTRAP names the broker (interop/run.sh's run_driver starts a
fresh one), STRAND_BIN the binary under test (default target/release/strand, relative to the
repo root). `--against-kafka` starts Apache Kafka 4.4.0 itself (interop/kafka/run-kafka.sh,
jars from interop/kafka/fetch.sh) on a free port in 29500-29999, runs the same checks
against it and stops it: the CLI works against any Kafka broker, not only Strand.

    STRAND_BOOTSTRAP=127.0.0.1:9092 python3 interop/python/native_cli_test.py
    python3 interop/python/native_cli_test.py --against-kafka

Prints "ok: ..." per check and exits 1 with "FAIL: ..." (the command and its output) on the
first failed one. Every command runs under a timeout and a watchdog ends the run if it
overstays, so it never hangs.
"""
import base64
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from dataset import check, fail, ok

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
STEP_TIMEOUT = 60
OVERALL_TIMEOUT = 540
KAFKA_PORTS = range(29500, 30000)

BIN = os.environ.get("STRAND_BIN", "target/release/strand")
if not os.path.isabs(BIN):
    BIN = os.path.join(REPO, BIN)

BOOTSTRAP = os.environ.get("STRAND_BOOTSTRAP", "127.0.0.1:9092")
RUN = f"{time.time_ns() % 10**10}"
NOW_MS = int(time.time() * 1000)
# Explicit record timestamps: an hour ago (recent, so no retention check touches them).
BASE_TS = NOW_MS - 3_600_000

_children = []  # every process started here, ended on exit and by the watchdog


def _kill_children():
    for proc, group in list(_children):
        if proc.poll() is None:
            try:
                if group:
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()
            except ProcessLookupError:
                pass


def _watchdog():
    print(f"FAIL: watchdog: run exceeded {OVERALL_TIMEOUT}s", flush=True)
    _kill_children()
    os._exit(2)


def name(tag):
    return f"cli-{tag}-{RUN}"


# ---------------------------------------------------------------------------------------
# Running the CLI


class Result:
    def __init__(self, argv, code, out, err, elapsed):
        self.argv, self.code, self.out, self.err, self.elapsed = argv, code, out, err, elapsed

    def show(self):
        def block(text):
            text = text.rstrip("\n")
            lines = text.split("\n") if text else []
            if len(lines) > 40:
                lines = lines[:20] + [f"... ({len(lines) - 40} lines)"] + lines[-20:]
            return "\n".join("    " + line for line in lines) or "    (empty)"
        return (f"\n  command: {shlex.join(self.argv)}\n  exit status: {self.code} ({self.elapsed:.1f}s)"
                f"\n  stdout:\n{block(self.out)}\n  stderr:\n{block(self.err)}")

    def lines(self):
        out = self.out.rstrip("\n")
        return out.split("\n") if out else []


def argv_for(args, bootstrap=True):
    return [BIN] + list(args) + (["-b", BOOTSTRAP] if bootstrap else [])


def _decode(data):
    return data.decode("utf-8", errors="backslashreplace") if data is not None else ""


def run(args, stdin=None, timeout=STEP_TIMEOUT, bootstrap=True):
    argv = argv_for(args, bootstrap)
    started = time.time()
    try:
        proc = subprocess.run(argv, input=stdin.encode() if isinstance(stdin, str) else stdin,
                              stdin=None if stdin is not None else subprocess.DEVNULL,
                              capture_output=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired as e:
        r = Result(argv, "timeout", _decode(e.stdout), _decode(e.stderr), time.time() - started)
        fail(f"`{shlex.join(argv)}` did not finish within {timeout}s{r.show()}")
    return Result(argv, proc.returncode, _decode(proc.stdout), _decode(proc.stderr), time.time() - started)


def run_ok(args, what, **kw):
    r = run(args, **kw)
    if r.code != 0:
        fail(f"{what}: the command failed{r.show()}")
    return r


def run_json(args, what, **kw):
    r = run_ok(list(args) + ["--json"], what, **kw)
    try:
        return json.loads(r.out)
    except ValueError as e:
        fail(f"{what}: stdout is not one JSON document ({e}){r.show()}")


def json_lines(r, what):
    out = []
    for line in r.lines():
        try:
            out.append(json.loads(line))
        except ValueError as e:
            fail(f"{what}: line {line!r} is not JSON ({e}){r.show()}")
    return out


def run_err(args, error_name, what, **kw):
    """The command must fail: non-zero exit, stderr starting "strand: " and naming error_name."""
    r = run(args, **kw)
    if r.code == 0:
        fail(f"{what}: the command succeeded, expected a failure{r.show()}")
    if not r.err.startswith("strand: "):
        fail(f"{what}: stderr does not start with 'strand: '{r.show()}")
    if error_name and error_name not in r.err:
        fail(f"{what}: stderr does not name {error_name}{r.show()}")
    ok(f"{what} (exit {r.code}: {r.err.strip().splitlines()[0][:160]})")
    return r


def spawn(args):
    argv = argv_for(args)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=REPO)
    proc.argv, proc.started = argv, time.time()
    _children.append((proc, False))
    return proc


def finish(proc, timeout, what):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        r = Result(proc.argv, "timeout", _decode(out), _decode(err), time.time() - proc.started)
        fail(f"{what}: did not finish within {timeout}s{r.show()}")
    return Result(proc.argv, proc.returncode, _decode(out), _decode(err), time.time() - proc.started)


def expect(condition, message, result=None):
    if not condition:
        fail(message + (result.show() if result is not None else ""))
    ok(message)


# ---------------------------------------------------------------------------------------
# Direct clients (the witnesses)


_admin = []


def admin():
    """One AdminClient for the run (a client dropped while its futures run cancels them)."""
    if not _admin:
        _admin.append(AdminClient({"bootstrap.servers": BOOTSTRAP}))
    return _admin[0]


def produce_direct(topic, records, **conf):
    """records: (partition, key, value, headers, timestamp); returns [(partition, offset)]."""
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 5, **conf})
    acked = []

    def delivered(error, message):
        if error is not None:
            fail(f"librdkafka delivery to {topic} failed: {error}")
        acked.append((message.partition(), message.offset()))

    for partition, key, value, headers, timestamp in records:
        kwargs = {"key": key, "value": value, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        producer.produce(topic, **kwargs)
    if producer.flush(30) != 0 or len(acked) != len(records):
        fail(f"librdkafka: {len(acked)} of {len(records)} records to {topic} acknowledged")
    return acked


def consume_direct(topic, partitions, count, timeout=20):
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": f"witness-{RUN}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    out = []
    deadline = time.time() + timeout
    while len(out) < count and time.time() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            fail(f"librdkafka consume error on {topic}: {message.error()}")
        out.append(message)
    consumer.close()
    if len(out) != count:
        fail(f"librdkafka read {len(out)} of {count} records from {topic}")
    return out


def committed_direct(group, topic, partitions):
    result = admin().list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])])[group].result(15)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def high_watermarks(topic, partitions):
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": f"witness-{RUN}"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions]
    finally:
        consumer.close()


def topic_configs_direct(topic):
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin().describe_configs([resource])[resource].result(15)


def log_bytes(topic):
    """The topic's size on disk, from DescribeLogDirs (kafka-python)."""
    from kafka.admin import KafkaAdminClient
    client = KafkaAdminClient(bootstrap_servers=BOOTSTRAP, request_timeout_ms=15000)
    try:
        total = 0
        for broker in client.describe_log_dirs(topic_partitions=[topic]):
            for log_dir in broker["log_dirs"]:
                for t in log_dir["topics"]:
                    if t["name"] == topic:
                        total += sum(p["partition_size"] for p in t["partitions"])
        return total
    finally:
        client.close()


def uuid_forms(topic_id):
    """The spellings of a topic id: Kafka's base64url (and plain base64), and the UUID forms."""
    msb = topic_id.get_most_significant_bits() & (2**64 - 1)
    lsb = topic_id.get_least_significant_bits() & (2**64 - 1)
    raw = msb.to_bytes(8, "big") + lsb.to_bytes(8, "big")
    return {base64.urlsafe_b64encode(raw).rstrip(b"=").decode(), base64.b64encode(raw).rstrip(b"=").decode(),
            str(uuid.UUID(bytes=raw)), raw.hex(), str(topic_id)}


def group_direct(group):
    return admin().describe_consumer_groups([group])[group].result(15)


# ---------------------------------------------------------------------------------------
# The checks


class State:
    pass


S = State()


def check_connection_errors():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    r = run(["topic", "list", "-b", f"127.0.0.1:{closed}"], bootstrap=False, timeout=90)
    expect(r.code != 0 and r.err.startswith("strand: "),
           f"an unreachable broker: non-zero exit and a 'strand: ' message ({r.elapsed:.1f}s)", r)
    r = run(["topic", "list", "--bootstrap-server", BOOTSTRAP], bootstrap=False)
    expect(r.code == 0, "--bootstrap-server (long form) works", r)


def check_topics():
    md = admin().list_topics(timeout=10)
    S.broker_ids = sorted(md.brokers)
    S.brokers = {b.id: (b.host, b.port) for b in md.brokers.values()}
    check(len(S.broker_ids) == 1, f"the broker under test has one broker ({S.brokers})")
    S.broker = S.broker_ids[0]

    cfg = S.cfg = name("configured")
    created = run_json(["topic", "create", cfg, "-p", "3", "-r", "1", "-c", "cleanup.policy=compact",
                        "-c", "retention.ms=3600000"], "topic create")
    expect(created == {"topic": cfg, "partitions": 3, "replication_factor": 1},
           f"topic create --json prints {{topic, partitions: 3, replication_factor: 1}} ({created})")
    meta = admin().list_topics(cfg, timeout=10).topics[cfg]
    check(meta.error is None and len(meta.partitions) == 3, "librdkafka sees the topic with 3 partitions")
    configs = topic_configs_direct(cfg)
    check(configs["cleanup.policy"].value == "compact" and configs["retention.ms"].value == "3600000",
          "librdkafka sees -c cleanup.policy=compact and retention.ms=3600000")

    run_err(["topic", "create", cfg, "-p", "3"], "TOPIC_ALREADY_EXISTS", "creating it again fails")
    bad = name("badconfig")
    run_err(["topic", "create", bad, "-c", "retention.ms=banana"], "INVALID_CONFIG",
            "topic create -c retention.ms=banana fails")
    check(bad not in admin().list_topics(timeout=10).topics, "and creates nothing")
    run_err(["topic", "create", name("rf2"), "-r", "2"], "INVALID_REPLICATION_FACTOR",
            "replication factor 2 on one broker fails")

    # Human output: create without --json, then list and describe tables.
    text = S.text = name("text")
    run_ok(["topic", "create", text, "--partitions", "1", "--replication-factor", "1"], "topic create (human)")
    check(text in admin().list_topics(timeout=10).topics, "topic create without --json creates the topic")

    listed = run_json(["topic", "list"], "topic list")
    by_name = {t.get("name"): t for t in listed} if isinstance(listed, list) else {}
    check(isinstance(listed, list) and cfg in by_name and text in by_name, f"topic list --json lists {cfg} and {text}")
    entry = by_name[cfg]
    check(entry.get("partitions") == 3 and entry.get("replication_factor") == 1 and entry.get("internal") is False,
          f"topic list: partitions 3, replication_factor 1, internal false ({entry})")
    described = admin().describe_topics(TopicCollection([cfg]))[cfg].result(15)
    forms = uuid_forms(described.topic_id)
    check(entry.get("id") in forms, f"topic list: id is the broker's topic id ({entry.get('id')} in {sorted(forms)})")
    S.cfg_id = entry["id"]
    human = run_ok(["topic", "list"], "topic list (human)")
    check(cfg in human.out and text in human.out, "topic list (human) names the topics")

    d = run_json(["topic", "describe", cfg], "topic describe")
    check(isinstance(d, list) and len(d) == 1 and d[0].get("name") == cfg, "topic describe --json: one entry, the topic")
    d = d[0]
    check(d.get("id") == S.cfg_id and d.get("internal") is False, "describe: the same id as list, not internal")
    parts = sorted(d.get("partitions", []), key=lambda p: p.get("partition", -1))
    check([p.get("partition") for p in parts] == [0, 1, 2], "describe: partitions 0, 1, 2")
    for p in parts:
        check(p.get("leader") == S.broker and isinstance(p.get("leader_epoch"), int) and p["leader_epoch"] >= 0
              and p.get("replicas") == [S.broker] and p.get("isr") == [S.broker] and p.get("offline") == []
              and p.get("log_start_offset") == 0 and p.get("high_watermark") == 0,
              f"describe: partition {p.get('partition')}: leader {S.broker}, replicas and ISR [{S.broker}], "
              f"nothing offline, offsets 0/0 ({p})")
    overrides = {c["name"]: c for c in d.get("configs", []) if c.get("source") == "DYNAMIC_TOPIC_CONFIG"}
    check(set(overrides) == {"cleanup.policy", "retention.ms"}
          and overrides["cleanup.policy"]["value"] == "compact" and overrides["retention.ms"]["value"] == "3600000",
          f"describe: the overrides, DYNAMIC_TOPIC_CONFIG ({d.get('configs')})")
    check(not any(c.get("source") == "DEFAULT_CONFIG" for c in d["configs"]),
          "describe without --all-configs shows no DEFAULT_CONFIG entries")
    full = run_json(["topic", "describe", cfg, "--all-configs"], "topic describe --all-configs")[0]
    all_configs = {c["name"]: c for c in full.get("configs", [])}
    segment = all_configs.get("segment.bytes", {})
    check(len(all_configs) > 20 and segment.get("source") == "DEFAULT_CONFIG"
          and segment.get("value") == "1073741824" and all_configs.get("cleanup.policy", {}).get("value") == "compact",
          f"--all-configs: {len(all_configs)} configs, segment.bytes 1073741824 DEFAULT_CONFIG, the override kept")
    human = run_ok(["topic", "describe", cfg], "topic describe (human)")
    check(cfg in human.out and "cleanup.policy" in human.out, "topic describe (human) names the topic and its override")

    two = run_json(["topic", "describe", cfg, text], "topic describe with two names")
    check(sorted(t.get("name") for t in two) == sorted([cfg, text]), "topic describe NAME NAME describes both")
    run_err(["topic", "describe", name("nosuch")], "UNKNOWN_TOPIC_OR_PARTITION", "describe of an unknown topic fails")

    # alter-config
    run_ok(["topic", "alter-config", cfg, "--set", "retention.ms=7200000", "--set", "max.message.bytes=2000000",
            "--delete", "cleanup.policy"], "topic alter-config")
    d = run_json(["topic", "describe", cfg], "topic describe after alter-config")[0]
    overrides = {c["name"]: c.get("value") for c in d["configs"] if c.get("source") == "DYNAMIC_TOPIC_CONFIG"}
    check(overrides == {"retention.ms": "7200000", "max.message.bytes": "2000000"},
          f"alter-config --set changed/added and --delete removed overrides ({overrides})")
    configs = topic_configs_direct(cfg)
    check(configs["cleanup.policy"].value == "delete" and configs["retention.ms"].value == "7200000"
          and configs["max.message.bytes"].value == "2000000",
          "librdkafka sees the alteration (cleanup.policy back to its default, delete)")
    full = run_json(["topic", "describe", cfg, "--all-configs"], "describe --all-configs after alter-config")[0]
    policy = {c["name"]: c for c in full["configs"]}.get("cleanup.policy", {})
    check(policy.get("value") == "delete" and policy.get("source") == "DEFAULT_CONFIG",
          f"--all-configs: cleanup.policy delete, DEFAULT_CONFIG ({policy})")
    run_err(["topic", "alter-config", cfg, "--set", "retention.ms=banana"], "INVALID_CONFIG",
            "alter-config --set retention.ms=banana fails")
    check(topic_configs_direct(cfg)["retention.ms"].value == "7200000", "and changes nothing")
    run_err(["topic", "alter-config", name("nosuch"), "--set", "retention.ms=1000"], "UNKNOWN_TOPIC_OR_PARTITION",
            "alter-config of an unknown topic fails")


def check_produce_consume_text():
    text = S.text
    lines = "k1:v1\nk2:value two\nk3:\nk4:h\u00e9llo \u4e16\u754c\nk5:a:b\n"
    r = run_ok(["produce", text, "--key-separator", ":", "-H", "source=cli", "-H", "trace=42", "-H", "expr=x=1",
                "--json"], "produce text with --key-separator and headers", stdin=lines)
    acks = json_lines(r, "produce --json")
    check(acks == [{"partition": 0, "offset": i} for i in range(5)],
          f"produce --json: one line per record, partition 0, offsets 0..4 ({acks})", )
    want = [("k1", "v1"), ("k2", "value two"), ("k3", ""), ("k4", "h\u00e9llo \u4e16\u754c"), ("k5", "a:b")]
    headers = [{"key": "source", "value": "cli"}, {"key": "trace", "value": "42"}, {"key": "expr", "value": "x=1"}]

    r = run_ok(["consume", text, "--offset", "start", "-n", "5", "--format", "json"], "consume -f json")
    got = json_lines(r, "consume -f json")
    check(len(got) == 5, f"consume -n 5 -f json: 5 lines ({len(got)})")
    for i, (record, (key, value)) in enumerate(zip(got, want)):
        check(record.get("topic") == text and record.get("partition") == 0 and record.get("offset") == i
              and record.get("key") == key and record.get("value") == value and record.get("headers") == headers
              and isinstance(record.get("timestamp"), int) and abs(record["timestamp"] - time.time() * 1000) < 600_000,
              f"record {i}: key {key!r}, value {value!r} (split at the first separator), the 3 headers in order, "
              f"a current timestamp")
    direct = consume_direct(text, [0], 5)
    check([(m.key(), m.value(), m.headers()) for m in direct]
          == [(k.encode(), v.encode(), [("source", b"cli"), ("trace", b"42"), ("expr", b"x=1")]) for k, v in want],
          "librdkafka reads the CLI's records: keys, values, headers")

    r = run_ok(["consume", text, "-o", "start", "-n", "5"], "consume (text)")
    check(r.lines() == [v for _, v in want], f"consume -f text prints the values, one per line ({r.lines()})")
    r = run_ok(["consume", text, "-o", "start", "-n", "5", "--print-key"], "consume --print-key")
    check(r.lines() == [f"{k}\t{v}" for k, v in want], "consume --print-key prints KEY<TAB>VALUE")
    r = run_ok(["consume", text, "-o", "start", "-n", "2", "-f", "json"], "consume -n 2")
    check([m.get("offset") for m in json_lines(r, "consume -n 2")] == [0, 1], "consume -n 2 stops after 2 records")
    r = run_ok(["consume", text, "-o", "3", "--timeout-ms", "2000", "-f", "json"], "consume -o 3")
    check([m.get("offset") for m in json_lines(r, "consume -o 3")] == [3, 4], "consume -o 3 reads offsets 3, 4")

    d = run_json(["topic", "describe", text], "describe after produce")[0]["partitions"][0]
    check(d.get("log_start_offset") == 0 and d.get("high_watermark") == 5,
          f"describe: log_start_offset 0, high_watermark 5 after 5 records ({d})")

    # Human produce summary, --file, -p.
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("from-file-1\nfrom-file-2\nfrom-file-3\n")
        path = f.name
    try:
        r = run_ok(["produce", text, "--file", path], "produce --file")
    finally:
        os.unlink(path)
    check(f"produced 3 records to {text}" in r.err, f"produce without --json: 'produced 3 records to {text}' on stderr", )
    r = run_ok(["consume", text, "-o", "5", "-n", "3", "-f", "json"], "consume the --file records")
    got = json_lines(r, "consume")
    check([(m.get("offset"), m.get("key"), m.get("value"), m.get("headers")) for m in got]
          == [(5 + i, None, f"from-file-{i + 1}", []) for i in range(3)],
          "produce --file: the file's lines as values, null keys (no separator given), no headers")

    multi = S.multi = name("multi")
    run_ok(["topic", "create", multi, "-p", "3"], "create a 3-partition topic")
    r = run_ok(["produce", multi, "-p", "2", "--json"], "produce -p 2", stdin="p-a\np-b\np-c\n")
    check(json_lines(r, "produce -p 2") == [{"partition": 2, "offset": i} for i in range(3)],
          "produce -p 2: every record on partition 2")
    r = run_ok(["consume", multi, "-p", "2", "-o", "start", "-n", "3"], "consume -p 2")
    check(r.lines() == ["p-a", "p-b", "p-c"], "consume -p 2 reads them")
    r = run_ok(["consume", multi, "-p", "0", "-p", "1", "-o", "start", "--timeout-ms", "2000"], "consume -p 0 -p 1")
    check(r.lines() == [], "partitions 0 and 1 are empty")

    run_err(["produce", multi, "-f", "json"], "", "produce -f json with a line that is not JSON fails",
            stdin="this is not json\n")
    check(sum(high_watermarks(multi, range(3))) == 3, "and produces nothing")


def check_acks_and_compression():
    acks = name("acks")
    run_ok(["topic", "create", acks, "-p", "1"], "create the acks topic")
    for level in ("0", "1", "all"):
        run_ok(["produce", acks, "--acks", level], f"produce --acks {level}",
               stdin="".join(f"acks{level}-{i}\n" for i in range(3)))
    r = run_ok(["consume", acks, "-o", "start", "-n", "9", "--timeout-ms", "10000"], "consume the acks topic")
    check(sorted(r.lines()) == sorted(f"acks{level}-{i}" for level in ("0", "1", "all") for i in range(3)),
          "--acks 0, 1 and all all deliver")

    value = "x" * 1000
    sizes = {}
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        topic = name(f"z-{codec}")
        run_ok(["topic", "create", topic, "-p", "1"], f"create the {codec} topic")
        run_ok(["produce", topic, "-z", codec], f"produce -z {codec}", stdin="".join(f"{value}{i:03}\n" for i in range(200)))
        r = run_ok(["consume", topic, "-o", "start", "-n", "200"], f"consume the -z {codec} records")
        check(r.lines() == [f"{value}{i:03}" for i in range(200)], f"-z {codec}: 200 records read back in order")
        sizes[codec] = log_bytes(topic)
    check(sizes["none"] > 200 * 1000, f"-z none: the log holds the raw bytes ({sizes['none']} bytes)")
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        check(0 < sizes[codec] < sizes["none"] / 4,
              f"-z {codec}: the log is compressed ({sizes[codec]} bytes vs {sizes['none']} uncompressed)")


def check_partitioning():
    keys = [f"key-{i}" for i in range(60)] + ["\u00fcber", "\u4e16\u754c", "a", "ab", "abc", "abcd", "a|b"]
    strand_topic, rd_topic = name("keys"), name("keys-rd")
    for topic in (strand_topic, rd_topic):
        run_ok(["topic", "create", topic, "-p", "6"], f"create {topic}")
    # Text lines are KEY|VALUE, so "a|b" (a key holding the separator) goes through -f json below.
    text_keys = [k for k in keys if "|" not in k]
    r = run_ok(["produce", strand_topic, "--key-separator", "|", "--json"], "produce keyed records",
               stdin="".join(f"{k}|value-of-{k}\n" for k in text_keys))
    acks = json_lines(r, "produce keyed --json")
    check(len(acks) == len(text_keys), f"produce --json: one line per record ({len(acks)})")
    reported = {k: a["partition"] for k, a in zip(text_keys, acks)}
    read = {m.key().decode(): m.partition() for m in consume_direct(strand_topic, range(6), len(text_keys))}
    check(read == reported, "the partitions produce --json reports are where librdkafka finds the records")
    rd = Producer({"bootstrap.servers": BOOTSTRAP, "partitioner": "murmur2_random"})
    placed = {}
    for k in keys:
        rd.produce(rd_topic, key=k.encode(), value=b"v",
                   on_delivery=lambda e, m: placed.__setitem__(m.key().decode(), m.partition()) if e is None else None)
    check(rd.flush(30) == 0 and len(placed) == len(keys), "librdkafka (murmur2_random) produced the same keys")
    S.murmur = placed
    differ = {k: (read[k], placed[k]) for k in text_keys if read[k] != placed[k]}
    check(not differ, f"every key is on the partition librdkafka's murmur2 partitioner picks ({len(text_keys)} keys; "
                      f"differ (strand, librdkafka): {differ})")
    check(len(set(read.values())) == 6, "the keys cover all 6 partitions")

    spread = name("keyless")
    run_ok(["topic", "create", spread, "-p", "4"], "create a 4-partition topic")
    # Sticky as Kafka's producer: a partition takes keyless records until batch.size
    # (16 KiB) went there, so 200 records of 200 bytes cover at least 2 partitions.
    r = run_ok(["produce", spread, "--json"], "produce 200 keyless records",
               stdin="".join(f"n{i:03}-{'x' * 195}\n" for i in range(200)))
    used = {a["partition"] for a in json_lines(r, "produce keyless --json")}
    check(len(used) >= 2, f"keyless records spread over partitions ({sorted(used)})")

    # -f json: null key and value, explicit partition, headers (plus -H on every record).
    jt = name("json")
    run_ok(["topic", "create", jt, "-p", "6"], "create the json topic")
    records = [{"key": "a|b", "value": "1", "headers": {"h": "x"}},
               {"key": None, "value": "keyless", "partition": 4},
               {"key": "key-7", "value": None},
               {"value": "explicit", "partition": 2, "key": "key-7"}]
    r = run_ok(["produce", jt, "-f", "json", "-H", "extra=1", "--json"], "produce -f json",
               stdin="".join(json.dumps(x) + "\n" for x in records))
    acks = json_lines(r, "produce -f json --json")
    check([a.get("partition") for a in acks] == [placed["a|b"], 4, placed["key-7"], 2],
          f"-f json: keyed records on murmur2's partition, 'partition' honoured ({acks})")
    r = run_ok(["consume", jt, "-o", "start", "-n", "4", "-f", "json"], "consume the json records")
    got = {(m["partition"], m["offset"]): m for m in json_lines(r, "consume -f json")}
    for (record, a) in zip(records, acks):
        m = got.get((a["partition"], a["offset"]))
        want_headers = sorted([(k, v) for k, v in record.get("headers", {}).items()] + [("extra", "1")])
        check(m is not None and m.get("key") == record.get("key") and m.get("value") == record.get("value")
              and sorted((h["key"], h["value"]) for h in m.get("headers", [])) == want_headers,
              f"-f json record {record}: read back with key/value (null as null) and headers {want_headers} ({m})")
    direct = {(m.partition(), m.offset()): m for m in consume_direct(jt, range(6), 4)}
    tomb = direct[(acks[2]["partition"], acks[2]["offset"])]
    keyless = direct[(acks[1]["partition"], acks[1]["offset"])]
    check(tomb.value() is None and tomb.key() == b"key-7" and keyless.key() is None,
          "librdkafka sees a null value (tombstone) and a null key, not empty ones")


def check_cross_tool():
    topic = name("cross")
    run_ok(["topic", "create", topic, "-p", "2"], "create the cross-tool topic")
    binary = [b"\x00\x01\x02", b"\xff\xfe", b"plain", bytes(range(256))]
    texts = [(b"ka", b"alpha"), (b"kb", b"beta gamma"), (b"kc", "\u00e9t\u00e9".encode())]
    produce_direct(topic, [(0, None, v, None, None) for v in binary] + [(1, k, v, None, None) for k, v in texts])
    r = run_ok(["consume", topic, "-p", "0", "-o", "start", "-n", "4", "-f", "hex"], "consume -f hex")
    try:
        decoded = [bytes.fromhex(line) for line in r.lines()]
    except ValueError:
        decoded = None
    check(decoded == binary, "consume -f hex: librdkafka's binary values, hex-encoded, in order", )
    r = run_ok(["consume", topic, "-p", "1", "-o", "start", "-n", "3", "--print-key"], "consume librdkafka's text")
    check(r.lines() == [f"{k.decode()}\t{v.decode()}" for k, v in texts], "consume -f text --print-key reads librdkafka's records")
    r = run_ok(["consume", topic, "-p", "0", "-p", "1", "-o", "start", "--timeout-ms", "3000", "-f", "hex"],
               "consume two partitions")
    check(sorted(bytes.fromhex(x) for x in r.lines()) == sorted(binary + [v for _, v in texts]),
          "consume -p 0 -p 1 reads both partitions, then --timeout-ms ends it")

    ts = S.ts = name("ts")
    run_ok(["topic", "create", ts, "-p", "1"], "create the timestamp topic")
    produce_direct(ts, [(0, None, f"t{i}".encode(), None, BASE_TS + i * 1000) for i in range(10)])
    r = run_ok(["consume", ts, "--timestamp", str(BASE_TS + 4500), "--timeout-ms", "3000", "-f", "json"],
               "consume --timestamp")
    got = json_lines(r, "consume --timestamp")
    check([(m.get("offset"), m.get("value"), m.get("timestamp")) for m in got]
          == [(i, f"t{i}", BASE_TS + i * 1000) for i in range(5, 10)],
          "consume --timestamp starts at the first record at or after it (offsets 5..9, timestamps exact)")

    r = run_ok(["consume", ts, "-o", "end", "--timeout-ms", "2000"], "consume -o end")
    check(r.out == "" and 1.5 < r.elapsed < 30, f"consume -o end --timeout-ms 2000: nothing, exits ({r.elapsed:.1f}s)")
    r = run_ok(["consume", ts, "--timeout-ms", "2000"], "consume (default offset)")
    check(r.out == "", "consume without -o or -g starts at the end")
    proc = spawn(["consume", ts, "-o", "end", "-n", "1", "-f", "json", "--timeout-ms", "20000"])
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    deadline = time.time() + 25
    i = 0
    while proc.poll() is None and time.time() < deadline:
        producer.produce(ts, value=f"live-{i}".encode(), partition=0)
        producer.flush(10)
        i += 1
        time.sleep(0.5)
    r = finish(proc, 30, "consume -o end while records arrive")
    got = json_lines(r, "consume -o end")
    check(r.code == 0 and len(got) == 1 and got[0].get("offset", 0) >= 10 and str(got[0].get("value")).startswith("live-"),
          f"consume -o end -n 1 reads a record produced after it started ({got})")

    txn = name("txn")
    run_ok(["topic", "create", txn, "-p", "1"], "create the transactions topic")
    p = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": f"cli-test-{RUN}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(txn, value=f"committed-{i}".encode(), partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(txn, value=f"aborted-{i}".encode(), partition=0)
    p.flush(30)
    p.abort_transaction(30)
    ok("librdkafka committed one transaction and aborted one")
    r = run_ok(["consume", txn, "-o", "start", "--timeout-ms", "3000", "--read-committed"], "consume --read-committed")
    check(r.lines() == [f"committed-{i}" for i in range(3)], f"--read-committed: only the committed records ({r.lines()})")
    r = run_ok(["consume", txn, "-o", "start", "--timeout-ms", "3000"], "consume read_uncommitted")
    check(r.lines() == [f"committed-{i}" for i in range(3)] + [f"aborted-{i}" for i in range(3)],
          f"without it: the aborted records too, no control records ({r.lines()})")


def _members(desc):
    return {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in desc.members}


def cli_group(group):
    d = run_json(["group", "describe", group], f"group describe {group}")
    if not (isinstance(d, list) and len(d) == 1 and d[0].get("group") == group):
        fail(f"group describe --json: one entry for {group} ({d})")
    return d[0]


def offsets_of(described, topic):
    return {o["partition"]: o for o in described.get("offsets", []) if o.get("topic") == topic}


def check_groups():
    topic = S.grp_topic = name("grp")
    group = S.group = name("group")
    run_ok(["topic", "create", topic, "-p", "4"], "create the 4-partition group topic")
    consume = ["consume", topic, "-g", group, "-o", "start", "-n", "20", "--timeout-ms", "60000", "-f", "json"]
    a, b = spawn(consume), spawn(consume)
    deadline = time.time() + 60
    while True:
        for proc in (a, b):
            if proc.poll() is not None:
                r = finish(proc, 5, "group member")
                fail(f"a `strand consume -g` exited before any record was produced{r.show()}")
        try:
            desc = group_direct(group)
            members = _members(desc)
            if desc.state == ConsumerGroupState.STABLE and len(members) == 2 and \
                    sorted(p for ps in members.values() for p in ps) == [0, 1, 2, 3]:
                break
        except Exception as e:  # not there yet
            desc = e
        if time.time() > deadline:
            fail(f"the two `strand consume -g {group}` did not form a stable group of 2 within 60s ({desc})")
        time.sleep(0.3)
    check(sorted(members.values()) == [[0, 1], [2, 3]],
          f"two `strand consume -g` joined one group, range assignment: partitions 0,1 and 2,3 ({members})")
    d = cli_group(group)
    cli_members = {m.get("member_id"): sorted(p for asg in m.get("assignment", []) if asg.get("topic") == topic
                                              for p in asg.get("partitions", []))
                   for m in d.get("members", [])}
    check(str(d.get("state")).lower() == "stable" and cli_members == members and d.get("coordinator") is not None,
          f"group describe while active: Stable, both members with their assignments ({d})")
    check(all(isinstance(m.get("client_id"), str) and isinstance(m.get("host"), str) and m["host"]
              for m in d["members"]), "group describe: members have client_id and host")

    produced = produce_direct(topic, [(p, f"g{p}-{i}".encode(), f"v{p}-{i}".encode(), None, BASE_TS + i * 1000)
                                      for p in range(4) for i in range(10)])
    check(sorted(produced) == [(p, i) for p in range(4) for i in range(10)], "librdkafka produced 10 records per partition")
    results = [finish(proc, 90, "group member") for proc in (a, b)]
    seen = []
    for r in results:
        records = json_lines(r, "group member")
        expect(r.code == 0 and len(records) == 20, f"a member read 20 records and exited ({len(records)})", r)
        parts = sorted({m["partition"] for m in records})
        check(parts in ([0, 1], [2, 3]), f"its records come from its own partitions ({parts})")
        for m in records:
            check_value = m.get("value") == f"v{m['partition']}-{m['offset']}" and m.get("key") == f"g{m['partition']}-{m['offset']}"
            if not check_value:
                fail(f"record {m} is not the one produced at {m['partition']}/{m['offset']}")
        seen += [(m["partition"], m["offset"]) for m in records]
    check(sorted(seen) == sorted(produced), "together the two members read every record exactly once")

    d = cli_group(group)
    offsets = offsets_of(d, topic)
    check(str(d.get("state")).lower() == "empty" and d.get("members") == [],
          f"after they exit the group is Empty with no members (they left) ({d.get('state')}, {d.get('members')})")
    check(sorted(offsets) == [0, 1, 2, 3] and all(o.get("committed_offset") == 10 and o.get("log_end_offset") == 10
                                                and o.get("lag") == 0 for o in offsets.values()),
          f"group describe: committed 10, log end 10, lag 0 on every partition ({d.get('offsets')})")
    check(committed_direct(group, topic, range(4)) == {p: 10 for p in range(4)},
          "librdkafka sees the commits (10 per partition)")
    listed = run_json(["group", "list"], "group list")
    entry = next((g for g in listed if g.get("group") == group), None) if isinstance(listed, list) else None
    check(entry is not None and str(entry.get("state")).lower() == "empty" and str(entry.get("type")).lower() == "classic"
          and entry.get("protocol_type") == "consumer",
          f"group list --json lists the group: Empty, classic, protocol type consumer ({entry})")
    human = run_ok(["group", "list"], "group list (human)")
    check(group in human.out, "group list (human) names the group")
    human = run_ok(["group", "describe", group], "group describe (human)")
    check(group in human.out and topic in human.out, "group describe (human) names the group and the topic")

    # A member started again resumes from the commits.
    produce_direct(topic, [(p, f"g{p}-10".encode(), f"v{p}-10".encode(), None, BASE_TS + 10_000) for p in range(4)])
    r = run_ok(["consume", topic, "-g", group, "-n", "4", "--timeout-ms", "30000", "-f", "json"], "consume -g again")
    got = sorted((m["partition"], m["offset"]) for m in json_lines(r, "consume -g again"))
    check(got == [(p, 10) for p in range(4)], f"a restarted member starts at the committed offsets ({got})")
    d = cli_group(group)
    check(all(o.get("committed_offset") == 11 and o.get("lag") == 0 for o in offsets_of(d, topic).values())
          and len(offsets_of(d, topic)) == 4, "and commits on exit (11 per partition, lag 0)")
    other = S.other_group = name("group-new")
    r = run_ok(["consume", topic, "-g", other, "--timeout-ms", "3000"], "consume -g with a new group")
    check(r.out == "", "a new group without -o starts at the end")

    two = run_json(["group", "describe", group, other], "group describe with two groups")
    check(sorted(g.get("group") for g in two) == sorted([group, other]), "group describe G G describes both")


def check_reset_offsets():
    topic, group = S.grp_topic, S.group
    all4 = {p: 11 for p in range(4)}

    def committed():
        return committed_direct(group, topic, range(4))

    def reset(args, what):
        plan = run_json(["group", "reset-offsets", group] + args, what)
        return {(e.get("topic"), e.get("partition")): e.get("offset") for e in plan} if isinstance(plan, list) else plan

    plan = reset(["--topic", topic, "--to-earliest"], "reset-offsets dry run")
    check(plan == {(topic, p): 0 for p in range(4)}, f"dry run --to-earliest: the plan is offset 0 everywhere ({plan})")
    check(committed() == all4, "the dry run commits nothing")
    human = run_ok(["group", "reset-offsets", group, "--topic", topic, "--to-earliest"], "reset-offsets dry run (human)")
    check(topic in human.out and committed() == all4, "the human dry run prints the plan and commits nothing")

    plan = reset(["--topic", topic, "--to-earliest", "--execute"], "reset-offsets --to-earliest --execute")
    check(plan == {(topic, p): 0 for p in range(4)} and committed() == {p: 0 for p in range(4)},
          "--to-earliest --execute commits 0 everywhere")
    d = offsets_of(cli_group(group), topic)
    check(len(d) == 4 and all(o.get("committed_offset") == 0 and o.get("log_end_offset") == 11 and o.get("lag") == 11
                              for o in d.values()),
          f"group describe: lag 11 (the record count) on every partition ({list(d.values())})")

    reset(["--topic", topic, "--shift-by", "3", "--execute"], "--shift-by 3")
    check(committed() == {p: 3 for p in range(4)}, "--shift-by 3 moves 0 to 3")
    reset(["--topic", topic, "--shift-by", "-5", "--execute"], "--shift-by -5")
    check(committed() == {p: 0 for p in range(4)}, f"--shift-by -5 from 3 is clamped to the log start, 0 ({committed()})")
    plan = reset(["--topic", f"{topic}:1,2", "--to-offset", "7", "--execute"], "--topic T:1,2 --to-offset 7")
    check(plan == {(topic, 1): 7, (topic, 2): 7} and committed() == {0: 0, 1: 7, 2: 7, 3: 0},
          f"--topic T:1,2 --to-offset 7 moves only partitions 1 and 2 ({plan}, {committed()})")
    reset(["--topic", topic, "--to-offset", "1000", "--execute"], "--to-offset 1000")
    check(committed() == all4, f"--to-offset past the end is clamped to the log end, 11 ({committed()})")
    reset(["--all-topics", "--to-timestamp", str(BASE_TS + 4500), "--execute"], "--all-topics --to-timestamp")
    check(committed() == {p: 5 for p in range(4)}, f"--all-topics --to-timestamp: the first offset at or after it, 5 ({committed()})")
    reset(["--topic", topic, "--to-timestamp", str(NOW_MS + 86_400_000), "--execute"], "--to-timestamp in the future")
    check(committed() == all4, f"--to-timestamp after every record: the log end, 11 ({committed()})")
    reset(["--topic", topic, "--to-earliest", "--execute"], "--to-earliest")
    reset(["--topic", topic, "--to-latest", "--execute"], "--to-latest")
    check(committed() == all4, "--to-latest commits the log end, 11")

    # An active member (librdkafka, classic protocol): reset and delete are refused.
    member = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "client.id": "cli-test-member",
                       "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    member.subscribe([topic])
    deadline = time.time() + 60
    while not member.assignment() and time.time() < deadline:
        member.poll(0.2)
    check(sorted(tp.partition for tp in member.assignment()) == [0, 1, 2, 3], "a librdkafka member joined and got all 4 partitions")
    try:
        for _ in range(5):
            member.poll(0.1)
        d = cli_group(group)
        members = d.get("members", [])
        check(str(d.get("state")).lower() == "stable" and len(members) == 1
              and members[0].get("member_id") == member.memberid() and members[0].get("client_id") == "cli-test-member"
              and sorted(p for a in members[0].get("assignment", []) if a.get("topic") == topic for p in a["partitions"])
              == [0, 1, 2, 3],
              f"group describe shows the librdkafka member, its client id and its assignment ({members})")
        rows = offsets_of(d, topic)
        check(len(rows) == 4 and all(o.get("member_id") == member.memberid() for o in rows.values()),
              "group describe: each partition's row names the member that owns it")
        r = run(["group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute"])
        expect(r.code != 0 and r.err.startswith("strand: "),
               f"reset-offsets --execute on a group with an active member fails ({r.err.strip()[:160]})", r)
        member.poll(0.1)
        check(committed() == all4, "and commits nothing")
        run_err(["group", "delete", group], "NON_EMPTY_GROUP", "group delete with an active member fails")
    finally:
        member.close()
    deadline = time.time() + 20
    while group_direct(group).state != ConsumerGroupState.EMPTY:
        if time.time() > deadline:
            fail("the group did not become Empty after the librdkafka member closed")
        time.sleep(0.2)

    run_ok(["group", "delete", group], "group delete")
    listed = run_json(["group", "list"], "group list after delete")
    check(all(g.get("group") != group for g in listed), "group delete: the group is gone from group list")
    r = run(["group", "describe", group, "--json"])
    if r.code != 0:
        check(r.err.startswith("strand: ") and "GROUP_ID_NOT_FOUND" in r.err,
              f"group describe of the deleted group: GROUP_ID_NOT_FOUND ({r.err.strip()[:160]})")
    else:
        d = json.loads(r.out)[0]
        check(str(d.get("state")).lower() == "dead" and not d.get("members") and not d.get("offsets"),
              f"group describe of the deleted group: Dead, no members, no offsets ({d})")
    run_err(["group", "delete", group], "GROUP_ID_NOT_FOUND", "deleting it again fails")
    run_ok(["group", "delete", S.other_group], "delete the other group")


def check_internal_and_cluster():
    listed = run_json(["topic", "list"], "topic list")
    check(not any(t.get("internal") or str(t.get("name", "")).startswith("__") for t in listed),
          "topic list hides internal topics (__consumer_offsets)")
    listed = {t["name"]: t for t in run_json(["topic", "list", "--internal"], "topic list --internal")}
    offsets = listed.get("__consumer_offsets")
    meta = admin().list_topics(timeout=10)
    check(offsets is not None and offsets.get("internal") is True
          and offsets.get("partitions") == len(meta.topics["__consumer_offsets"].partitions),
          f"topic list --internal: __consumer_offsets, internal, with its partition count ({offsets})")
    check(S.cfg in listed, "--internal lists the other topics too")

    info = run_json(["cluster", "info"], "cluster info")
    cluster = admin().describe_cluster().result(15)
    topics = meta.topics
    user = {n: t for n, t in topics.items() if not n.startswith("__")}
    check(info.get("cluster_id") == cluster.cluster_id, f"cluster info: the cluster id ({info.get('cluster_id')})")
    controller = info.get("controller")
    controller_id = controller.get("id") if isinstance(controller, dict) else controller
    check(controller_id == cluster.controller.id, f"cluster info: the controller, {cluster.controller.id} ({controller})")
    host, port = S.brokers[S.broker]
    brokers = info.get("brokers")
    check(isinstance(brokers, list) and len(brokers) == 1 and brokers[0].get("id") == S.broker
          and brokers[0].get("host") == host and brokers[0].get("port") == port and "rack" in brokers[0],
          f"cluster info: one broker, {S.broker} at {host}:{port} ({brokers})")
    counts = {(len(topics), sum(len(t.partitions) for t in topics.values())),
              (len(user), sum(len(t.partitions) for t in user.values()))}
    check((info.get("topics"), info.get("partitions")) in counts,
          f"cluster info: topic and partition counts as Metadata has them ({info.get('topics')}, "
          f"{info.get('partitions')}; Metadata {sorted(counts)})")
    check(info.get("under_replicated") == [] and info.get("offline") == [], "cluster info: nothing under-replicated or offline")
    human = run_ok(["cluster", "info"], "cluster info (human)")
    check(cluster.cluster_id in human.out, "cluster info (human) shows the cluster id")


def check_delete():
    victims = [S.cfg, S.multi]
    run_ok(["topic", "delete"] + victims, "topic delete with two names")
    for topic in victims:
        deadline = time.time() + 15
        while True:
            r = run(["topic", "describe", topic, "--json"])
            if r.code != 0:
                break
            if time.time() > deadline:
                fail(f"{topic} is still described 15s after topic delete{r.show()}")
            time.sleep(0.3)
        check(r.err.startswith("strand: ") and "UNKNOWN_TOPIC_OR_PARTITION" in r.err,
              f"describe of deleted {topic}: UNKNOWN_TOPIC_OR_PARTITION ({r.err.strip()[:160]})")
    remaining = admin().list_topics(timeout=10).topics
    check(not any(t in remaining for t in victims), "librdkafka no longer sees them")
    run_err(["topic", "delete", name("nosuch")], "UNKNOWN_TOPIC_OR_PARTITION", "deleting an unknown topic fails")


# ---------------------------------------------------------------------------------------
# The Kafka reference broker (--against-kafka)


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def start_kafka(workdir):
    port = next((p for p in KAFKA_PORTS if port_free(p) and port_free(p + 1000)), None)
    if port is None:
        fail("no free port for Kafka in 29500-29999")
    log_path = os.path.join(workdir, "kafka.out")
    log = open(log_path, "w")
    proc = subprocess.Popen([os.path.join(REPO, "interop", "kafka", "run-kafka.sh"), os.path.join(workdir, "kafka"),
                             str(port)], cwd=REPO, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    _children.append((proc, True))
    bootstrap = f"127.0.0.1:{port}"
    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})  # quiet while it starts
    deadline = time.time() + 180
    while True:
        if proc.poll() is not None:
            fail(f"Kafka exited with {proc.returncode}:\n{open(log_path).read()[-3000:]}")
        try:
            if client.list_topics(timeout=2).brokers:
                break
        except Exception:
            pass
        if time.time() > deadline:
            fail(f"Kafka did not answer on {bootstrap} within 180s:\n{open(log_path).read()[-3000:]}")
        time.sleep(0.5)
    ok(f"Apache Kafka started on {bootstrap}")
    return proc, bootstrap


def stop_kafka(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def main():
    global BOOTSTRAP
    against_kafka = "--against-kafka" in sys.argv[1:]
    watchdog = threading.Timer(OVERALL_TIMEOUT, _watchdog)
    watchdog.daemon = True
    watchdog.start()
    if not os.access(BIN, os.X_OK):
        fail(f"no strand binary at {BIN} (set STRAND_BIN)")
    started = time.time()
    kafka = None
    workdir = tempfile.mkdtemp(prefix="native-cli-")
    try:
        if against_kafka:
            kafka, BOOTSTRAP = start_kafka(workdir)
        print(f"strand CLI {BIN} against {'Apache Kafka' if against_kafka else 'the broker'} at {BOOTSTRAP}", flush=True)
        check_connection_errors()
        check_topics()
        check_produce_consume_text()
        check_acks_and_compression()
        check_partitioning()
        check_cross_tool()
        check_groups()
        check_reset_offsets()
        check_internal_and_cluster()
        check_delete()
    finally:
        _kill_children_but(kafka)
        if kafka is not None:
            del _admin[:]  # before Kafka stops, so its client does not log the disconnect
            stop_kafka(kafka)
        subprocess.run(["rm", "-rf", workdir])
    print(f"PASS native CLI against {'Apache Kafka' if against_kafka else 'the broker'} at {BOOTSTRAP} ({time.time() - started:.0f}s)")
    return 0


def _kill_children_but(keep):
    for proc, group in list(_children):
        if proc is not keep and proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    sys.exit(main())

#!/usr/bin/env python3
"""Protocol comparison: the same raw Kafka requests go to Apache Kafka (4.4.0, or the release
STRAND_KAFKA_VERSION names: interop/kafka/fetch.sh) and to Strand, and Strand's answers
(error codes, and base offsets where they are deterministic) must match Kafka's.

Everything on the wire is encoded here with struct, no client library: request header v1,
non-flexible versions only (CreateTopics v4, Metadata v8, InitProducerId v1, Produce v8),
and RecordBatch v2 bytes built by hand (CRC32C included). Each case writes to its own
fresh single-partition topic, so offsets are comparable. The only bytes that may differ
between the two brokers are the producer ids that each one's InitProducerId hands out.

Both brokers are started here, on free loopback ports, in a temp dir, and stopped at the
end: Strand from STRAND_BIN (default target/release/strand, relative to the repo root),
Kafka through interop/kafka/run-kafka.sh (jars from interop/kafka/fetch.sh).

    python3 interop/python/protocol_compare.py [-v]

Prints `case N: kafka=<code/offset> strand=<code/offset> MATCH|DIFF` per step (offsets are
shown everywhere but compared only on the steps marked "offset compared"), details (request
bytes, error messages) for every DIFF, and exits 1 if any step differs.
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
VERBOSE = "-v" in sys.argv[1:]

ERRORS = {
    -1: "UNKNOWN_SERVER_ERROR", 0: "NONE", 2: "CORRUPT_MESSAGE", 3: "UNKNOWN_TOPIC_OR_PARTITION",
    4: "INVALID_FETCH_SIZE", 5: "LEADER_NOT_AVAILABLE", 6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT", 10: "MESSAGE_TOO_LARGE", 14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE", 17: "INVALID_TOPIC_EXCEPTION", 21: "INVALID_REQUIRED_ACKS",
    35: "UNSUPPORTED_VERSION", 36: "TOPIC_ALREADY_EXISTS", 42: "INVALID_REQUEST",
    43: "UNSUPPORTED_FOR_MESSAGE_FORMAT", 45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    46: "DUPLICATE_SEQUENCE_NUMBER", 47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE",
    53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 59: "UNKNOWN_PRODUCER_ID", 87: "INVALID_RECORD",
    90: "PRODUCER_FENCED",
}

# One timestamp for every batch of the run, so both brokers get byte-identical batches
# (and recent enough for the default timestamp and retention checks).
TIMESTAMP = int(time.time() * 1000)
UNALLOCATED_PID = 987654321


class SetupError(Exception):
    pass


# ---------------------------------------------------------------------------------------
# Encoding


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def nbytes(b):
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def array(items):
    return i32(len(items)) + b"".join(items)


def uvarint(u):
    out = bytearray()
    while True:
        if u < 0x80:
            out.append(u)
            return bytes(out)
        out.append((u & 0x7F) | 0x80)
        u >>= 7


def varint(n):
    """Zigzag varint/varlong (Kafka's record fields)."""
    return uvarint((n << 1) ^ (n >> 63))


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


def encode_record(offset_delta, key, value, timestamp_delta=0):
    body = (i8(0) + varint(timestamp_delta) + varint(offset_delta)
            + (varint(-1) if key is None else varint(len(key)) + key)
            + (varint(-1) if value is None else varint(len(value)) + value)
            + varint(0))  # headers
    return varint(len(body)) + body


def record_batch(records, producer_id=-1, epoch=-1, sequence=-1, attributes=0, count=None,
                 last_offset_delta=None):
    """RecordBatch v2: the 61-byte header, then the records. `records` is a list of
    (key, value); `count` and `last_offset_delta` override those header fields (the CRC
    still covers them)."""
    body = b"".join(encode_record(i, k, v) for i, (k, v) in enumerate(records))
    if last_offset_delta is None:
        last_offset_delta = len(records) - 1
    after_crc = (i16(attributes) + i32(last_offset_delta) + i64(TIMESTAMP) + i64(TIMESTAMP)
                 + i64(producer_id) + i16(epoch) + i32(sequence)
                 + i32(len(records) if count is None else count) + body)
    batch_length = 4 + 1 + 4 + len(after_crc)  # partitionLeaderEpoch, magic, crc, rest
    return (i64(0) + i32(batch_length) + i32(-1) + i8(2)
            + struct.pack(">I", crc32c(after_crc)) + after_crc)


def values(n, tag):
    return [(f"k{i}".encode(), f"{tag}-{i}".encode()) for i in range(n)]


# ---------------------------------------------------------------------------------------
# Decoding


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def i8(self):
        return self.take(">b")

    def i16(self):
        return self.take(">h")

    def i32(self):
        return self.take(">i")

    def i64(self):
        return self.take(">q")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode(errors="replace")
        self.pos += n
        return s

    def array(self, item):
        n = self.i32()
        return [] if n < 0 else [item() for _ in range(n)]


# ---------------------------------------------------------------------------------------
# Connection


class ConnectionClosed(Exception):
    pass


class Conn:
    """One connection to a broker, re-opened after the broker closes it."""

    def __init__(self, port):
        self.port, self.sock, self.correlation = port, None, 0

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionClosed()
            buf += chunk
        return bytes(buf)

    def request(self, api_key, version, body, timeout=30.0):
        """Sends header v1 + body; returns the response body after the v0 response header."""
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.correlation += 1
        header = i16(api_key) + i16(version) + i32(self.correlation) + string("protocol-compare")
        frame = header + body
        try:
            self.sock.sendall(i32(len(frame)) + frame)
            size = struct.unpack(">i", self._recv(4))[0]
            data = self._recv(size)
        except (ConnectionClosed, ConnectionResetError, BrokenPipeError):
            self.close()
            raise ConnectionClosed()
        except socket.timeout:
            self.close()
            raise
        correlation = struct.unpack_from(">i", data)[0]
        if correlation != self.correlation:
            raise SetupError(f"correlation id {correlation}, expected {self.correlation}")
        return data[4:]


# ---------------------------------------------------------------------------------------
# Requests


def metadata(conn, topics):
    """Metadata v8; topics None = all. Returns (brokers, {topic: (error, [(partition, error, leader)])})."""
    body = (i32(-1) if topics is None else array([string(t) for t in topics])) + i8(0) + i8(0) + i8(0)
    r = Reader(conn.request(3, 8, body))
    r.i32()  # throttle
    brokers = r.array(lambda: (r.i32(), r.string(), r.i32(), r.string()))
    r.string()  # cluster id
    r.i32()  # controller id

    def partition():
        error, index, leader = r.i16(), r.i32(), r.i32()
        r.i32()  # leader epoch
        r.array(r.i32), r.array(r.i32), r.array(r.i32)
        return index, error, leader

    def topic():
        error, name = r.i16(), r.string()
        r.i8()  # is_internal
        parts = r.array(partition)
        r.i32()  # authorized operations
        return name, (error, parts)

    return brokers, dict(r.array(topic))


def create_topics(conn, names, partitions=1):
    """CreateTopics v4; returns {name: (error, message)}."""
    topics = [string(n) + i32(partitions) + i16(1) + array([]) + array([]) for n in names]
    r = Reader(conn.request(19, 4, array(topics) + i32(30000) + i8(0)))
    r.i32()  # throttle
    return dict(r.array(lambda: (r.string(), (r.i16(), r.string()))))


def init_producer_id(conn):
    """InitProducerId v1 with a null transactional id; returns (error, pid, epoch)."""
    r = Reader(conn.request(22, 1, string(None) + i32(60000)))
    r.i32()  # throttle
    return r.i16(), r.i64(), r.i16()


def produce_body(topic, partition, records, acks=-1):
    return (string(None) + i16(acks) + i32(30000)
            + array([string(topic) + array([i32(partition) + nbytes(records)])]))


def parse_produce(data):
    r = Reader(data)

    def partition():
        index, error, base_offset = r.i32(), r.i16(), r.i64()
        r.i64(), r.i64()  # log_append_time, log_start_offset
        record_errors = r.array(lambda: (r.i32(), r.string()))
        return {"partition": index, "code": error, "offset": base_offset,
                "record_errors": record_errors, "message": r.string()}

    topics = r.array(lambda: (r.string(), r.array(partition)))
    r.i32()  # throttle
    return topics


class Result:
    def __init__(self, code, offset=None, message=None, record_errors=None, request=b"", note=""):
        self.code, self.offset, self.message = code, offset, message
        self.record_errors, self.request, self.note = record_errors or [], request, note

    def show(self, with_offset=True):
        if not isinstance(self.code, int) or not with_offset:
            return str(self.code)
        return f"{self.code}/{self.offset}"


def produce(conn, topic, partition, records, acks=-1):
    """One Produce v8 request with one partition; retried only on LEADER_NOT_AVAILABLE /
    NOT_LEADER_OR_FOLLOWER (a just-created partition), which no case expects."""
    body = produce_body(topic, partition, records, acks)
    retries = 0
    while True:
        try:
            topics = parse_produce(conn.request(0, 8, body))
        except ConnectionClosed:
            return Result("closed", request=body)
        except socket.timeout:
            return Result("timeout", request=body)
        if len(topics) != 1 or len(topics[0][1]) != 1:
            return Result(f"malformed-response({topics!r})", request=body)
        p = topics[0][1][0]
        if p["code"] in (5, 6) and retries < 50:
            retries += 1
            time.sleep(0.1)
            continue
        note = f"retried {retries}x on leader errors" if retries else ""
        return Result(p["code"], p["offset"], p["message"], p["record_errors"], body, note)


# ---------------------------------------------------------------------------------------
# Brokers


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


class Broker:
    def __init__(self, name, argv, port, workdir):
        self.name, self.argv, self.port, self.workdir = name, argv, port, workdir
        self.process, self.conn = None, Conn(port)
        self.log_path = os.path.join(workdir, f"{name}.out")

    def start(self, timeout):
        self.log = open(self.log_path, "w")
        # Own session/process group: stop() signals the group, so nothing it forks survives.
        self.process = subprocess.Popen(self.argv, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise SetupError(f"{self.name} exited with {self.process.returncode}\n{self.tail()}")
            try:
                brokers, _ = metadata(self.conn, None)
                if brokers:
                    return
                last = "no brokers in Metadata"
            except (OSError, ConnectionClosed, struct.error) as e:
                last = repr(e)
                self.conn.close()
            time.sleep(0.1)
        raise SetupError(f"{self.name} did not answer Metadata within {timeout}s ({last})\n{self.tail()}")

    def tail(self, n=30):
        try:
            with open(self.log_path) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def stop(self):
        self.conn.close()
        if self.process is None:
            return None
        if self.process.poll() is not None:
            return self.process.returncode
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            print(f"{self.name} did not stop within 60s of SIGTERM; killing it", file=sys.stderr)
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(10)
        self.log.close()
        return self.process.returncode

    def create_topics(self, names, timeout=60):
        deadline = time.time() + timeout
        pending = list(names)
        while pending:
            answers = create_topics(self.conn, pending)
            failed = {n: a for n, a in answers.items() if a[0] not in (0, 36)}
            pending = list(failed)
            if pending:
                if time.time() > deadline:
                    raise SetupError(f"{self.name}: CreateTopics failed: {failed}")
                time.sleep(0.2)
        while True:
            _, topics = metadata(self.conn, names)
            ready = all(topics.get(n, (1, []))[0] == 0 and topics[n][1]
                        and all(err == 0 and leader >= 0 for _, err, leader in topics[n][1]) for n in names)
            if ready:
                return
            if time.time() > deadline:
                raise SetupError(f"{self.name}: topics have no leader after {timeout}s: {topics}")
            time.sleep(0.1)

    def init_producer_id(self, timeout=30):
        """InitProducerId v1, retried while Kafka's producer-id manager fetches its first
        block (COORDINATOR_LOAD_IN_PROGRESS). Returns (error, pid, epoch, earlier errors)."""
        deadline = time.time() + timeout
        earlier = []
        while True:
            error, pid, epoch = init_producer_id(self.conn)
            if error not in (14, 15) or time.time() > deadline:
                return error, pid, epoch, earlier
            earlier.append(error)
            time.sleep(0.1)


# ---------------------------------------------------------------------------------------
# Cases. Each returns [(label, description, Result, compare_offset)] for one broker; the
# two brokers' lists are compared step by step.


def idem(pid, epoch, seq, n, tag, **kw):
    return record_batch(values(n, tag), producer_id=pid, epoch=epoch, sequence=seq, **kw)


def case1(b, pid):
    t = "pc-1"
    first = idem(pid, 0, 0, 3, "c1")
    return [
        ("1a", "pid/epoch 0/seq 0, 3 records", produce(b.conn, t, 0, first), True),
        ("1b", "the same bytes again (duplicate)", produce(b.conn, t, 0, first), True),
        ("1c", "seq 3, 3 records", produce(b.conn, t, 0, idem(pid, 0, 3, 3, "c1b")), True),
    ]


def case2(b, pid):
    t = "pc-2"
    return [
        ("2a", "seq 0, 3 records", produce(b.conn, t, 0, idem(pid, 0, 0, 3, "c2")), True),
        ("2b", "seq 5 (3, 4 skipped)", produce(b.conn, t, 0, idem(pid, 0, 5, 3, "c2b")), False),
    ]


def case3(b, pid):
    return [
        ("3a", "fresh partition: first batch at epoch 1, seq 0",
         produce(b.conn, "pc-3a", 0, idem(pid, 1, 0, 3, "c3a")), True),
        ("3b", "epoch 0 seq 0", produce(b.conn, "pc-3", 0, idem(pid, 0, 0, 3, "c3")), True),
        ("3c", "epoch 1 seq 0 (bump)", produce(b.conn, "pc-3", 0, idem(pid, 1, 0, 3, "c3b")), True),
        ("3d", "epoch 0 seq 3 (stale epoch)", produce(b.conn, "pc-3", 0, idem(pid, 0, 3, 3, "c3c")), False),
        ("3e", "epoch 2 seq 3 (bump with a nonzero sequence)",
         produce(b.conn, "pc-3", 0, idem(pid, 2, 3, 3, "c3d")), False),
    ]


def case4(b, pid):
    return [
        ("4a", f"unallocated pid {UNALLOCATED_PID}, seq 5, fresh partition",
         produce(b.conn, "pc-4", 0, idem(UNALLOCATED_PID, 0, 5, 3, "c4")), False),
        ("4b", f"unallocated pid {UNALLOCATED_PID}, seq 0, fresh partition",
         produce(b.conn, "pc-4b", 0, idem(UNALLOCATED_PID, 0, 0, 3, "c4b")), True),
        ("4c", "then seq 0 on 4a's partition (depends on 4a's outcome)",
         produce(b.conn, "pc-4", 0, idem(UNALLOCATED_PID, 0, 0, 3, "c4c")), True),
    ]


def setup_batches(b, topic, pid, count, tag):
    """`count` batches of 3 records, seq 0, 3, 6, ...; returns (bytes, one summary Result)."""
    batches = [idem(pid, 0, 3 * i, 3, f"{tag}-{i}") for i in range(count)]
    results = [produce(b.conn, topic, 0, batch) for batch in batches]
    codes = ",".join(r.show() for r in results)
    ok = all(r.code == 0 for r in results)
    summary = Result(0 if ok else "setup-failed", f"[{codes}]", request=b"".join(r.request for r in results))
    return batches, summary


def case5(b, pid):
    batches, summary = setup_batches(b, "pc-5", pid, 5, "c5")
    return [
        ("5-setup", "5 batches, seq 0,3,6,9,12", summary, True),
        ("5a", "duplicate of batch 2 of 5 (seq 3)", produce(b.conn, "pc-5", 0, batches[1]), True),
        ("5b", "duplicate of batch 1 of 5 (seq 0, oldest kept)", produce(b.conn, "pc-5", 0, batches[0]), True),
    ]


def case6(b, pid):
    batches, summary = setup_batches(b, "pc-6", pid, 6, "c6")
    return [
        ("6-setup", "6 batches, seq 0..15", summary, True),
        ("6a", "duplicate of batch 1 of 6 (seq 0, beyond the last 5)",
         produce(b.conn, "pc-6", 0, batches[0]), False),
    ]


def plain(n, tag, **kw):
    return record_batch(values(n, tag), **kw)


def case7(b, pid):
    return [("7", "acks=2", produce(b.conn, "pc-7", 0, plain(3, "c7"), acks=2), False)]


def case8(b, pid):
    batch = bytearray(plain(3, "c8"))
    batch[17] ^= 0xFF  # first byte of the crc
    return [("8", "crc corrupted", produce(b.conn, "pc-8", 0, bytes(batch)), False)]


def case9(b, pid):
    batch = bytearray(plain(3, "c9"))
    batch[16] = 1  # magic
    return [("9", "v2 batch with the magic byte set to 1", produce(b.conn, "pc-9", 0, bytes(batch)), False)]


def case10(b, pid):
    batch = record_batch([(b"big", b"x" * (3 * 1024 * 1024 // 2))])
    return [("10", f"one 1.5 MiB record ({len(batch)}-byte batch)", produce(b.conn, "pc-10", 0, batch), False)]


def case11(b, pid):
    batch = record_batch(values(3, "c11"), count=5)
    consistent = record_batch(values(3, "c11b"), count=5, last_offset_delta=4)
    return [("11", "recordsCount 5 with 3 records (crc valid)", produce(b.conn, "pc-11", 0, batch), False),
            ("11b", "recordsCount 5 and lastOffsetDelta 4 with 3 records (crc valid)",
             produce(b.conn, "pc-11", 0, consistent), False)]


def case12(b, pid):
    two = plain(3, "c12a") + plain(2, "c12b")
    return [("12", "two batches in one partition's records", produce(b.conn, "pc-12", 0, two), False)]


def case13(b, pid):
    return [("13", "partition 7 of a 1-partition topic", produce(b.conn, "pc-13", 7, plain(3, "c13")), False)]


def case14(b, pid):
    # An ABORT control record: key = version 0, type 0; value = version 0, coordinator epoch 0.
    batch = record_batch([(i16(0) + i16(0), i16(0) + i32(0))], attributes=0x20)
    return [("14", "control batch (attributes 0x20) from a client", produce(b.conn, "pc-14", 0, batch), False)]


CASES = [case1, case2, case3, case4, case5, case6, case7, case8, case9, case10, case11, case12, case13,
         case14]
TOPICS = ["pc-1", "pc-2", "pc-3a", "pc-3", "pc-4", "pc-4b", "pc-5", "pc-6", "pc-7", "pc-8", "pc-9", "pc-10",
          "pc-11", "pc-12", "pc-13", "pc-14"]


# ---------------------------------------------------------------------------------------


def hexdump(b, limit=256):
    h = b[:limit].hex()
    return h + (f"... ({len(b)} bytes in all)" if len(b) > limit else f" ({len(b)} bytes)")


def name(code):
    return ERRORS.get(code, "?") if isinstance(code, int) else code


def jars_version(libs):
    """The Kafka version of fetch.sh's libs dir (the kafka-clients jar's)."""
    for jar in sorted(os.listdir(libs)):
        if jar.startswith("kafka-clients-") and jar.endswith(".jar"):
            return jar[len("kafka-clients-"):-len(".jar")]
    return "?"


def main():
    started = time.time()
    strand_bin = os.environ.get("STRAND_BIN", "target/release/strand")
    strand_bin = os.path.join(REPO, strand_bin) if not os.path.isabs(strand_bin) else strand_bin
    if not os.access(strand_bin, os.X_OK):
        raise SetupError(f"no Strand binary at {strand_bin} (set STRAND_BIN)")
    fetch = subprocess.run([os.path.join(REPO, "interop", "kafka", "fetch.sh")], cwd=REPO,
                           capture_output=True, text=True)
    if fetch.returncode != 0:
        raise SetupError(f"interop/kafka/fetch.sh failed:\n{fetch.stderr}")
    kafka_version = jars_version(fetch.stdout.strip().splitlines()[-1])

    timings = {}
    with tempfile.TemporaryDirectory(prefix="protocol-compare-") as workdir:
        kafka_port = next(p for p in iter(free_port, None) if p + 1000 <= 65535 and port_is_free(p + 1000))
        kafka = Broker("kafka", [os.path.join(REPO, "interop", "kafka", "run-kafka.sh"),
                                 os.path.join(workdir, "kafka"), str(kafka_port)], kafka_port, workdir)
        strand_port = free_port()
        strand = Broker("strand", [strand_bin, "serve", "--listen", f"127.0.0.1:{strand_port}",
                                   "--data-dir", os.path.join(workdir, "strand")], strand_port, workdir)
        diffs, lines = [], []
        try:
            t = time.time()
            kafka.start(timeout=120)
            timings["kafka start"] = time.time() - t
            t = time.time()
            strand.start(timeout=30)
            timings["strand start"] = time.time() - t
            print(f"kafka {kafka_version} on 127.0.0.1:{kafka_port}, strand ({strand_bin}) on 127.0.0.1:{strand_port}")

            t = time.time()
            for broker in (kafka, strand):
                broker.create_topics(TOPICS)
            timings["create topics"] = time.time() - t

            t = time.time()
            inits = {}
            for broker in (kafka, strand):
                inits[broker.name] = broker.init_producer_id()
            k, s = inits["kafka"], inits["strand"]
            same = k[0] == s[0] == 0 and k[2] == s[2] == 0
            line = (f"case 0: kafka={k[0]}/epoch {k[2]} strand={s[0]}/epoch {s[2]} "
                    f"{'MATCH' if same else 'DIFF'}  -- InitProducerId v1, null transactional id "
                    f"(pids: kafka {k[1]}, strand {s[1]}")
            for nm, v in inits.items():
                if v[3]:
                    line += f"; {nm} first answered {','.join(map(str, v[3]))}, retried"
            print(line + ")")
            if not same:
                diffs.append(("0", "InitProducerId", None, None))
            pids = {"kafka": k[1], "strand": s[1]}

            for case in CASES:
                ks = case(kafka, pids["kafka"])
                ss = case(strand, pids["strand"])
                for (label, desc, kr, compare_offset), (_, _, sr, _) in zip(ks, ss):
                    match = kr.code == sr.code and (not compare_offset or kr.offset == sr.offset)
                    extra = []
                    if not compare_offset and kr.offset != sr.offset:
                        extra.append(f"offsets differ, not compared")
                    if compare_offset:
                        extra.append("offset compared")
                    if kr.code != sr.code:
                        extra.append(f"kafka {name(kr.code)} vs strand {name(sr.code)}")
                    else:
                        extra.append(name(kr.code))
                    for nm, r in (("kafka", kr), ("strand", sr)):
                        if r.note:
                            extra.append(f"{nm} {r.note}")
                    print(f"case {label}: kafka={kr.show()} strand={sr.show()} {'MATCH' if match else 'DIFF'}"
                          f"  -- {desc} [{'; '.join(extra)}]")
                    if VERBOSE or not match:
                        for nm, r in (("kafka", kr), ("strand", sr)):
                            if r.message or r.record_errors:
                                print(f"    {nm} error_message={r.message!r} record_errors={r.record_errors!r}")
                    if not match:
                        diffs.append((label, desc, kr, sr))
                    if VERBOSE or not match:
                        if kr.request == sr.request:
                            print(f"    produce v8 body (same bytes to both): {hexdump(kr.request)}")
                        else:
                            print(f"    produce v8 body to kafka:  {hexdump(kr.request)}")
                            print(f"    produce v8 body to strand: {hexdump(sr.request)}")
            timings["cases"] = time.time() - t
        finally:
            t = time.time()
            codes = {b.name: b.stop() for b in (strand, kafka)}
            timings["stop"] = time.time() - t
            print("brokers stopped, exit codes: " + ", ".join(f"{k} {v}" for k, v in codes.items())
                  + " (143 is the JVM's normal exit after SIGTERM)")

    timings["total"] = time.time() - started
    print("timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
    if diffs:
        print(f"{len(diffs)} step(s) differ: {', '.join(d[0] for d in diffs)}")
        return 1
    print("all steps match")
    return 0


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    try:
        sys.exit(main())
    except SetupError as e:
        print(f"setup failed: {e}", file=sys.stderr)
        sys.exit(2)

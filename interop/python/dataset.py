"""The records every interop driver produces and the checks it runs on what it reads back.

Each codec gets its own block of records: keyed, with two headers, explicit timestamps
and an explicit partition, so that a consumer can check contents, headers, order and
offsets exactly.
"""
import os
import sys
import time

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
RECORDS_PER_CODEC = 40
BASE_TIMESTAMP_MS = 1_700_000_000_000


def bootstrap():
    return os.environ.get("STRAND_BOOTSTRAP", "127.0.0.1:9092")


def unique_topic(prefix):
    return f"{prefix}-{time.time_ns()}"


def records_for(codec_index, codec):
    """(partition, key, value, headers, timestamp) for one codec's block."""
    out = []
    for i in range(RECORDS_PER_CODEC):
        n = codec_index * RECORDS_PER_CODEC + i
        key = f"key-{codec}-{i}".encode()
        value = (f"value-{codec}-{i}-" + "x" * (i * 7)).encode()
        headers = [("codec", codec.encode()), ("index", str(i).encode())]
        out.append((n % PARTITIONS, key, value, headers, BASE_TIMESTAMP_MS + n * 10))
    return out


def all_records():
    out = []
    for index, codec in enumerate(CODECS):
        out.extend(records_for(index, codec))
    return out


def ok(message):
    print(f"ok: {message}", flush=True)


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)
    ok(message)


def check_consumed(produced, consumed):
    """produced: list of (partition, key, value, headers, ts) in produce order with the
    offsets the broker acknowledged, as dicts; consumed: list of dicts read back."""
    check(len(consumed) == len(produced), f"consumed {len(consumed)} of {len(produced)} records")
    by_partition = {}
    for record in consumed:
        by_partition.setdefault(record["partition"], []).append(record)
    for partition, records in by_partition.items():
        offsets = [r["offset"] for r in records]
        check(offsets == list(range(len(records))), f"partition {partition}: offsets contiguous from 0")
    expected = {(r["partition"], r["offset"]): r for r in produced}
    for record in consumed:
        want = expected.get((record["partition"], record["offset"]))
        if want is None:
            fail(f"unexpected record at {record['partition']}/{record['offset']}")
        for field in ("key", "value", "headers", "timestamp"):
            if want[field] != record[field]:
                fail(f"{field} differs at {record['partition']}/{record['offset']}: {want[field]!r} != {record[field]!r}")
    ok("every record matches key, value, headers and timestamp at its acknowledged offset")
    for partition in range(PARTITIONS):
        want_order = [r["key"] for r in produced if r["partition"] == partition]
        got_order = [r["key"] for r in by_partition.get(partition, [])]
        check(want_order == got_order, f"partition {partition}: produce order kept")


def first_at_or_after(produced, partition, timestamp):
    candidates = [r for r in produced if r["partition"] == partition and r["timestamp"] >= timestamp]
    return min(candidates, key=lambda r: r["offset"]) if candidates else None

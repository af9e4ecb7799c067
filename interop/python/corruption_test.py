"""A flipped byte in a sealed, flushed segment, found while the broker was down: Kafka
serves it (librdkafka with check.crcs=false hands the application the damaged record;
2.16 with check.crcs=true fails an assertion). Strand checks flushed batches before a
fetch sends them: librdkafka, with and without check.crcs, gets every record before the
damage intact (up to the damaged batch), never the damaged one, and a CORRUPT_MESSAGE
error (librdkafka's INVALID_MSG). Starts and stops its
own broker (STRAND_BIN)."""
import glob
import os
import signal
import tempfile
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from dataset import fail, ok
from restart_test import Broker, free_port

TOPIC = "damaged"
COUNT = 3000
DAMAGED = 1500


def value(n):
    return b"value-%06d-" % n + b"x" * 40


def flip_byte(segments, target):
    """Overwrites a byte inside the first occurrence of `target` in the segment files;
    returns the file it damaged (None if no file holds it)."""
    for path in segments:
        with open(path, "r+b") as f:
            data = f.read()
            at = data.find(target)
            if at >= 0:
                f.seek(at + 7)
                f.write(b"X")
                return path
    return None


def consume(bootstrap, check_crcs):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{check_crcs}",
                         "enable.auto.commit": False, "check.crcs": check_crcs,
                         "fetch.error.backoff.ms": 50, "log_level": 2})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    values, errors = [], []
    deadline = time.time() + 30
    while time.time() < deadline and not errors:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            errors.append(message.error())
        else:
            values.append(message.value())
    consumer.close()
    return values, errors


def main():
    root = tempfile.mkdtemp(prefix="strand-corruption-")
    config = os.path.join(root, "broker.toml")
    with open(config, "w") as f:
        f.write("segment_bytes = 32768\n")
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = Broker(os.path.join(root, "data"), port, config=config)
    broker.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 2})
    for n in range(COUNT):
        producer.produce(TOPIC, value=value(n), partition=0)
        if n % 100 == 0:
            producer.flush(10)
    if producer.flush(30):
        fail("records not acknowledged")
    if broker.stop(signal.SIGTERM) != 0:
        fail("broker did not stop cleanly")

    # Damage one record's value on disk while the broker is down.
    segments = sorted(glob.glob(os.path.join(root, "data", f"{TOPIC}-0", "*.log")))
    if len(segments) < 3:
        fail(f"expected several segments, got {segments}")
    path = flip_byte(segments, value(DAMAGED))
    if path is None:
        fail("the record to damage was not found")
    ok(f"flipped a byte of record {DAMAGED} in {os.path.basename(path)}")

    broker.start()
    try:
        for check_crcs in (False, True):
            values, errors = consume(bootstrap, check_crcs)
            damaged = [v for v in values if v.startswith(b"value-") and v not in
                       {value(n) for n in range(COUNT)}]
            if damaged:
                fail(f"check.crcs={check_crcs}: the application got damaged records {damaged[:2]}")
            if values != [value(n) for n in range(len(values))]:
                fail(f"check.crcs={check_crcs}: records out of order or missing")
            # Batches hold at most 100 records (a flush every 100): everything up to the
            # damaged record's batch is served.
            if len(values) > DAMAGED or len(values) <= DAMAGED - 100:
                fail(f"check.crcs={check_crcs}: read {len(values)} records; expected those "
                     f"before the damaged batch")
            codes = {e.code() for e in errors}
            if KafkaError.INVALID_MSG not in codes:
                fail(f"check.crcs={check_crcs}: expected CORRUPT_MESSAGE (librdkafka: INVALID_MSG), got {errors}")
            ok(f"check.crcs={check_crcs}: {len(values)} intact records, then {errors[0].name()}")
    finally:
        if broker.stop(signal.SIGTERM) != 0:
            fail("broker did not stop cleanly after the reads")
    with open(broker.log.name) as log:
        if "corrupt batch found by a read" not in log.read():
            fail("the broker did not report the damage in its log")
    ok("the broker logged the damaged batch")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""/metrics checked against what clients really sent, on one broker:

1. `strand bench` (2 producers, acks=all; 2 consumers) while /metrics is scraped every
   half second: every scrape parses as Prometheus text, counters never go down, and
   records are seen arriving mid-run; at the end messages in equals the records the bench
   had acknowledged, bytes in the record-batch bytes it had acknowledged and bytes out
   the batch bytes its consumers fetched (each within 1%; in practice exact), and the
   produce requests counted by API equal the fetch and produce counts the summaries hold.
2. A librdkafka (confluent-kafka) consumer group lags: kafka_consumergroup_group_lag
   rises by what is produced after its commit and falls to 0 when it catches up.
3. --log-format json: every line the broker writes to standard error is a JSON object
   with a level; a text log redirected to a file has no colour codes.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from confluent_kafka import Consumer, Producer

from http_broker import BIN, HttpBroker

BENCH_RECORDS = 200_000
SERIES = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def log(message):
    print(message, flush=True)


class Broker(HttpBroker):
    def __init__(self, root, *extra):
        super().__init__(root, *extra, fail=fail)

    def scrape(self):
        with urllib.request.urlopen(f"http://{self.http}/metrics", timeout=10) as response:
            if not response.headers["Content-Type"].startswith("text/plain; version=0.0.4"):
                fail(f"content type {response.headers['Content-Type']}")
            return parse(response.read().decode())

    def stop(self):
        self.process.terminate()
        if self.process.wait(30) != 0:
            fail(f"the broker did not stop cleanly: {open(self.stderr_path).read()[-2000:]}")


def parse(text):
    """{(name, labels): value}, failing on any line that is not Prometheus text."""
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        match = SERIES.match(line)
        if not match:
            fail(f"not a Prometheus text line: {line!r}")
        series[(match.group(1), match.group(2) or "")] = float(match.group(3))
    return series


def within_one_percent(what, reported, expected):
    if expected == 0 or abs(reported - expected) > 0.01 * expected:
        fail(f"{what}: /metrics says {reported}, the client {expected}")
    log(f"{what}: /metrics {reported:.0f}, client {expected:.0f}")


def bench_against_scrapes(broker):
    topic_label = '{topic="bench"}'
    counters = [("kafka_server_brokertopicmetrics_messagesin_total", topic_label),
                ("kafka_server_brokertopicmetrics_bytesin_total", topic_label),
                ("kafka_server_brokertopicmetrics_bytesout_total", topic_label)]
    scrapes = []
    done = threading.Event()

    def scraper():
        while not done.is_set():
            scrapes.append(broker.scrape())
            time.sleep(0.5)

    thread = threading.Thread(target=scraper, daemon=True)
    thread.start()
    bench = subprocess.run(
        [BIN, "bench", "--bootstrap", broker.kafka, "--topic", "bench", "--partitions", "4",
         "--record-size", "1000", "--acks", "all", "--producers", "2", "--consumers", "2",
         "--records", str(BENCH_RECORDS), "--rate", "40000", "--quiet", "--json", "-"],
        capture_output=True, text=True, timeout=300)
    done.set()
    thread.join(30)
    if bench.returncode != 0:
        fail(f"strand bench failed: {bench.stdout} {bench.stderr}")
    report = json.JSONDecoder().raw_decode(bench.stdout, bench.stdout.index("{"))[0]
    final = broker.scrape()
    for key in counters:
        values = [s.get(key, 0.0) for s in scrapes] + [final.get(key, 0.0)]
        if any(b < a for a, b in zip(values, values[1:])):
            fail(f"{key} went down between scrapes: {values}")
    mid_run = [s.get(counters[0], 0.0) for s in scrapes]
    if not any(0 < v < BENCH_RECORDS for v in mid_run):
        fail(f"no scrape saw the records arriving: {mid_run}")
    log(f"{len(scrapes)} scrapes during the run; messages in mid-run: "
        f"{[int(v) for v in mid_run if 0 < v < BENCH_RECORDS][:5]} ...")
    within_one_percent("messages in", final[counters[0]], report["produced_records"])
    within_one_percent("bytes in", final[counters[1]], report["produced_batch_bytes"])
    within_one_percent("bytes out", final[counters[2]], report["fetched_batch_bytes"])
    produces = sum(v for (name, labels), v in final.items()
                   if name == "kafka_network_requestmetrics_requests_total"
                   and 'request="Produce"' in labels)
    timed = final[("kafka_network_requestmetrics_totaltimems_count", '{request="Produce"}')]
    if produces != timed:
        fail(f"{produces} produce requests counted, {timed} timed")
    for quantile in ("0.50", "0.99", "0.999"):
        key = ("kafka_network_requestmetrics_totaltimems",
               f'{{request="Produce",quantile="{quantile}"}}')
        if key not in final:
            fail(f"no {key}")
    if final[("kafka_server_replicamanager_partitioncount", "")] < 4:
        fail("partition count below the bench topic's 4")


def lag_rises_and_falls(broker):
    topic, group = "lagged", "lag-group"
    producer = Producer({"bootstrap.servers": broker.kafka, "acks": "all"})

    def produce(count):
        for n in range(count):
            producer.produce(topic, value=b"v%d" % n)
        producer.flush(30)

    produce(100)
    consumer = Consumer({"bootstrap.servers": broker.kafka, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])

    def consume(count):
        seen = 0
        deadline = time.time() + 60
        while seen < count and time.time() < deadline:
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    seen += 1
        consumer.commit(asynchronous=False)
        return seen

    if consume(100) != 100:
        fail("the consumer did not read the first 100 records")
    lag_key = ("kafka_consumergroup_group_lag", f'{{group="{group}",topic="{topic}",partition="0"}}')

    def lag():
        return broker.scrape().get(lag_key)

    if lag() != 0.0:
        fail(f"lag after catching up: {lag()}")
    produce(250)
    if lag() != 250.0:
        fail(f"lag after 250 more records: {lag()}")
    log("kafka_consumergroup_group_lag: 0, then 250 after 250 more records")
    consume(250)
    if lag() != 0.0:
        fail(f"lag after consuming them: {lag()}")
    sum_key = ("kafka_consumergroup_group_sum_lag", f'{{group="{group}"}}')
    if broker.scrape().get(sum_key) != 0.0:
        fail("group sum lag is not 0")
    consumer.close()
    log("kafka_consumergroup_group_lag falls back to 0")


def logs_without_colour_and_as_json(root):
    json_root = os.path.join(root, "json")
    os.makedirs(json_root)
    broker = Broker(json_root, "--log-format", "json")
    producer = Producer({"bootstrap.servers": broker.kafka})
    producer.produce("logged", value=b"x")
    producer.flush(30)
    broker.stop()
    lines = [line for line in open(broker.stderr_path).read().splitlines() if line]
    if not lines:
        fail("the JSON log is empty")
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            fail(f"not a JSON log line: {line!r}")
        if "level" not in entry or "timestamp" not in entry:
            fail(f"a JSON log line without level or timestamp: {line!r}")
    log(f"--log-format json: {len(lines)} lines, each a JSON object")


def main():
    root = tempfile.mkdtemp(prefix="strand-metrics-")
    broker = Broker(root)
    try:
        bench_against_scrapes(broker)
        lag_rises_and_falls(broker)
    finally:
        broker.stop()
    text_log = open(broker.stderr_path).read()
    if "\x1b[" in text_log:
        fail("a text log redirected to a file has colour codes")
    if "INFO" not in text_log:
        fail(f"the text log has no INFO line: {text_log[:500]!r}")
    logs_without_colour_and_as_json(root)
    log("metrics: passed")


if __name__ == "__main__":
    main()

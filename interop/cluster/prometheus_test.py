#!/usr/bin/env python3
"""A real Prometheus (Debian's package) scrapes a 3-node Strand cluster's /metrics and
answers PromQL written for Kafka's JMX exporter names:

- every node is up, no partition is under-replicated, exactly one active controller;
- messages in, summed over the cluster for a topic, equal what a librdkafka producer had
  acknowledged (leaders count them, followers do not); each follower replica reports its
  lag behind the leader, 0 once caught up;
- after kill -9 of a node, `sum(kafka_server_replicamanager_underreplicatedpartitions)`
  turns positive and `up` shows the node down; there is still one active controller;
- after its restart the under-replicated count returns to 0 and the node's /ready says
  ready.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, fail, free_port, log, until  # noqa: E402

TOPIC = "watched"
PARTITIONS = 6
RECORDS = 5_000


def prometheus_binary():
    for candidate in (shutil.which("prometheus"), "/usr/bin/prometheus"):
        if candidate and os.path.exists(candidate):
            return candidate
    fail("prometheus is not installed (apt-get install prometheus)")


def start_prometheus(root, targets):
    port = free_port()
    config = os.path.join(root, "prometheus.yml")
    with open(config, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n")
        f.write("scrape_configs:\n  - job_name: strand\n    static_configs:\n")
        f.write("      - targets: [%s]\n" % ", ".join(f'"{t}"' for t in targets))
    out = open(os.path.join(root, "prometheus.log"), "w")
    process = subprocess.Popen(
        [prometheus_binary(), f"--config.file={config}",
         f"--storage.tsdb.path={os.path.join(root, 'tsdb')}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=out, stderr=out)
    return process, f"http://127.0.0.1:{port}"


def query(url, promql):
    """The instant vector of `promql` as {labels-json: value}, or None if unanswered."""
    try:
        with urllib.request.urlopen(
                f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}),
                timeout=5) as response:
            answer = json.load(response)
    except OSError:
        return None
    if answer.get("status") != "success":
        return None
    return {json.dumps(r["metric"], sort_keys=True): float(r["value"][1])
            for r in answer["data"]["result"]}


def scalar(url, promql):
    """The single value of an aggregating query (None if there is none yet)."""
    result = query(url, promql)
    if not result:
        return None
    (value,) = result.values()
    return value


def http_get(address, path):
    try:
        with urllib.request.urlopen(f"http://{address[0]}:{address[1]}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:
        return None, str(error)


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-prometheus-")
    cluster = Cluster(binary, root, nodes=3, settings={"replica_lag_time_max_ms": 3000})
    prometheus = None
    try:
        cluster.launch()
        targets = ["%s:%d" % cluster.http[i] for i in cluster.ids]
        prometheus, url = start_prometheus(root, targets)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={
            "min.insync.replicas": "2"})], operation_timeout=30)[TOPIC].result()

        until("Prometheus to see all three nodes up",
              lambda: scalar(url, "sum(up)") == 3.0, timeout=60)
        until("no under-replicated partitions",
              lambda: scalar(url, "sum(kafka_server_replicamanager_underreplicatedpartitions)") == 0.0,
              timeout=60)
        until("one active controller",
              lambda: scalar(url, "sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1.0)

        producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5})
        delivered = []
        for n in range(RECORDS):
            producer.produce(TOPIC, value=b"%d" % n, key=b"%d" % n,
                             on_delivery=lambda err, msg: delivered.append(err is None))
            producer.poll(0)
        producer.flush(60)
        if len(delivered) != RECORDS or not all(delivered):
            fail(f"{delivered.count(True)} of {RECORDS} records acknowledged")
        messages_in = f'sum(kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}})'
        until(f"PromQL to count the {RECORDS} records produced",
              lambda: scalar(url, messages_in) == float(RECORDS), timeout=30)
        log(f"{messages_in} = {RECORDS}")
        # Every follower replica reports its lag behind the leader, caught up at 0.
        lag = "kafka_server_fetcherlagmetrics_consumerlag"
        until("a lag series for each of the 12 follower replicas, all 0",
              lambda: scalar(url, f"count({lag})") == 2.0 * PARTITIONS
              and scalar(url, f"max({lag})") == 0.0, timeout=30)

        victim = 2
        log(f"kill -9 node {victim}")
        cluster.kill(victim)
        under_replicated = "sum(kafka_server_replicamanager_underreplicatedpartitions)"
        until("PromQL to report under-replicated partitions",
              lambda: (scalar(url, under_replicated) or 0) > 0, timeout=60)
        log(f"{under_replicated} = {scalar(url, under_replicated)}")
        until("Prometheus to see the node down",
              lambda: scalar(url, 'count(up == 0)') == 1.0, timeout=30)
        until("one active controller after the kill",
              lambda: scalar(url, "sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1.0,
              timeout=60)
        status, body = http_get(cluster.http[1], "/ready")
        log(f"node 1 /ready: {status} {body.strip()}")

        cluster.start(victim)
        until("the restarted node's /ready",
              lambda: http_get(cluster.http[victim], "/ready")[0] == 200, timeout=120)
        until("no under-replicated partitions after the restart",
              lambda: scalar(url, under_replicated) == 0.0, timeout=120)
        until("all three nodes up again", lambda: scalar(url, "sum(up)") == 3.0, timeout=30)
        log("prometheus: passed")
    finally:
        if prometheus is not None:
            prometheus.terminate()
            try:
                prometheus.wait(10)
            except subprocess.TimeoutExpired:
                prometheus.kill()
        cluster.destroy()


if __name__ == "__main__":
    main()

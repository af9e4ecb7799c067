#!/usr/bin/env python3
"""W1's shape (`strand bench`: 1 producer, 1 consumer, 1 KiB records, acks=1, 6
partitions) on a tiered topic whose segments are copied to the store during the run,
against an untiered topic on the same broker, both keeping about five seconds of data
locally (local.retention.ms / retention.ms), each deleted after its run: does copying
slow the write path?

One broker with tiered storage on (the store: SeaweedFS's S3 gateway with `--weed PATH`,
else moto's), runs alternating which topic goes first, each on a fresh topic of 16 MiB
segments (so copies run throughout) with local.retention.ms=5000 on the tiered one.
Prints each run's produce rate and the broker's CPU seconds per GiB produced, the medians
and the tiered/untiered ratios.

Then, with `--copy-only-mb N`, the cost of copying alone: N MB are produced to a tiered
topic whose remote.copy.lag.ms holds its copies back, then the lag is set to 0 and the
broker copies every sealed segment with nothing else running: copy MB/s and the broker's
and the store's CPU seconds per GiB copied (what copying adds to the write path per byte,
whatever the store's machine).

  python3 bench/tiered_w1.py --runs 5 --duration-secs 15 [--weed /tmp/weed] [--copy-only-mb 1024]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka.admin import AdminClient, NewTopic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "interop", "python"))
from s3_server import S3Server, free_port  # noqa: E402
from compare import proc_cpu_seconds as cpu_seconds  # noqa: E402

BIN = os.environ.get("STRAND_BIN", os.path.join(ROOT, "target", "release", "strand"))


def one_run(bootstrap, admin, broker, store, topic, tiered, duration):
    # Both keep about five seconds locally (the tiered one once copied), so the page
    # cache and the disk see the same footprint: what differs is the copying.
    config = {"segment.bytes": str(16 * 1024 * 1024)}
    if tiered:
        config.update({"remote.storage.enable": "true", "local.retention.ms": "5000",
                       "retention.ms": "-1"})
    else:
        config["retention.ms"] = "5000"
    admin.create_topics([NewTopic(topic, 6, 1, config=config)])[topic].result(30)
    before, store_before = cpu_seconds(broker.pid), cpu_seconds(store.pid)
    out = subprocess.run([BIN, "bench", "--bootstrap", bootstrap, "--topic", topic, "--quiet",
                          "--duration-secs", str(duration), "--consumers", "1"],
                         capture_output=True, text=True, timeout=duration + 120)
    cpu, store_cpu = cpu_seconds(broker.pid) - before, cpu_seconds(store.pid) - store_before
    admin.delete_topics([topic])[topic].result(30)
    time.sleep(3)  # the deletion's files go before the next run
    produced = re.search(r"produced .*?([\d.]+) MB/s", out.stdout + out.stderr)
    if not produced:
        raise SystemExit(f"no throughput in the bench's report: {out.stdout}{out.stderr}")
    mb_s = float(produced.group(1))
    gib = mb_s * duration / 1024
    return mb_s, cpu / gib if gib else float("nan"), store_cpu / gib if gib else float("nan")


def copy_only(bootstrap, admin, broker, s3, d, mb, partitions=1, perf_out=None):
    """Copies held back by remote.copy.lag.ms, released at once: (MB/s, broker CPU s per
    GiB copied, store CPU s per GiB copied)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    topic = "copy-only"
    admin.create_topics([NewTopic(topic, partitions, 1, config={
        "remote.storage.enable": "true", "retention.ms": "-1", "remote.copy.lag.ms": "86400000",
        "segment.bytes": str(64 * 1024 * 1024)})])[topic].result(30)
    out = subprocess.run([BIN, "bench", "--bootstrap", bootstrap, "--topic", topic, "--partitions", str(partitions),
                          "--quiet", "--records", str(mb * 1024), "--duration-secs", "600"],
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"strand bench failed: {out.stderr[-500:]}")
    sealed = []
    for partition in range(partitions):
        data = os.path.join(d, "data", f"{topic}-{partition}")
        logs = sorted(f for f in os.listdir(data) if f.endswith(".log"))[:-1]
        sealed += [os.path.join(data, f) for f in logs]
    size = sum(os.path.getsize(f) for f in sealed)
    time.sleep(3)
    if s3.keys(prefix=f"strand/{topic}-", suffix=".json"):
        raise SystemExit("copies were not held back by remote.copy.lag.ms")
    perf = perf_out and subprocess.Popen(["perf", "record", "-F", "999", "-g", "-p", str(broker.pid), "-o", perf_out],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    before, store_before, started = cpu_seconds(broker.pid), cpu_seconds(s3.process.pid), time.time()
    resource_ = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("remote.copy.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource_])[resource_].result(30)
    while len(s3.keys(prefix=f"strand/{topic}-", suffix=".json")) < len(sealed):
        if time.time() - started > 600:
            raise SystemExit("the copies did not finish")
        time.sleep(0.05)
    elapsed = time.time() - started
    if perf:
        perf.send_signal(2)
        perf.wait(60)
    gib = size / 1024 ** 3
    return (size / 1024 / 1024 / elapsed, (cpu_seconds(broker.pid) - before) / gib,
            (cpu_seconds(s3.process.pid) - store_before) / gib, len(sealed))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--duration-secs", type=int, default=15)
    parser.add_argument("--weed", help="a SeaweedFS binary: its S3 gateway instead of moto's")
    parser.add_argument("--copy-only-mb", type=int, default=0,
                        help="then measure copying alone: this many MB held back, then copied")
    parser.add_argument("--copy-only-partitions", type=int, default=1,
                        help="with --copy-only-mb: the topic's partitions (copied at once, up to "
                             "remote.log.manager.copier.thread.pool.size)")
    parser.add_argument("--perf", help="with --copy-only-mb: `perf record -g` the broker while it copies, to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        s3 = S3Server(d, "w1bench", weed=args.weed)
        bootstrap = f"127.0.0.1:{free_port()}"
        config = os.path.join(d, "strand.toml")
        with open(config, "w") as f:
            f.write('remote_log_storage_system_enable = true\nremote_storage_url = "s3://w1bench/strand"\n'
                    "remote_log_manager_task_interval_ms = 1000\nretention_check_interval_ms = 1000\n")
        log = open(os.path.join(d, "broker.log"), "w")
        broker = subprocess.Popen([BIN, "serve", "--listen", bootstrap, "--data-dir", os.path.join(d, "data"),
                                   "--http-listen", "none", "--config", config], stdout=log,
                                  stderr=subprocess.STDOUT, env={**os.environ, **s3.environment()})
        try:
            time.sleep(2)
            admin = AdminClient({"bootstrap.servers": bootstrap})
            results = {True: [], False: []}
            for run in range(args.runs):
                order = (True, False) if run % 2 == 0 else (False, True)
                for tiered in order:
                    topic = f"w1-{'tiered' if tiered else 'plain'}-{run}"
                    mb_s, cpu_per_gib, store_per_gib = one_run(bootstrap, admin, broker, s3.process, topic,
                                                               tiered, args.duration_secs)
                    results[tiered].append((mb_s, cpu_per_gib, store_per_gib))
                    print(f"run {run} {'tiered ' if tiered else 'plain  '}: {mb_s:.1f} MB/s, "
                          f"broker {cpu_per_gib:.2f} CPU s/GiB, store {store_per_gib:.2f}", flush=True)
            if args.runs:
                med = {k: tuple(statistics.median(r[i] for r in v) for i in range(3))
                       for k, v in results.items()}
                print(f"medians: plain {med[False][0]:.1f} MB/s {med[False][1]:.2f} CPU s/GiB; tiered "
                      f"{med[True][0]:.1f} MB/s {med[True][1]:.2f} CPU s/GiB (the store {med[True][2]:.2f})")
                print(f"tiered/plain: throughput {med[True][0] / med[False][0]:.3f}, "
                      f"broker CPU per GiB {med[True][1] / med[False][1]:.3f}")
            if args.copy_only_mb:
                mb_s, broker_cpu, store_cpu, segments = copy_only(bootstrap, admin, broker, s3, d,
                                                                  args.copy_only_mb, args.copy_only_partitions,
                                                                  args.perf)
                print(f"copying alone: {segments} segments at {mb_s:.1f} MB/s, broker {broker_cpu:.2f} CPU s "
                      f"per GiB copied, the store {store_cpu:.2f}")
        finally:
            broker.terminate()
            broker.wait(60)
            s3.close()


if __name__ == "__main__":
    main()

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

  python3 bench/tiered_w1.py --runs 5 --duration-secs 15 [--weed /tmp/weed]
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

BIN = os.environ.get("STRAND_BIN", os.path.join(ROOT, "target", "release", "strand"))


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(bootstrap, admin, broker, topic, tiered, duration):
    # Both keep about five seconds locally (the tiered one once copied), so the page
    # cache and the disk see the same footprint: what differs is the copying.
    config = {"segment.bytes": str(16 * 1024 * 1024)}
    if tiered:
        config.update({"remote.storage.enable": "true", "local.retention.ms": "5000",
                       "retention.ms": "-1"})
    else:
        config["retention.ms"] = "5000"
    admin.create_topics([NewTopic(topic, 6, 1, config=config)])[topic].result(30)
    before = cpu_seconds(broker.pid)
    out = subprocess.run([BIN, "bench", "--bootstrap", bootstrap, "--topic", topic, "--quiet",
                          "--duration-secs", str(duration), "--consumers", "1"],
                         capture_output=True, text=True, timeout=duration + 120)
    cpu = cpu_seconds(broker.pid) - before
    admin.delete_topics([topic])[topic].result(30)
    time.sleep(3)  # the deletion's files go before the next run
    produced = re.search(r"produced .*?([\d.]+) MB/s", out.stdout + out.stderr)
    if not produced:
        raise SystemExit(f"no throughput in the bench's report: {out.stdout}{out.stderr}")
    mb_s = float(produced.group(1))
    gib = mb_s * duration / 1024
    return mb_s, cpu / gib if gib else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--duration-secs", type=int, default=15)
    parser.add_argument("--weed", help="a SeaweedFS binary: its S3 gateway instead of moto's")
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
                    mb_s, cpu_per_gib = one_run(bootstrap, admin, broker, topic, tiered, args.duration_secs)
                    results[tiered].append((mb_s, cpu_per_gib))
                    print(f"run {run} {'tiered ' if tiered else 'plain  '}: {mb_s:.1f} MB/s, "
                          f"broker {cpu_per_gib:.2f} CPU s/GiB", flush=True)
            copies = len(s3.keys(suffix=".json"))
            med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v))
                   for k, v in results.items()}
            print(f"segments copied during the runs: {copies}")
            print(f"medians: plain {med[False][0]:.1f} MB/s {med[False][1]:.2f} CPU s/GiB; "
                  f"tiered {med[True][0]:.1f} MB/s {med[True][1]:.2f} CPU s/GiB")
            print(f"tiered/plain: throughput {med[True][0] / med[False][0]:.3f}, "
                  f"broker CPU per GiB {med[True][1] / med[False][1]:.3f}")
        finally:
            broker.terminate()
            broker.wait(60)
            s3.close()


if __name__ == "__main__":
    main()

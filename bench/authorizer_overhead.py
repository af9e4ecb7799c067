#!/usr/bin/env python3
"""What ACLs cost Strand: the same produce and consume (Kafka's ProducerPerformance and
ConsumerPerformance over PLAINTEXT, W1's shape: 1 KiB records, acks=1) against a broker
without an authorizer and against one with
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer, no super
user, and 2,000 ACLs (the client's own ALLOWs on its topic, group and the cluster among
1,998 of other principals on other topics and prefixes), so every request is authorized
against a realistic index. Per phase: throughput and broker CPU seconds per GiB; runs
alternate which goes first; medians and with/without ratios as a Markdown table.

    bench/authorizer_overhead.py                 # 3 runs of 1,000,000 records of 1 KiB
    bench/authorizer_overhead.py --runs 1 --records 200000
"""
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tls_compare import free_port, perf_arguments, perf_phases, start_strand_with, stop, tool

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def start(work, port, settings):
    return start_strand_with(work, f"PLAINTEXT://127.0.0.1:{port}", port, settings)


def install_acls(work, port):
    """2,000 ACLs, made while User:ANONYMOUS is a super user (then it is not)."""
    process = start(work, port, [f"authorizer.class.name={AUTHORIZER}", "super.users=User:ANONYMOUS"])
    try:
        bootstrap = f"127.0.0.1:{port}"
        acls = [("--topic", "bench", "All"), ("--group", "*", "Read"), ("--cluster", None, "Create"),
                ("--cluster", None, "IdempotentWrite")]
        for resource, name, operation in acls:
            tool("kafka-acls", "--bootstrap-server", bootstrap, "--add", "--allow-principal", "User:ANONYMOUS",
                 "--operation", operation, resource, *([name] if name else []))
        # Others' ACLs, through the admin API in one request per batch (kafka-acls makes one
        # per invocation, which would take minutes).
        script = (
            "from confluent_kafka.admin import AdminClient, AclBinding, ResourceType, ResourcePatternType, "
            "AclOperation, AclPermissionType\n"
            f"admin = AdminClient({{'bootstrap.servers': '{bootstrap}'}})\n"
            "bindings = []\n"
            "for i in range(1996):\n"
            "    pattern = ResourcePatternType.PREFIXED if i % 4 == 0 else ResourcePatternType.LITERAL\n"
            "    bindings.append(AclBinding(ResourceType.TOPIC, f'team-{i % 50}-topic-{i}', pattern, f'User:user-{i}',"
            " '*', AclOperation.WRITE, AclPermissionType.ALLOW))\n"
            "for future in admin.create_acls(bindings).values():\n"
            "    future.result(60)\n"
        )
        subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    finally:
        stop(process)


def one_run(with_acls, records, size):
    work = Path(tempfile.mkdtemp(prefix="authz-"))
    port = free_port()
    settings = []
    if with_acls:
        install_acls(work, port)
        settings = [f"authorizer.class.name={AUTHORIZER}"]
    process = start(work, port, settings)
    try:
        bootstrap = f"127.0.0.1:{port}"
        tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "bench", "--partitions", "1")
        return perf_phases(process.pid, bootstrap, "bench", records, size)
    finally:
        stop(process)
        shutil.rmtree(work, ignore_errors=True)


def main():
    args = perf_arguments(__doc__)
    results = {False: [], True: []}
    for run in range(args.runs):
        for with_acls in ([False, True] if run % 2 == 0 else [True, False]):
            result = one_run(with_acls, args.records, args.size)
            print(f"run {run + 1} {'ACLs' if with_acls else 'no authorizer'}: {result}", file=sys.stderr)
            results[with_acls].append(result)
    print("| metric | no authorizer | 2,000 ACLs | with/without |\n|---|---:|---:|---:|")
    for metric in results[False][0]:
        without = statistics.median(r[metric] for r in results[False])
        with_acls = statistics.median(r[metric] for r in results[True])
        print(f"| {metric} | {without:.2f} | {with_acls:.2f} | {with_acls / without:.3f} |")


if __name__ == "__main__":
    main()

"""Client quotas as Kafka configures them, with real clients: Kafka's kafka-configs sets
producer_byte_rate=1 MiB/s for client id "slow" and describes it back (also
`--entity-type users`, which asks DescribeClientQuotas and DescribeUserScramCredentials);
a librdkafka producer with that client id, producing as fast as it can for 20 s, is held
within 10% of 1 MiB/s and told its throttle time (throttle_cb), while a producer with
another client id running alongside is not held back. Removing the quota frees the client.

controller_mutation_rate=1 (partitions a second, KIP-599) for client id "mutator": Kafka's
kafka-topics (Java admin client, CreateTopics v7) creates a topic of 30 partitions (the
bucket of 11 goes below zero), and the next creation fails with Kafka's
ThrottlingQuotaExceededException once its retry would outlast default.api.timeout.ms;
another client id creates topics meanwhile.

Runs its own broker (STRAND_BIN, default target/release/strand); needs the jars of
interop/kafka/fetch.sh.
"""
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker_process import broker_from, free_port, one_node_properties
from dataset import check, ok

HERE = os.path.dirname(os.path.abspath(__file__))
KAFKA_CLI = os.path.join(HERE, "../kafka/kafka-cli.sh")
QUOTA = 1024 * 1024
TOPIC = "quota-topic"
SECONDS = 20
VALUE = b"q" * 1024


def kafka_configs(bootstrap, *args):
    result = subprocess.run([KAFKA_CLI, "kafka-configs", "--bootstrap-server", bootstrap, *args],
                            capture_output=True, text=True, timeout=120)
    check(result.returncode == 0, f"kafka-configs {' '.join(args)} ({result.stderr.strip()[-500:]})")
    return result.stdout


def produce_for(bootstrap, client_id, seconds, results, warmup=0):
    """Produces 1 KiB records as fast as the broker takes them for `warmup` + `seconds`;
    puts (bytes acknowledged in the last `seconds`, the largest throttle time reported) in
    `results`."""
    throttles = []
    acknowledged = [0]
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                         "batch.size": 16384,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    started = time.time()

    def delivered(err, msg):
        if err is None and warmup <= time.time() - started <= warmup + seconds:
            acknowledged[0] += len(msg.value())

    while time.time() - started < warmup + seconds:
        try:
            producer.produce(TOPIC, value=VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
    producer.flush(60)
    results.put((client_id, acknowledged[0], max(throttles, default=0.0)))


def main():
    with tempfile.TemporaryDirectory() as d:
        ports = {"PLAINTEXT": free_port()}
        properties = one_node_properties(d, ports, [])
        with broker_from(properties, d):
            bootstrap = f"127.0.0.1:{ports['PLAINTEXT']}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
            kafka_configs(bootstrap, "--alter", "--add-config", f"producer_byte_rate={QUOTA}",
                          "--entity-type", "clients", "--entity-name", "slow")
            described = kafka_configs(bootstrap, "--describe", "--entity-type", "clients", "--entity-name", "slow")
            check(f"producer_byte_rate={QUOTA}.0" in described,
                  f"kafka-configs --describe --entity-type clients: {described.strip()}")
            users = kafka_configs(bootstrap, "--describe", "--entity-type", "users")
            ok(f"kafka-configs --describe --entity-type users answers ({users.strip() or 'no users'})")

            results = multiprocessing.Queue()
            runs = [multiprocessing.Process(target=produce_for, args=(bootstrap, name, SECONDS, results))
                    for name in ("slow", "fast")]
            for run in runs:
                run.start()
            measured = {}
            for _ in runs:
                client_id, acknowledged, throttle = results.get(timeout=SECONDS + 120)
                measured[client_id] = (acknowledged / SECONDS, throttle)
            for run in runs:
                run.join(30)
            slow_rate, slow_throttle = measured["slow"]
            fast_rate, fast_throttle = measured["fast"]
            check(abs(slow_rate - QUOTA) <= 0.1 * QUOTA,
                  f"the producer held to {QUOTA} B/s made {slow_rate:.0f} B/s over {SECONDS} s "
                  f"({slow_rate / QUOTA:.2f} of its quota)")
            check(slow_throttle > 0, f"it was told its throttle time (up to {slow_throttle:.0f} ms)")
            check(fast_rate > 3 * QUOTA and fast_throttle == 0,
                  f"a producer alongside with another client id is not held back ({fast_rate:.0f} B/s, "
                  f"throttle {fast_throttle:.0f} ms)")

            kafka_configs(bootstrap, "--alter", "--delete-config", "producer_byte_rate",
                          "--entity-type", "clients", "--entity-name", "slow")
            described = kafka_configs(bootstrap, "--describe", "--entity-type", "clients", "--entity-name", "slow")
            check("producer_byte_rate" not in described, "kafka-configs --delete-config removes the quota")
            controller_mutation_rate(bootstrap, d)
    print("PASS quotas")


def kafka_topics_create(bootstrap, d, client_id, topic, partitions):
    config = os.path.join(d, f"{client_id}.properties")
    with open(config, "w") as f:
        f.write(f"client.id={client_id}\nrequest.timeout.ms=5000\ndefault.api.timeout.ms=5000\n")
    return subprocess.run([KAFKA_CLI, "kafka-topics", "--bootstrap-server", bootstrap, "--command-config", config,
                           "--create", "--topic", topic, "--partitions", str(partitions)],
                          capture_output=True, text=True, timeout=120)


def controller_mutation_rate(bootstrap, d):
    kafka_configs(bootstrap, "--alter", "--add-config", "controller_mutation_rate=1",
                  "--entity-type", "clients", "--entity-name", "mutator")
    first = kafka_topics_create(bootstrap, d, "mutator", "mutated-1", 30)
    check(first.returncode == 0, f"kafka-topics creates 30 partitions from a full bucket ({first.stderr.strip()[-300:]})")
    second = kafka_topics_create(bootstrap, d, "mutator", "mutated-2", 1)
    output = second.stdout + second.stderr
    check(second.returncode != 0 and "ThrottlingQuotaExceededException" in output
          and "The throttling quota has been exceeded." in output,
          f"the next creation fails with Kafka's ThrottlingQuotaExceededException ({output.strip()[-300:]})")
    other = kafka_topics_create(bootstrap, d, "other-admin", "unthrottled", 30)
    check(other.returncode == 0, f"another client id is not held back ({other.stderr.strip()[-300:]})")


if __name__ == "__main__":
    sys.exit(main())

"""ACLs as Kafka configures them, with real clients: one broker (a one-node metadata
quorum, so the ACLs live in the metadata log) from a server.properties that sets
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer and
super.users=User:admin, with a SASL_PLAINTEXT (PLAIN) and a PLAINTEXT listener.

Kafka's own kafka-acls manages the ACLs as the super user (--producer and --consumer
conveniences, --transactional-id, --cluster, --list, --remove) and is refused as an
ordinary user. Then alice, who has ACLs, produces (also transactionally), consumes in her
group and commits with librdkafka (confluent-kafka) and kafka-python; bob, who has none,
is refused with Kafka's codes: TOPIC_AUTHORIZATION_FAILED producing, creating a topic and
describing its configs, GROUP_AUTHORIZATION_FAILED joining a group,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a transactional id. An anonymous PLAINTEXT client
sees no topic. Removing alice's ACL refuses her again.

The broker's own requests to itself (transaction markers, verification) come on the
PLAINTEXT inter-broker listener as User:ANONYMOUS, which needs CLUSTER_ACTION, as on Kafka:
it is granted to that principal from 127.0.0.1 only.

Runs its own broker (STRAND_BIN, default target/release/strand); needs the jars of
interop/kafka/fetch.sh.
"""
import os
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from broker_process import broker_from, free_port, one_node_properties
from dataset import check, fail, ok

HERE = os.path.dirname(os.path.abspath(__file__))
KAFKA_CLI = os.path.join(HERE, "../kafka/kafka-cli.sh")
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
TOPIC = "acl-orders"
GROUP = "acl-group"
TRANSACTIONAL_ID = "acl-tx"



def sasl(user):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user]}


def kafka_acls(port, d, user, *args):
    path = os.path.join(d, f"{user}.properties")
    with open(path, "w") as f:
        f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{user}" password="{USERS[user]}";\n')
    return subprocess.run([KAFKA_CLI, "kafka-acls", "--bootstrap-server", f"127.0.0.1:{port}",
                           "--command-config", path, *args], capture_output=True, text=True, timeout=120)


def produce_error(bootstrap, user, topic, **extra):
    """The delivery error of one record (None when it was written)."""
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000, **sasl(user), **extra})
    producer.produce(topic, value=b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(20)
    check(len(errors) == 1, f"{user}: the record was answered")
    return errors[0]


def consume(bootstrap, user, group, count):
    """Consumes up to `count` records of TOPIC in `group`, committing; returns (values,
    the first error)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **sasl(user)})
    consumer.subscribe([TOPIC])
    got, error = [], None
    deadline = time.time() + 30
    while len(got) < count and time.time() < deadline and error is None:
        message = consumer.poll(1)
        if message is None:
            continue
        if message.error():
            error = message.error()
            break
        got.append(message.value().decode())
    if got:
        consumer.commit(asynchronous=False)
    consumer.close()
    return got, error


def librdkafka(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("admin")})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    ok(f"the super user created {TOPIC}")

    # bob has no ACL: every operation refused with Kafka's code.
    error = produce_error(bootstrap, "bob", TOPIC)
    check(error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          f"librdkafka, bob produces: TOPIC_AUTHORIZATION_FAILED ({error})")
    bob_admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("bob")})
    try:
        bob_admin.create_topics([NewTopic("acl-bobs", 1, 1)])["acl-bobs"].result(30)
        fail("bob created a topic")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
              f"librdkafka, bob creates a topic: TOPIC_AUTHORIZATION_FAILED ({e})")
    try:
        resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
        bob_admin.describe_configs([resource])[resource].result(30)
        fail("bob described a topic's configs")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
              f"librdkafka, bob describes configs: TOPIC_AUTHORIZATION_FAILED ({e})")
    check(TOPIC not in bob_admin.list_topics(timeout=15).topics, "librdkafka, bob's Metadata leaves the topic out")
    _, error = consume(bootstrap, "bob", GROUP, 1)
    check(error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED,
          f"librdkafka, bob joins {GROUP}: GROUP_AUTHORIZATION_FAILED ({error})")
    try:
        transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID,
                                  **sasl("bob")})
        transactional.init_transactions(20)
        fail("bob initialized a transactional producer")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
              f"librdkafka, bob's transactional id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED ({e})")

    # alice's ACLs let her produce, consume in her group and commit, and run transactions.
    for i in range(5):
        check(produce_error(bootstrap, "alice", TOPIC) is None, f"librdkafka, alice produces ({i})")
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID,
                              **sasl("alice")})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    for i in range(3):
        transactional.produce(TOPIC, value=f"tx-{i}".encode())
    transactional.commit_transaction(30)
    ok("librdkafka, alice commits a transaction of 3 records")
    got, error = consume(bootstrap, "alice", GROUP, 8)
    check(error is None and len(got) == 8, f"librdkafka, alice consumes in {GROUP} and commits ({len(got)}, {error})")
    _, error = consume(bootstrap, "alice", "acl-other-group", 1)
    check(error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED,
          f"librdkafka, alice in a group without an ACL: GROUP_AUTHORIZATION_FAILED ({error})")


def kafka_python(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    def settings(user):
        return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                "sasl_plain_username": user, "sasl_plain_password": USERS[user]}

    producer = KafkaProducer(bootstrap_servers=bootstrap, **settings("alice"))
    producer.send(TOPIC, value=b"kafka-python").get(30)
    producer.close()
    ok("kafka-python, alice produces")
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **settings("alice"))
    values = [m.value for m in consumer]
    consumer.close()
    check(b"kafka-python" in values, f"kafka-python, alice consumes in {GROUP} ({len(values)} records)")
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=10000, **settings("bob"))
    try:
        producer.send(TOPIC, value=b"no").get(30)
        fail("kafka-python: bob produced")
    except TopicAuthorizationFailedError as e:
        ok(f"kafka-python, bob produces: TOPIC_AUTHORIZATION_FAILED ({type(e).__name__})")
    except Exception as e:  # kafka-python may report the refusal while fetching metadata
        check("Authorization" in type(e).__name__ or "authoriz" in str(e).lower(),
              f"kafka-python, bob produces: refused ({type(e).__name__}: {e})")
    finally:
        producer.close(timeout=5)


def main():
    with tempfile.TemporaryDirectory() as d:
        ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
        users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
        properties = one_node_properties(d, ports, [
            "transaction.state.log.replication.factor=1",
            "sasl.enabled.mechanisms=PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="admin" password="admin-secret" {users};',
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin",
        ])
        with broker_from(properties, d):
            sasl_port = ports["SASL_PLAINTEXT"]
            bootstrap = f"127.0.0.1:{sasl_port}"

            refused = kafka_acls(sasl_port, d, "alice", "--list")
            check(refused.returncode != 0 and "ClusterAuthorizationException" in refused.stderr + refused.stdout,
                  "kafka-acls as alice: refused (ClusterAuthorizationException)")
            for args in (
                ["--add", "--allow-principal", "User:ANONYMOUS", "--allow-host", "127.0.0.1",
                 "--operation", "ClusterAction", "--cluster"],
                ["--add", "--allow-principal", "User:alice", "--producer", "--topic", TOPIC,
                 "--transactional-id", TRANSACTIONAL_ID],
                ["--add", "--allow-principal", "User:alice", "--consumer", "--topic", TOPIC, "--group", GROUP],
            ):
                result = kafka_acls(sasl_port, d, "admin", *args)
                check(result.returncode == 0, f"kafka-acls {' '.join(args[:6])} ... "
                                              f"({result.stderr.strip()[-500:]})")
            listed = kafka_acls(sasl_port, d, "admin", "--list", "--topic", TOPIC).stdout
            for operation in ("WRITE", "DESCRIBE", "CREATE", "READ"):
                check(f"principal=User:alice, host=*, operation={operation}, permissionType=ALLOW" in listed,
                      f"kafka-acls --list shows alice's {operation} on {TOPIC}")

            librdkafka(bootstrap)
            kafka_python(bootstrap)

            anonymous = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
            check(TOPIC not in anonymous.list_topics(timeout=15).topics,
                  "librdkafka, an anonymous PLAINTEXT client: the topic is left out")

            removed = kafka_acls(sasl_port, d, "admin", "--remove", "--force", "--allow-principal", "User:alice",
                                 "--operation", "Write", "--topic", TOPIC)
            check(removed.returncode == 0, f"kafka-acls --remove ({removed.stderr.strip()[-300:]})")
            error = produce_error(bootstrap, "alice", TOPIC)
            check(error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
                  f"librdkafka, alice after her WRITE ACL is removed: TOPIC_AUTHORIZATION_FAILED ({error})")
    print("PASS acls")


if __name__ == "__main__":
    sys.exit(main())

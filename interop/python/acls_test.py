"""ACLs as Kafka configures them, with real clients: one broker (a one-node metadata
quorum, so the ACLs live in the metadata log) from a server.properties that sets
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer and
super.users=User:admin, with PLAINTEXT, SSL (client certificates, mapped to User:NAME by
ssl.principal.mapping.rules), SASL_PLAINTEXT (PLAIN, OAUTHBEARER) and SASL_SSL (SCRAM-SHA-256
and -512) listeners.

Kafka's own kafka-acls manages the ACLs as the super user (--producer and --consumer
conveniences, prefixed patterns, --transactional-id, --cluster, --list, --remove) and is
refused as an ordinary user. Then, over each of the five ways to authenticate, librdkafka
(confluent-kafka, and kcat) as alice, who has ACLs, produces, runs a transaction, consumes in her
group (fetch, join, commit), creates a topic under her prefix and describes configs; as
bob, who has none, each of those is refused with Kafka's code (TOPIC_, GROUP_,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and Metadata leaves the topic out. kafka-python,
Kafka's Java clients (console producer and consumer, kafka-configs) and franz-go
(interop/go with STRAND_ACL_EXPECT) are allowed and refused the same way over PLAIN. An anonymous PLAINTEXT client sees no
topic. Removing alice's WRITE refuses her again.

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

import certificates
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


def franz_go(bootstrap, d):
    """franz-go (interop/go with STRAND_ACL_EXPECT) as alice and as bob over SASL PLAIN:
    produce, fetch, offset commit and a transactional id allowed, or refused with Kafka's
    codes."""
    for user, expect in (("alice", "allowed"), ("bob", "refused")):
        result = subprocess.run(
            [os.path.join(HERE, "../go/run.sh")], capture_output=True, text=True, timeout=300,
            env={**os.environ, "STRAND_BOOTSTRAP": bootstrap, "STRAND_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                 "STRAND_SASL_MECHANISM": "PLAIN", "STRAND_SASL_USER": user, "STRAND_SASL_PASSWORD": USERS[user],
                 "STRAND_ACL_EXPECT": expect, "STRAND_ACL_TOPIC": TOPIC, "STRAND_ACL_GROUP": f"{GROUP}-franz",
                 "STRAND_ACL_TRANSACTIONAL_ID": f"{TRANSACTIONAL_ID}-franz"})
        check(result.returncode == 0 and "acl checks passed" in result.stdout,
              f"franz-go as {user}: {expect} ({(result.stdout + result.stderr).strip()[-400:]})")


def java_config(d, user):
    """A Java client's properties for `user` over SASL PLAIN."""
    path = os.path.join(d, f"{user}.properties")
    with open(path, "w") as f:
        f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{user}" password="{USERS[user]}";\n')
    return path


def kafka_tool(tool, port, d, user, *args, stdin=None):
    return subprocess.run([KAFKA_CLI, tool, "--bootstrap-server", f"127.0.0.1:{port}",
                           "--command-config", java_config(d, user), *args], input=stdin,
                          capture_output=True, text=True, timeout=120)


def kafka_acls(port, d, user, *args):
    return kafka_tool("kafka-acls", port, d, user, *args)


def java_clients(port, d):
    """Kafka's Java clients (the console producer and consumer, kafka-configs): alice
    allowed, bob refused with the exceptions Kafka's clients raise for Kafka's codes."""
    produced = kafka_tool("kafka-console-producer", port, d, "alice", "--topic", TOPIC, stdin="java-alice\n")
    check(produced.returncode == 0 and "Exception" not in produced.stderr,
          f"Java producer as alice ({produced.stderr.strip()[-300:]})")
    consumed = kafka_tool("kafka-console-consumer", port, d, "alice", "--topic", TOPIC, "--group", f"{GROUP}-java",
                          "--from-beginning", "--timeout-ms", "20000")
    check("java-alice" in consumed.stdout.split(), "Java consumer as alice, in her group")
    refused = kafka_tool("kafka-console-producer", port, d, "bob", "--topic", TOPIC, stdin="java-bob\n")
    check("TopicAuthorizationException" in refused.stderr,
          f"Java producer as bob: TopicAuthorizationException ({refused.stderr.strip()[-300:]})")
    refused = kafka_tool("kafka-console-consumer", port, d, "alice", "--topic", TOPIC, "--group", "java-other",
                         "--from-beginning", "--timeout-ms", "10000")
    check("GroupAuthorizationException" in refused.stderr,
          f"Java consumer as alice in a group without an ACL: GroupAuthorizationException "
          f"({refused.stderr.strip()[-300:]})")
    # kafka-configs lists topics first: to bob, who may not describe it, the topic is not there,
    # as on Kafka.
    hidden = kafka_tool("kafka-configs", port, d, "bob", "--describe", "--entity-type", "topics",
                        "--entity-name", TOPIC)
    check(f"The topic '{TOPIC}' doesn't exist" in hidden.stdout,
          f"kafka-configs --describe as bob: the topic is hidden ({hidden.stdout.strip()[-200:]})")


def produce_error(bootstrap, settings, topic, value=b"v"):
    """The delivery error of one record (None when it was written)."""
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000, **settings})
    producer.produce(topic, value=value, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(20)
    check(len(errors) == 1, "the record was answered")
    return errors[0]


def consume(bootstrap, settings, group, wanted):
    """Consumes TOPIC in `group` from the start until every value of `wanted` is seen,
    committing; returns (the values seen, the first error)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **settings})
    consumer.subscribe([TOPIC])
    got, error = set(), None
    deadline = time.time() + 30
    while not set(wanted) <= got and time.time() < deadline:
        message = consumer.poll(1)
        if message is None:
            continue
        if message.error():
            error = message.error()
            break
        got.add(message.value().decode())
    if got:
        consumer.commit(asynchronous=False)
    consumer.close()
    return got, error


def kcat(bootstrap, settings, *args, stdin=None):
    """kcat (librdkafka's command-line client) with `settings` as -X properties."""
    properties = [a for key, value in settings.items()
                  for a in ("-X", f"{key}={str(value).lower() if isinstance(value, bool) else value}")]
    return subprocess.run(["kcat", "-b", bootstrap, *properties, *args], input=stdin, capture_output=True,
                          text=True, timeout=60)


def kcat_matrix(method, bootstrap, alice, bob, suffix):
    """kcat as alice produces and reads back a record; as bob it is refused. Not over
    SCRAM: Debian's kcat links librdkafka 2.0.2, whose client-final message repeats the
    client nonce (fixed in librdkafka 2.6.1), which Kafka 4.x refuses as Strand does."""
    if "SCRAM" in method:
        ok(f"{method}, kcat skipped (librdkafka 2.0.2's SCRAM nonce bug; Kafka 4.x refuses it too)")
        return
    value = f"{suffix}-kcat"
    produced = kcat(bootstrap, alice, "-P", "-t", TOPIC, stdin=value + "\n")
    check(produced.returncode == 0, f"{method}, kcat as alice produces ({produced.stderr.strip()[-300:]})")
    read = kcat(bootstrap, alice, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-q")
    check(read.returncode == 0 and value in read.stdout.split(),
          f"{method}, kcat as alice reads it back ({read.stderr.strip()[-300:]})")
    refused = kcat(bootstrap, bob, "-P", "-t", TOPIC, stdin=value + "\n")
    check(refused.returncode != 0 and "Topic authorization failed" in refused.stderr,
          f"{method}, kcat as bob is refused: Topic authorization failed ({refused.stderr.strip()[-300:]})")


def refused_with(code, action, name):
    """Runs `action`, which must raise Kafka's `code`."""
    try:
        action()
        fail(f"{name}: allowed")
    except KafkaException as e:
        check(e.args[0].code() == code, f"{name}: {KafkaError(code).name()} ({e})")


def authorization_matrix(method, bootstrap, alice, bob):
    """alice (her ACLs) and bob (none) authenticated by `method`: every operation of the
    matrix allowed for alice and refused for bob with Kafka's code."""
    suffix = method.lower().replace(" ", "-").replace("/", "-")
    bob_admin = AdminClient({"bootstrap.servers": bootstrap, **bob})
    error = produce_error(bootstrap, bob, TOPIC)
    check(error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          f"{method}, bob produces: TOPIC_AUTHORIZATION_FAILED ({error})")
    refused_with(KafkaError.TOPIC_AUTHORIZATION_FAILED,
                 lambda: bob_admin.create_topics([NewTopic(f"alice-{suffix}-bob", 1, 1)])
                 [f"alice-{suffix}-bob"].result(30), f"{method}, bob creates a topic")
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    refused_with(KafkaError.TOPIC_AUTHORIZATION_FAILED,
                 lambda: bob_admin.describe_configs([resource])[resource].result(30),
                 f"{method}, bob describes configs")
    check(TOPIC not in bob_admin.list_topics(timeout=15).topics, f"{method}, bob's Metadata leaves the topic out")
    _, error = consume(bootstrap, bob, f"{GROUP}-{suffix}", ["-"])
    check(error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED,
          f"{method}, bob joins a group: GROUP_AUTHORIZATION_FAILED ({error})")

    def bob_transaction():
        Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{TRANSACTIONAL_ID}-{suffix}",
                  **bob}).init_transactions(20)
    refused_with(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, bob_transaction,
                 f"{method}, bob's transactional id")

    alice_admin = AdminClient({"bootstrap.servers": bootstrap, **alice})
    alice_admin.create_topics([NewTopic(f"alice-{suffix}", 1, 1)])[f"alice-{suffix}"].result(30)
    ok(f"{method}, alice creates alice-{suffix} (CREATE on the prefix alice-)")
    configs = alice_admin.describe_configs([resource])[resource].result(30)
    check("retention.ms" in configs, f"{method}, alice describes {TOPIC}'s configs")
    values = [f"{suffix}-{i}" for i in range(5)]
    for value in values:
        check(produce_error(bootstrap, alice, TOPIC, value.encode()) is None, f"{method}, alice produces {value}")
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{TRANSACTIONAL_ID}-{suffix}",
                              **alice})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    tx_values = [f"{suffix}-tx-{i}" for i in range(3)]
    for value in tx_values:
        transactional.produce(TOPIC, value=value.encode())
    transactional.commit_transaction(30)
    ok(f"{method}, alice commits a transaction")
    got, error = consume(bootstrap, alice, f"{GROUP}-{suffix}", values + tx_values)
    check(error is None and set(values + tx_values) <= got,
          f"{method}, alice consumes in her group, fetching and committing ({len(got)}, {error})")
    _, error = consume(bootstrap, alice, f"other-group-{suffix}", ["-"])
    check(error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED,
          f"{method}, alice in a group without an ACL: GROUP_AUTHORIZATION_FAILED ({error})")
    kcat_matrix(method, bootstrap, alice, bob, suffix)


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


def create_scram_users(bootstrap):
    """alice and bob as SCRAM users (both mechanisms), made by the super user."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("admin")})
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), USERS[user].encode())
                   for user in ("alice", "bob")]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(30)


def methods(ports, d):
    """(method, bootstrap, alice's settings, bob's settings) for each way to authenticate:
    each proves the same principals, User:alice and User:bob."""
    plain = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
    tls = f"127.0.0.1:{ports['SASL_SSL']}"
    ssl = f"127.0.0.1:{ports['SSL']}"
    ca = {"ssl.ca.location": os.path.join(d, "ca.pem")}

    def scram(mechanism, user):
        return {"security.protocol": "SASL_SSL", **ca, "sasl.mechanisms": mechanism,
                "sasl.username": user, "sasl.password": USERS[user]}

    def oauth(user):
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
                "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": f"principal={user}"}

    def certificate(name):
        return {"security.protocol": "SSL", **ca, "ssl.certificate.location": os.path.join(d, f"{name}.pem"),
                "ssl.key.location": os.path.join(d, f"{name}.plain.key")}

    return [
        ("SASL_PLAINTEXT PLAIN", plain, sasl("alice"), sasl("bob")),
        ("SASL_SSL SCRAM-SHA-256", tls, scram("SCRAM-SHA-256", "alice"), scram("SCRAM-SHA-256", "bob")),
        ("SASL_SSL SCRAM-SHA-512", tls, scram("SCRAM-SHA-512", "alice"), scram("SCRAM-SHA-512", "bob")),
        ("SASL_PLAINTEXT OAUTHBEARER", plain, oauth("alice"), oauth("bob")),
        ("SSL client certificate", ssl, certificate("client"), certificate("bob")),
    ]


def main():
    with tempfile.TemporaryDirectory() as d:
        certificates.make_certificates(d, "unused")
        certificates.make_client_certificate(d, "bob", "/O=Strand/CN=bob")
        ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
        users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
        plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                 f'username="admin" password="admin-secret" {users};')
        properties = one_node_properties(d, ports, [
            "transaction.state.log.replication.factor=1",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={d}/server-plain-keystore.pem",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={d}/ca.pem",
            "listener.name.ssl.ssl.client.auth=required",
            # CN=alice,O=Strand is User:alice, as the SASL users are.
            "ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,OAUTHBEARER",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={plain}",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config="
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
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
                ["--add", "--allow-principal", "User:alice", "--producer", "--topic", TOPIC],
                ["--add", "--allow-principal", "User:alice", "--consumer", "--topic", TOPIC, "--group", GROUP,
                 "--resource-pattern-type", "prefixed"],
                ["--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Describe",
                 "--transactional-id", TRANSACTIONAL_ID, "--resource-pattern-type", "prefixed"],
                ["--add", "--allow-principal", "User:alice", "--operation", "DescribeConfigs", "--topic", TOPIC],
                ["--add", "--allow-principal", "User:alice", "--operation", "Create", "--topic", "alice-",
                 "--resource-pattern-type", "prefixed"],
            ):
                result = kafka_acls(sasl_port, d, "admin", *args)
                check(result.returncode == 0, f"kafka-acls {' '.join(args[:6])} ... "
                                              f"({result.stderr.strip()[-500:]})")
            listed = kafka_acls(sasl_port, d, "admin", "--list", "--topic", TOPIC).stdout
            for operation in ("WRITE", "DESCRIBE", "CREATE", "DESCRIBE_CONFIGS"):
                check(f"principal=User:alice, host=*, operation={operation}, permissionType=ALLOW" in listed,
                      f"kafka-acls --list shows alice's {operation} on {TOPIC}")

            admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("admin")})
            admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
            create_scram_users(bootstrap)
            ok(f"the super user created {TOPIC} and SCRAM users alice and bob")
            for method, address, alice, bob in methods(ports, d):
                authorization_matrix(method, address, alice, bob)
            kafka_python(bootstrap)
            java_clients(sasl_port, d)
            if "--no-go" not in sys.argv:
                franz_go(bootstrap, d)

            anonymous = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
            check(TOPIC not in anonymous.list_topics(timeout=15).topics,
                  "librdkafka, an anonymous PLAINTEXT client: the topic is left out")

            removed = kafka_acls(sasl_port, d, "admin", "--remove", "--force", "--allow-principal", "User:alice",
                                 "--operation", "Write", "--topic", TOPIC)
            check(removed.returncode == 0, f"kafka-acls --remove ({removed.stderr.strip()[-300:]})")
            error = produce_error(bootstrap, sasl("alice"), TOPIC)
            check(error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
                  f"librdkafka, alice after her WRITE ACL is removed: TOPIC_AUTHORIZATION_FAILED ({error})")
    print("PASS acls")


if __name__ == "__main__":
    sys.exit(main())

"""Security as Kafka configures it, with real clients: one broker from a server.properties
with four listeners (PLAINTEXT, SSL with required client certificates, SASL_PLAINTEXT and
SASL_SSL with PLAIN), PEM stores made with openssl (the server key encrypted, with
ssl.key.password), and on SASL_SSL a keytool-made "JKS" key store (PKCS12 inside, as
keytool writes since Java 9), per listener. On every listener librdkafka (confluent-kafka) and kafka-python
produce and consume (franz-go's, KafkaJS's and Sarama's whole drivers on SSL and SASL
listeners, PLAIN and SCRAM; Sarama also with SaslHandshake v0's bare tokens), and Metadata names the listener's own port (a client that bootstraps
on a SASL port and is sent to another listener's port cannot authenticate there). Kafka's
own Java tools (kafka-topics, console producer and consumer with --command-config) do the
same over SASL_SSL and SSL. A wrong password fails with Kafka's message; a client without
a certificate is refused on the SSL listener. SCRAM-SHA-256 and SCRAM-SHA-512: users are
created with AlterUserScramCredentials (librdkafka's admin client, and Kafka's
kafka-configs --entity-type users), described, refused below 4096 iterations, and
authenticate librdkafka, kafka-python and the Java tools.

Runs its own broker (STRAND_BIN, default target/release/strand); the Java part needs the
jars of interop/kafka/fetch.sh.
"""
import os
import subprocess
import sys
import tempfile

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

import certificates
from broker_process import broker_from, free_port, one_node_properties
from dataset import check, fail, ok
from librdkafka_round_trip import authentication_error, produce_and_consume

HERE = os.path.dirname(os.path.abspath(__file__))
KAFKA_CLI = os.path.join(HERE, "../kafka/kafka-cli.sh")
KEY_PASSWORD = "key-secret"
USERS = {"admin": "admin-secret", "alice": "alice-secret"}



def jaas(users):
    entries = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="admin-secret" {entries};')


SCRAM_USERS = {"carol": "carol-secret", "dave": "dave-secret"}


def client_settings(protocol, d, user="alice", password=None, certificate=True, mechanism="PLAIN"):
    """librdkafka settings for a listener's protocol."""
    settings = {"security.protocol": protocol}
    if "SSL" in protocol:
        settings["ssl.ca.location"] = os.path.join(d, "ca.pem")
        if protocol == "SSL" and certificate:
            settings["ssl.certificate.location"] = os.path.join(d, "client.pem")
            settings["ssl.key.location"] = os.path.join(d, "client.key")
            settings["ssl.key.password"] = KEY_PASSWORD
    if "SASL" in protocol:
        known = {**USERS, **SCRAM_USERS}
        settings.update({"sasl.mechanisms": mechanism, "sasl.username": user,
                         "sasl.password": password if password is not None else known[user]})
    return settings


def kafka_python_settings(protocol, d, mechanism="PLAIN", user="alice"):
    settings = {"security_protocol": protocol}
    if "SSL" in protocol:
        settings["ssl_cafile"] = os.path.join(d, "ca.pem")
        if protocol == "SSL":
            settings.update({"ssl_certfile": os.path.join(d, "client.pem"),
                             "ssl_keyfile": os.path.join(d, "client.key"), "ssl_password": KEY_PASSWORD})
    if "SASL" in protocol:
        known = {**USERS, **SCRAM_USERS}
        settings.update({"sasl_mechanism": mechanism, "sasl_plain_username": user,
                         "sasl_plain_password": known[user]})
    return settings


def librdkafka_round_trip(name, port, protocol, d, **credentials):
    bootstrap = f"127.0.0.1:{port}"
    settings = client_settings(protocol, d, **credentials)
    admin = AdminClient({"bootstrap.servers": bootstrap, **settings})
    brokers = admin.list_topics(timeout=15).brokers
    check([b.port for b in brokers.values()] == [port],
          f"librdkafka on {name}: Metadata names the {name} port ({[str(b) for b in brokers.values()]})")
    topic = f"sec-rdkafka-{name.lower()}-{credentials.get('mechanism', 'default').lower()}"
    produce_and_consume(f"librdkafka on {name}", bootstrap, settings, topic, 20)


def kafka_python_round_trip(name, port, protocol, d, **credentials):
    from kafka import KafkaConsumer, KafkaProducer
    bootstrap = f"127.0.0.1:{port}"
    settings = kafka_python_settings(protocol, d, **credentials)
    topic = f"sec-kpy-{name.lower()}-{credentials.get('mechanism', 'default').lower()}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **settings)
    for i in range(10):
        producer.send(topic, value=f"{name}-{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             group_id=f"g-{topic}", consumer_timeout_ms=15000, **settings)
    got = []
    for message in consumer:  # ends after consumer_timeout_ms without records
        got.append(message.value.decode())
        if len(got) == 10:
            break
    consumer.close()
    check(sorted(got) == sorted(f"{name}-{i}" for i in range(10)),
          f"kafka-python on {name}: 10 records produced and consumed ({len(got)})")


def librdkafka_authentication_error(port, d, **credentials):
    """The error librdkafka reports for a client that cannot authenticate."""
    return authentication_error(f"127.0.0.1:{port}", client_settings("SASL_PLAINTEXT", d, **credentials))


def wrong_password_fails(port, d):
    text = librdkafka_authentication_error(port, d, password="guess")
    check("Authentication failed: Invalid username or password" in text,
          f"librdkafka, wrong password: Kafka's message ({text[:300]})")

    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    try:
        KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="guess",
                      request_timeout_ms=5000, max_block_ms=5000)
        fail("kafka-python with a wrong password connected")
    except KafkaError as error:
        ok(f"kafka-python, wrong password: refused ({type(error).__name__})")


def scram_users(port, d):
    """Creates carol (both mechanisms) and dave (SCRAM-SHA-512) through the PLAINTEXT
    listener, checks Kafka's answers, then SCRAM authenticates."""
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    upserts = [
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                     b"carol-secret"),
        UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                     b"dave-secret"),
    ]
    for user, future in admin.alter_user_scram_credentials(upserts).items():
        future.result(15)
    ok("AlterUserScramCredentials: carol (SCRAM-SHA-256, 8192) and dave (SCRAM-SHA-512, 4096)")
    future = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-secret")])["carol"]
    future.result(15)
    described = admin.describe_user_scram_credentials().result(15)
    infos = {user: sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos)
             for user, d in described.items()}
    check(infos == {"carol": [("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 8192)],
                    "dave": [("SCRAM_SHA_512", 4096)]},
          f"DescribeUserScramCredentials lists each user's mechanisms and iterations ({infos})")
    try:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"x")])["erin"].result(15)
        fail("1000 iterations were accepted")
    except KafkaException as error:
        check("Too few iterations" in str(error), f"below 4096 iterations: Kafka's refusal ({error})")
    try:
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            "erin", ScramMechanism.SCRAM_SHA_256)])["erin"].result(15)
        fail("deleting a credential that does not exist succeeded")
    except KafkaException as error:
        check("does not exist" in str(error), f"deleting what does not exist: Kafka's refusal ({error})")
    try:
        admin.describe_user_scram_credentials(["erin"])["erin"].result(15)
        fail("describing a user without credentials succeeded")
    except KafkaException as error:
        check("Attempt to describe a user credential that does not exist: erin" in str(error),
              f"describing a user without credentials ({error})")


def scram_wrong_password_fails(port, d):
    text = librdkafka_authentication_error(port, d, user="carol", password="guess", mechanism="SCRAM-SHA-256")
    check("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
          in text, f"librdkafka, wrong SCRAM password: Kafka's message ({text[:300]})")


def ssl_needs_a_certificate(port, d):
    errors = []
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                         **client_settings("SSL", d, certificate=False),
                         "error_cb": lambda e: errors.append(e)})
    try:
        admin.list_topics(timeout=5)
        fail("a client without a certificate lists topics on the SSL listener")
    except KafkaException:
        ok(f"librdkafka without a client certificate: refused ({' '.join(str(e) for e in errors)[:200]})")


def franz_go(name, port, d, **env):
    """interop/go's whole franz-go driver (admin, every codec, fetches, offsets) over a
    listener."""
    driver_over(os.path.join(HERE, "../go/run.sh"), "franz-go", "all checks passed", name, port, d, **env)


def kafkajs(name, port, d, **env):
    """interop/js's whole KafkaJS driver (admin, codecs, groups, transactions) over a
    listener."""
    driver_over(os.path.join(HERE, "../js/run.sh"), "KafkaJS", "all checks passed", name, port, d, **env)


def sarama(name, port, d, **env):
    """interop/sarama's whole Sarama driver (at its newest Kafka version) over a listener."""
    driver_over(os.path.join(HERE, "../sarama/run.sh"), "Sarama", "all checks passed", name, port, d, **env)


def driver_over(driver, client, passed, name, port, d, **env):
    result = subprocess.run([driver], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "STRAND_BOOTSTRAP": f"127.0.0.1:{port}",
                                 "STRAND_SECURITY_PROTOCOL": name, "STRAND_SSL_CA": os.path.join(d, "ca.pem"),
                                 **env})
    check(result.returncode == 0 and passed in result.stdout,
          f"{client} driver over {name} {env.get('STRAND_SASL_MECHANISM', '')} "
          f"({(result.stdout.strip().splitlines() or ['no output'])[-1]} {result.stderr.strip()[-300:] if result.returncode else ''})")


def java_tools(ports, d):
    if not os.path.exists(os.path.join(os.path.expanduser("~"), ".cache/strand")):
        fail("Kafka's jars are missing (interop/kafka/fetch.sh)")
    configs = {
        "SASL_SSL": [
            "security.protocol=SASL_SSL",
            "sasl.mechanism=PLAIN",
            'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="alice" password="alice-secret";',
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={d}/ca.pem",
        ],
        "SSL": [
            "security.protocol=SSL",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={d}/ca.pem",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={d}/client-keystore.pem",
            f"ssl.key.password={KEY_PASSWORD}",
        ],
    }
    # kafka-configs: one mechanism per command. Both in one command is one request
    # altering the user twice, which Kafka 4.4 refuses (DUPLICATE_RESOURCE), and so does
    # Strand.
    def configs_tool(*args):
        return subprocess.run([KAFKA_CLI, "kafka-configs", "--bootstrap-server", f"127.0.0.1:{ports['PLAINTEXT']}",
                               *args], capture_output=True, text=True, timeout=120)

    both = configs_tool("--alter", "--add-config",
                        "SCRAM-SHA-256=[iterations=8192,password=frank-secret],SCRAM-SHA-512=[password=frank-secret]",
                        "--entity-type", "users", "--entity-name", "frank")
    check(both.returncode != 0 and "A user credential cannot be altered twice in the same request" in both.stderr,
          "kafka-configs with two mechanisms in one command: refused as Kafka 4.4 refuses it")
    for config in ("SCRAM-SHA-256=[iterations=8192,password=frank-secret]", "SCRAM-SHA-512=[password=frank-secret]"):
        result = configs_tool("--alter", "--add-config", config, "--entity-type", "users", "--entity-name", "frank")
        check(result.returncode == 0, f"kafka-configs --alter --add-config {config.split('=')[0]}=[...] "
                                      f"({result.stdout.strip()} {result.stderr.strip()[-500:]})")
    # (kafka-configs --describe --entity-type users also asks DescribeClientQuotas, which
    # comes with quotas; the credentials are described through librdkafka above.)
    configs["SASL_SSL-SCRAM"] = [
        "security.protocol=SASL_SSL",
        "sasl.mechanism=SCRAM-SHA-512",
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="frank" password="frank-secret";',
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={d}/ca.pem",
    ]
    ports = {**ports, "SASL_SSL-SCRAM": ports["SASL_SSL"]}
    for name, lines in configs.items():
        path = os.path.join(d, f"java-{name}.properties")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        bootstrap = f"127.0.0.1:{ports[name]}"
        topic = f"sec-java-{name.lower()}"

        def tool(*args, stdin=None):
            result = subprocess.run([KAFKA_CLI, *args], input=stdin, capture_output=True, text=True, timeout=120)
            if result.returncode != 0:
                fail(f"{args[0]} on {name}: " + "\n".join(l for l in result.stderr.splitlines() if "Caused by" in l or "Exception" in l)[:3000])
            return result.stdout

        tool("kafka-topics", "--bootstrap-server", bootstrap, "--command-config", path, "--create",
             "--topic", topic, "--partitions", "2")
        listed = tool("kafka-topics", "--bootstrap-server", bootstrap, "--command-config", path, "--list")
        check(topic in listed.split(), f"kafka-topics over {name}: created and listed")
        tool("kafka-console-producer", "--bootstrap-server", bootstrap, "--command-config", path,
             "--topic", topic, stdin="".join(f"java-{i}\n" for i in range(5)))
        consumed = tool("kafka-console-consumer", "--bootstrap-server", bootstrap, "--command-config", path,
                        "--topic", topic, "--from-beginning", "--max-messages", "5", "--timeout-ms", "30000")
        check(sorted(consumed.split()) == [f"java-{i}" for i in range(5)],
              f"Java console producer and consumer over {name} ({consumed.split()})")


def main():
    with tempfile.TemporaryDirectory() as d:
        certificates.make_certificates(d, KEY_PASSWORD)
        # The SASL_SSL listener serves a keytool-made key store, as Kafka operators have them.
        certificates.make_keytool_keystore(d, KEY_PASSWORD)
        ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
        properties = one_node_properties(d, ports, [
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={d}/server-keystore.pem",
            f"ssl.key.password={KEY_PASSWORD}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={d}/ca.pem",
            "listener.name.ssl.ssl.client.auth=required",
            "listener.name.sasl_ssl.ssl.keystore.type=JKS",
            f"listener.name.sasl_ssl.ssl.keystore.location={d}/server.keystore.jks",
            f"listener.name.sasl_ssl.ssl.keystore.password={KEY_PASSWORD}",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas(USERS)}",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas(USERS)}",
        ])
        with broker_from(properties, d):
            ok(f"one broker, four listeners: {ports}")
            for name, port in ports.items():
                librdkafka_round_trip(name, port, name, d)
            for name, port in ports.items():
                kafka_python_round_trip(name, port, name, d)
            wrong_password_fails(ports["SASL_PLAINTEXT"], d)
            scram_users(ports["PLAINTEXT"], d)
            for mechanism, user in (("SCRAM-SHA-256", "carol"), ("SCRAM-SHA-512", "carol"), ("SCRAM-SHA-512", "dave")):
                librdkafka_round_trip("SASL_SSL", ports["SASL_SSL"], "SASL_SSL", d, mechanism=mechanism, user=user)
            kafka_python_round_trip("SASL_PLAINTEXT", ports["SASL_PLAINTEXT"], "SASL_PLAINTEXT", d,
                                    mechanism="SCRAM-SHA-256", user="carol")
            scram_wrong_password_fails(ports["SASL_PLAINTEXT"], d)
            if "--no-go" not in sys.argv:
                franz_go("SASL_SSL", ports["SASL_SSL"], d, STRAND_SASL_MECHANISM="SCRAM-SHA-512",
                         STRAND_SASL_USER="carol", STRAND_SASL_PASSWORD=SCRAM_USERS["carol"])
                franz_go("SASL_PLAINTEXT", ports["SASL_PLAINTEXT"], d, STRAND_SASL_MECHANISM="PLAIN",
                         STRAND_SASL_USER="alice", STRAND_SASL_PASSWORD=USERS["alice"])
                franz_go("SSL", ports["SSL"], d, STRAND_SSL_CERT=os.path.join(d, "client.pem"),
                         STRAND_SSL_KEY=os.path.join(d, "client.plain.key"))
            if "--no-js" not in sys.argv:
                kafkajs("SASL_SSL", ports["SASL_SSL"], d, STRAND_SASL_MECHANISM="SCRAM-SHA-256",
                        STRAND_SASL_USER="carol", STRAND_SASL_PASSWORD=SCRAM_USERS["carol"])
                kafkajs("SSL", ports["SSL"], d, STRAND_SSL_CERT=os.path.join(d, "client.pem"),
                        STRAND_SSL_KEY=os.path.join(d, "client.plain.key"))
            if "--no-sarama" not in sys.argv:
                sarama("SASL_SSL", ports["SASL_SSL"], d, STRAND_SASL_USER="alice", STRAND_SASL_PASSWORD=USERS["alice"])
                # Sarama's older framing: bare tokens after SaslHandshake v0.
                sarama("SASL_PLAINTEXT", ports["SASL_PLAINTEXT"], d, STRAND_SASL_USER="alice",
                       STRAND_SASL_PASSWORD=USERS["alice"], STRAND_SASL_HANDSHAKE="0")
            ssl_needs_a_certificate(ports["SSL"], d)
            if "--no-java" not in sys.argv:
                java_tools(ports, d)
    print("PASS security")


if __name__ == "__main__":
    sys.exit(main())

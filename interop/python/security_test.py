"""Security as Kafka configures it, with real clients: one broker from a server.properties
with four listeners (PLAINTEXT, SSL with required client certificates, SASL_PLAINTEXT and
SASL_SSL with PLAIN), PEM stores made with openssl (the server key encrypted, with
ssl.key.password). On every listener librdkafka (confluent-kafka) and kafka-python
produce and consume, and Metadata names the listener's own port (a client that bootstraps
on a SASL port and is sent to another listener's port cannot authenticate there). Kafka's
own Java tools (kafka-topics, console producer and consumer with --command-config) do the
same over SASL_SSL and SSL. A wrong password fails with Kafka's message; a client without
a certificate is refused on the SSL listener.

Runs its own broker (STRAND_BIN, default target/release/strand); the Java part needs the
jars of interop/kafka/fetch.sh.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from dataset import check, fail, ok

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("STRAND_BIN", os.path.join(HERE, "../../target/release/strand"))
KAFKA_CLI = os.path.join(HERE, "../kafka/kafka-cli.sh")
KEY_PASSWORD = "key-secret"
USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(d):
    """A CA, the broker's certificate (localhost and 127.0.0.1) and a client's (CN=alice),
    keys as encrypted PKCS#8 as Kafka's PEM stores hold them."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=Strand Interop CA", cwd=d)
    # X.509 v3 certificates (extensions make them v3): rustls, as browsers, refuses v1.
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    for name, subject in (("server", "/CN=localhost"), ("client", "/O=Strand/CN=alice")):
        extension = ["-extfile", f"{name}.ext"]
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.plain.key", "-out", f"{name}.csr",
                "-subj", subject, cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", *extension, cwd=d)
        # The broker's key with PBES2 (AES-256); the client's with PKCS#12's 3DES, the one
        # Java 17's PEM stores can decrypt (its JCE has no PBES2 key factory).
        cipher = ["-v2", "aes-256-cbc"] if name == "server" else ["-v1", "PBE-SHA1-3DES"]
        openssl("pkcs8", "-topk8", *cipher, "-in", f"{name}.plain.key", "-out", f"{name}.key",
                "-passout", f"pass:{KEY_PASSWORD}", cwd=d)
        # Kafka's PEM key store: the key, then the certificate chain, in one file.
        with open(os.path.join(d, f"{name}-keystore.pem"), "w") as out:
            out.write(open(os.path.join(d, f"{name}.key")).read())
            out.write(open(os.path.join(d, f"{name}.pem")).read())


def jaas(users):
    entries = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="admin-secret" {entries};')


def client_settings(protocol, d, user="alice", password=None, certificate=True):
    """librdkafka settings for a listener's protocol."""
    settings = {"security.protocol": protocol}
    if "SSL" in protocol:
        settings["ssl.ca.location"] = os.path.join(d, "ca.pem")
        if protocol == "SSL" and certificate:
            settings["ssl.certificate.location"] = os.path.join(d, "client.pem")
            settings["ssl.key.location"] = os.path.join(d, "client.key")
            settings["ssl.key.password"] = KEY_PASSWORD
    if "SASL" in protocol:
        settings.update({"sasl.mechanisms": "PLAIN", "sasl.username": user,
                         "sasl.password": password if password is not None else USERS[user]})
    return settings


def kafka_python_settings(protocol, d):
    settings = {"security_protocol": protocol}
    if "SSL" in protocol:
        settings["ssl_cafile"] = os.path.join(d, "ca.pem")
        if protocol == "SSL":
            settings.update({"ssl_certfile": os.path.join(d, "client.pem"),
                             "ssl_keyfile": os.path.join(d, "client.key"), "ssl_password": KEY_PASSWORD})
    if "SASL" in protocol:
        settings.update({"sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
                         "sasl_plain_password": USERS["alice"]})
    return settings


def librdkafka_round_trip(name, port, protocol, d):
    bootstrap = f"127.0.0.1:{port}"
    settings = client_settings(protocol, d)
    admin = AdminClient({"bootstrap.servers": bootstrap, **settings})
    brokers = admin.list_topics(timeout=15).brokers
    check([b.port for b in brokers.values()] == [port],
          f"librdkafka on {name}: Metadata names the {name} port ({[str(b) for b in brokers.values()]})")
    topic = f"sec-rdkafka-{name.lower()}"
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **settings})
    for i in range(20):
        producer.produce(topic, key=str(i).encode(), value=f"{name}-{i}".encode())
    check(producer.flush(30) == 0, f"librdkafka on {name}: 20 records produced")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", **settings})
    consumer.subscribe([topic])
    got = []
    deadline = time.time() + 30
    while len(got) < 20 and time.time() < deadline:
        message = consumer.poll(1)
        if message is None:
            continue
        if message.error():
            fail(f"librdkafka on {name}: {message.error()}")
        got.append(message.value().decode())
    consumer.commit(asynchronous=False)
    consumer.close()
    check(sorted(got) == sorted(f"{name}-{i}" for i in range(20)),
          f"librdkafka on {name}: the 20 records consumed in a group ({len(got)})")


def kafka_python_round_trip(name, port, protocol, d):
    from kafka import KafkaConsumer, KafkaProducer
    bootstrap = f"127.0.0.1:{port}"
    settings = kafka_python_settings(protocol, d)
    topic = f"sec-kpy-{name.lower()}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **settings)
    for i in range(10):
        producer.send(topic, value=f"{name}-{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             group_id=f"g-{topic}", consumer_timeout_ms=15000, **settings)
    got = [m.value.decode() for m in consumer]
    consumer.close()
    check(sorted(got) == sorted(f"{name}-{i}" for i in range(10)),
          f"kafka-python on {name}: 10 records produced and consumed ({len(got)})")


def wrong_password_fails(port, d):
    errors = []
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                         **client_settings("SASL_PLAINTEXT", d, password="guess"),
                         "error_cb": lambda e: errors.append(e)})
    try:
        admin.list_topics(timeout=5)
        fail("a wrong password still lists topics")
    except KafkaException:
        pass
    deadline = time.time() + 10
    while not errors and time.time() < deadline:
        admin.poll(0.2)
    text = " ".join(str(e) for e in errors)
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
        make_certificates(d)
        ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
        controller = free_port()
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
        properties = os.path.join(d, "server.properties")
        with open(properties, "w") as f:
            f.write("\n".join([
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{controller}",
                f"listeners={listeners},CONTROLLER://127.0.0.1:{controller}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
                "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
                f"log.dirs={d}/logs",
                "offsets.topic.replication.factor=1",
                "ssl.keystore.type=PEM",
                f"ssl.keystore.location={d}/server-keystore.pem",
                f"ssl.key.password={KEY_PASSWORD}",
                "ssl.truststore.type=PEM",
                f"ssl.truststore.location={d}/ca.pem",
                "listener.name.ssl.ssl.client.auth=required",
                "sasl.enabled.mechanisms=PLAIN",
                f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas(USERS)}",
                f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas(USERS)}",
            ]) + "\n")
        log_path = os.path.join(d, "broker.log")
        with open(log_path, "w") as log:
            broker = subprocess.Popen([BIN, "serve", "--config", properties], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 30
            while "listening on" not in open(log_path).read():
                if time.time() > deadline or broker.poll() is not None:
                    fail(f"the broker did not start: {open(log_path).read()[-2000:]}")
                time.sleep(0.2)
            ok(f"one broker, four listeners: {ports}")
            for name, port in ports.items():
                librdkafka_round_trip(name, port, name, d)
            for name, port in ports.items():
                kafka_python_round_trip(name, port, name, d)
            wrong_password_fails(ports["SASL_PLAINTEXT"], d)
            ssl_needs_a_certificate(ports["SSL"], d)
            if "--no-java" not in sys.argv:
                java_tools(ports, d)
        finally:
            broker.terminate()
            code = broker.wait(30)
        check(code == 0, f"the broker stopped cleanly ({code})")
        check("panicked" not in open(log_path).read(), "no panic in the broker log")
    print("PASS security")


if __name__ == "__main__":
    sys.exit(main())

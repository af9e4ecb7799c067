#!/usr/bin/env python3
"""An authenticated cluster, configured as Kafka's server.properties configures one:
three nodes whose controller listener is SSL (the quorum over mutual TLS), whose
inter-broker listener is SASL_SSL (brokers log in to each other with
sasl.mechanism.inter.broker.protocol) and whose clients come in on another SASL_SSL
listener, with ACLs on and only `User:admin` and the brokers' own user as super users.

- The nodes form the quorum and register; an RF=3 topic with min.insync.replicas=2 takes
  acks=all writes from an idempotent librdkafka producer and every replica joins the ISR,
  which needs followers that fetch over TLS and authenticate as the brokers' user (with
  ACLs on, anyone else is refused CLUSTER_ACTION). Everything is read back, also after the
  leader of a partition is killed.
- With SSL between brokers (--inter-broker-mechanism SSL), they authenticate by their
  certificates instead (ssl.client.auth=required; principal User:broker by the mapping
  rules), and a peer without a certificate is refused.
- With SCRAM-SHA-512 between brokers (--inter-broker-mechanism), the brokers' credential
  is created with AlterUserScramCredentials after the cluster formed: replication starts
  once it is in the metadata log.
- A fourth node whose certificate another CA signed never joins: the members refuse its
  TLS handshake, so it neither registers nor receives the metadata log. A client without a
  certificate is refused by the quorum port too, and so is a client certificate of the
  cluster's own CA (User:alice is not a super user); a peer with a wrong password is refused
  by the inter-broker listener.
- The inter-broker listener ends SASL sessions after connections.max.reauth.ms (5 s): the
  followers' connections are replaced before their sessions end, and the ISR stays full.
"""

import argparse
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "../python"))
from certificates import make_authority, make_certificates, make_node_certificate  # noqa: E402
from cluster import fail, free_port, log, until  # noqa: E402

BIN = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
COUNT = 3000
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
BROKER_SECRET = "broker-secret"


def properties(d, node, ports, voters, mechanism, keystore, truststore, roles="broker,controller"):
    internal, client, controller = ports
    listeners = [f"INTERNAL://127.0.0.1:{internal}", f"CLIENT://127.0.0.1:{client}",
                 f"CONTROLLER://127.0.0.1:{controller}"]
    mapping = "RULE:^CN=([^,]+),O=Strand$/$1/,DEFAULT"
    if mechanism == "SSL":
        # Brokers authenticate to each other by their certificates (User:broker).
        inter_broker = ["INTERNAL:SSL", "listener.name.internal.ssl.client.auth=required",
                    f"listener.name.internal.ssl.principal.mapping.rules={mapping}"]
    else:
        if mechanism == "PLAIN":
            internal_jaas = (f'{PLAIN_MODULE} required username="broker" password="{BROKER_SECRET}" '
                             f'user_broker="{BROKER_SECRET}";')
        else:
            internal_jaas = f'{SCRAM_MODULE} required username="broker" password="{BROKER_SECRET}";'
        inter_broker = ["INTERNAL:SASL_SSL",
                    f"listener.name.internal.sasl.enabled.mechanisms={mechanism}",
                    f"sasl.mechanism.inter.broker.protocol={mechanism}",
                    f"listener.name.internal.{mechanism.lower()}.sasl.jaas.config={internal_jaas}",
                    "listener.name.internal.connections.max.reauth.ms=5000"]
    lines = [
        f"process.roles={roles}",
        f"node.id={node}",
        f"controller.quorum.voters={voters}",
        f"listeners={','.join(listeners)}",
        f"advertised.listeners=INTERNAL://127.0.0.1:{internal},CLIENT://127.0.0.1:{client}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=INTERNAL",
        f"listener.security.protocol.map={inter_broker[0]},CLIENT:SASL_SSL,CONTROLLER:SSL",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={truststore}",
        # Node certificates say O=Strand,CN=broker: the brokers' principal, a super user
        # (with ACLs on, the quorum admits super users only).
        f"listener.name.controller.ssl.principal.mapping.rules={mapping}",
        *inter_broker[1:],
        "listener.name.client.sasl.enabled.mechanisms=PLAIN",
        f'listener.name.client.plain.sasl.jaas.config={PLAIN_MODULE} required user_admin="admin-secret";',
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin;User:broker",
        f"log.dirs={d}/n{node}",
        "offsets.topic.replication.factor=3",
        "transaction.state.log.replication.factor=3",
    ]
    path = os.path.join(d, f"n{node}.properties")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def client_settings(d, bootstrap):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": os.path.join(d, "ca.pem"), "sasl.mechanisms": "PLAIN",
            "sasl.username": "admin", "sasl.password": "admin-secret", "log_level": 2}


def start(d, node, path):
    out = open(os.path.join(d, f"n{node}.log"), "a")
    env = dict(os.environ, STRAND_LOG=os.environ.get("STRAND_LOG", "info,openraft=off"))
    return subprocess.Popen([BIN, "serve", "--config", path], stdout=out, stderr=out, env=env)


def quorum_refuses(d, port, certificate=None):
    """A client of the quorum port without a certificate, or with `certificate` (a name of
    the test CA's certificates), is refused."""
    who = f"a client with the certificate {certificate}" if certificate else "a client without a certificate"
    context = ssl.create_default_context(cafile=os.path.join(d, "ca.pem"))
    if certificate:
        context.load_cert_chain(os.path.join(d, f"{certificate}.pem"), os.path.join(d, f"{certificate}.plain.key"))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"\x00\x00\x00\x02{}")
                answer = tls.recv(4)
    except (ssl.SSLError, ConnectionError, socket.timeout) as error:
        log(f"the quorum port refused {who}: {error.__class__.__name__}")
        return
    if answer:
        fail(f"the quorum port answered {who}: {answer!r}")
    log(f"the quorum port closed the connection of {who}")


def produce(producer, topic, first, count):
    acked = []
    failed = []

    def report(error, message):
        (failed if error else acked).append(error or message.offset())

    for n in range(first, first + count):
        producer.produce(topic, key=str(n).encode(), value=f"v{n}".encode(), callback=report)
        if n % 500 == 0:
            producer.poll(0)
    producer.flush(120)
    if failed or len(acked) != count:
        fail(f"{len(acked)} of {count} acknowledged; failures: {failed[:3]}")


def read_all(settings, topic, partitions, expected):
    consumer = Consumer(dict(settings, **{"group.id": f"reader-{time.time()}", "auto.offset.reset": "earliest",
                                          "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = set()
    deadline = time.time() + 90
    while len(seen) < expected and time.time() < deadline:
        message = consumer.poll(1)
        if message is None or message.error():
            continue
        seen.add(int(message.key()))
    consumer.close()
    if len(seen) != expected:
        fail(f"read {len(seen)} distinct records of {expected}")


def inter_broker_listener_refuses_a_peer_without_credentials(d, port, mechanism):
    """A wrong password (SASL), or no certificate (SSL with ssl.client.auth=required)."""
    from confluent_kafka import KafkaError
    errors = []
    if mechanism == "SSL":
        credentials, what = {"security.protocol": "SSL"}, "without a certificate"
    else:
        credentials = {"security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism,
                       "sasl.username": "broker", "sasl.password": "guess"}
        what = "with a wrong password"
    def refused(error):
        # librdkafka reports TLS's "certificate required" alert as a transport error.
        return error.code() == KafkaError._AUTHENTICATION or "certificate required" in error.str()

    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "ssl.ca.location": os.path.join(d, "ca.pem"),
                         **credentials, "group.id": "intruder", "log_level": 0, "error_cb": errors.append})
    deadline = time.time() + 15
    while time.time() < deadline and not any(refused(e) for e in errors):
        consumer.poll(0.5)
    consumer.close()
    if not any(refused(e) for e in errors):
        fail(f"a peer {what} on the inter-broker listener was not refused: {errors[:3]}")
    log(f"the inter-broker listener refuses a peer {what}")


def full_isr(admin, topic, partitions):
    described = admin.list_topics(topic, timeout=10).topics[topic].partitions
    return len(described) == partitions and all(len(p.isrs) == 3 for p in described.values())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inter-broker-mechanism", default="PLAIN", choices=["PLAIN", "SCRAM-SHA-512", "SSL"],
                        help="SASL between brokers, or SSL: their certificates (ssl.client.auth=required)")
    mechanism = parser.parse_args().inter_broker_mechanism
    d = tempfile.mkdtemp(prefix="strand-secure-cluster-")
    make_certificates(d, "unused")
    for node in (1, 2, 3):
        make_node_certificate(d, f"node{node}", "/O=Strand/CN=broker")
    make_authority(d, "stranger-ca")
    make_node_certificate(d, "node4", "/O=Strand/CN=broker", ca="stranger-ca")
    with open(os.path.join(d, "both-cas.pem"), "w") as f:
        f.write(open(os.path.join(d, "ca.pem")).read() + open(os.path.join(d, "stranger-ca.pem")).read())
    ports = {node: (free_port(), free_port(), free_port()) for node in (1, 2, 3, 4)}
    voters = ",".join(f"{node}@127.0.0.1:{ports[node][2]}" for node in (1, 2, 3))
    procs = {}
    try:
        for node in (1, 2, 3):
            path = properties(d, node, ports[node], voters, mechanism, os.path.join(d, f"node{node}-keystore.pem"),
                              os.path.join(d, "ca.pem"))
            procs[node] = start(d, node, path)
        bootstrap = ",".join(f"127.0.0.1:{ports[node][1]}" for node in (1, 2, 3))
        settings = client_settings(d, bootstrap)
        admin = AdminClient(settings)
        until("three registered brokers", lambda: sorted(admin.list_topics(timeout=5).brokers) == [1, 2, 3])
        between = "SSL with client certificates" if mechanism == "SSL" else f"SASL_SSL with {mechanism}"
        log(f"three nodes formed the quorum over mutual TLS (inter-broker {between})")
        if mechanism.startswith("SCRAM"):
            upsert = UserScramCredentialUpsertion("broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                                  BROKER_SECRET.encode())
            for future in admin.alter_user_scram_credentials([upsert]).values():
                future.result(30)
            log("the brokers' SCRAM-SHA-512 credential is in the metadata log")
        topic = "secured"
        admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
        producer = Producer(dict(settings, **{"acks": "all", "enable.idempotence": True}))
        produce(producer, topic, 0, COUNT)
        log(f"{COUNT} records acknowledged by acks=all with min.insync.replicas=2")
        until("every replica in the ISR", lambda: full_isr(admin, topic, 3))
        log(f"every partition's ISR holds all three brokers: followers fetch over {between} as User:broker")
        read_all(settings, topic, 3, COUNT)
        log(f"read all {COUNT} records back")

        quorum_refuses(d, ports[1][2])
        # alice's certificate (CN=alice, the cluster's CA): trusted, but not a super user.
        quorum_refuses(d, ports[1][2], certificate="client")
        inter_broker_listener_refuses_a_peer_without_credentials(d, ports[1][0], mechanism)
        if mechanism != "SSL":
            # Past the sessions' lifetime (5 s): replication went on over new connections.
            time.sleep(6)
            if not full_isr(admin, topic, 3):
                fail("the ISR shrank across the inter-broker sessions' lifetime")
            log("past the inter-broker sessions' lifetime the ISR is full")
        produce(producer, topic, COUNT, 10)
        stranger = properties(d, 4, ports[4], voters, mechanism, os.path.join(d, "node4-keystore.pem"),
                              os.path.join(d, "both-cas.pem"), roles="broker")
        procs[4] = start(d, 4, stranger)
        time.sleep(8)
        brokers = sorted(admin.list_topics(timeout=5).brokers)
        if brokers != [1, 2, 3]:
            fail(f"a node with a stranger's certificate joined: brokers {brokers}")
        refusals = sum(open(os.path.join(d, f"n{node}.log")).read().count("TLS handshake failed")
                       for node in (1, 2, 3))
        if refusals == 0:
            fail("no member logged refusing the stranger's handshake")
        log(f"a node with another CA's certificate never registered (members refused {refusals} handshakes)")
        procs.pop(4).kill()

        leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        procs[leader].send_signal(signal.SIGKILL)
        procs[leader].wait(10)
        log(f"killed node {leader}, the leader of {topic}-0")
        produce(producer, topic, COUNT + 10, 500)
        read_all(settings, topic, 3, COUNT + 510)
        log(f"after the kill: 500 more acknowledged and all {COUNT + 510} read back")
        procs[leader] = start(d, leader, os.path.join(d, f"n{leader}.properties"))
        until("the restarted node back in every ISR", lambda: full_isr(admin, topic, 3), timeout=90)
        log(f"node {leader} restarted and caught up over {between}")
    finally:
        for proc in procs.values():
            proc.kill()
    for node in (1, 2, 3, 4):
        path = os.path.join(d, f"n{node}.log")
        if os.path.exists(path) and "panicked" in open(path).read():
            fail(f"node {node} panicked; logs in {d}")
    log("PASS")


if __name__ == "__main__":
    main()

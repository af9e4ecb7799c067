"""One librdkafka (confluent-kafka) round trip, for the drivers that try it over each
listener and mechanism: `count` records produced with acks=all, then consumed in a group
and committed."""
import time

from confluent_kafka import Consumer, Producer

from dataset import check, fail


def produce_and_consume(name, bootstrap, settings, topic, count):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **settings})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=f"{name}-{i}".encode())
    check(producer.flush(30) == 0, f"{name}: {count} records produced")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", **settings})
    consumer.subscribe([topic])
    got = []
    deadline = time.time() + 30
    while len(got) < count and time.time() < deadline:
        message = consumer.poll(1)
        if message is None:
            continue
        if message.error():
            fail(f"{name}: {message.error()}")
        got.append(message.value().decode())
    consumer.commit(asynchronous=False)
    consumer.close()
    check(sorted(got) == sorted(f"{name}-{i}" for i in range(count)),
          f"{name}: the {count} records consumed in a group ({len(got)})")


def authentication_error(bootstrap, settings):
    """The error librdkafka reports for a client that cannot authenticate (failing the
    check if it can list topics)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    errors = []
    admin = AdminClient({"bootstrap.servers": bootstrap, **settings, "error_cb": lambda e: errors.append(e)})
    try:
        admin.list_topics(timeout=5)
        fail(f"a client that should not authenticate lists topics ({bootstrap})")
    except KafkaException:
        pass
    deadline = time.time() + 10
    while not errors and time.time() < deadline:
        admin.poll(0.2)
    return " ".join(str(e) for e in errors)

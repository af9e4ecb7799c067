"""Interop driver: librdkafka through confluent-kafka (Python)."""
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dataset import (CODECS, PARTITIONS, BASE_TIMESTAMP_MS, bootstrap, check, check_consumed,
                     fail, first_at_or_after, ok, records_for, unique_topic)

conf = {"bootstrap.servers": bootstrap()}
topic = unique_topic("librdkafka")
admin = AdminClient(conf)
admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(15)
metadata = admin.list_topics(topic, timeout=10).topics[topic]
check(metadata.error is None and len(metadata.partitions) == PARTITIONS, f"created {topic} with {PARTITIONS} partitions")

try:
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(15)
    fail("creating an existing topic succeeded")
except KafkaException as error:
    check(error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS, "existing topic -> TOPIC_ALREADY_EXISTS")

produced = []
for index, codec in enumerate(CODECS):
    producer = Producer({**conf, "enable.idempotence": False, "acks": "all", "compression.type": codec, "linger.ms": 20})
    acked = []

    def delivered(error, message, acked=acked):
        if error is not None:
            fail(f"delivery failed: {error}")
        acked.append(message)

    for partition, key, value, headers, timestamp in records_for(index, codec):
        producer.produce(topic, key=key, value=value, headers=headers, timestamp=timestamp,
                         partition=partition, on_delivery=delivered)
    check(producer.flush(30) == 0, f"{codec}: all records acknowledged")
    # Delivery reports carry no headers; take them (and the timestamp) from what was sent.
    sent = {key: (headers, timestamp) for _, key, _, headers, timestamp in records_for(index, codec)}
    for message in acked:
        headers, timestamp = sent[message.key()]
        produced.append({"partition": message.partition(), "offset": message.offset(), "key": message.key(),
                         "value": message.value(), "headers": headers, "timestamp": timestamp})
produced.sort(key=lambda r: (r["partition"], r["offset"]))

consumer = Consumer({**conf, "group.id": "unused", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
consumed = []
while len(consumed) < len(produced):
    message = consumer.poll(10)
    if message is None:
        break
    if message.error():
        fail(f"consume error {message.error()}")
    consumed.append({"partition": message.partition(), "offset": message.offset(), "key": message.key(),
                     "value": message.value(), "headers": message.headers(), "timestamp": message.timestamp()[1]})
check_consumed(produced, consumed)

middle = BASE_TIMESTAMP_MS + len(produced) * 10 // 2 + 5
found = consumer.offsets_for_times([TopicPartition(topic, p, middle) for p in range(PARTITIONS)], timeout=10)
for tp in found:
    want = first_at_or_after(produced, tp.partition, middle)
    check(tp.offset == want["offset"], f"partition {tp.partition}: offset for timestamp {middle} is {want['offset']}")
consumer.assign([TopicPartition(topic, tp.partition, tp.offset) for tp in found])
seen = {}
while len(seen) < PARTITIONS:
    message = consumer.poll(10)
    if message is None:
        fail("no records after seeking to a timestamp")
    seen.setdefault(message.partition(), message)
for partition, message in seen.items():
    check(message.timestamp()[1] >= middle and message.offset() == first_at_or_after(produced, partition, middle)["offset"],
          f"partition {partition}: consuming from the timestamp starts at the right record")
for partition in range(PARTITIONS):
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    count = len([r for r in produced if r["partition"] == partition])
    check((low, high) == (0, count), f"partition {partition}: watermarks (0, {count})")
consumer.close()

big = Producer({**conf, "enable.idempotence": False, "message.max.bytes": 10_000_000})
errors = []
big.produce(topic, value=b"x" * (2 * 1024 * 1024), partition=0, on_delivery=lambda e, m: errors.append(e))
big.flush(30)
check(errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE,
      f"a 2 MiB record -> MESSAGE_TOO_LARGE ({errors[0] if errors else None})")

admin.delete_topics([topic])[topic].result(15)
ok("deleted the topic")
print("PASS confluent-kafka (librdkafka)")

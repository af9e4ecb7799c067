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

# KIP-467: keyless records in a batch to a compacted topic fail alone; librdkafka fails
# the batch's other records with _INVALID_DIFFERENT_RECORD (its 0011 test, as on Kafka).
compacted = unique_topic("librdkafka-compacted")
admin.create_topics([NewTopic(compacted, num_partitions=1, replication_factor=1,
                              config={"cleanup.policy": "compact"})])[compacted].result(15)
batcher = Producer({**conf, "linger.ms": 500, "enable.idempotence": False})
outcomes = {}
for i in range(6):
    key = None if i in (1, 4) else f"k{i}".encode()
    batcher.produce(compacted, key=key, value=f"v{i}".encode(), partition=0,
                    on_delivery=lambda e, m, i=i: outcomes.__setitem__(i, e))
batcher.flush(30)
codes = {i: (e.code() if e else None) for i, e in sorted(outcomes.items())}
check(codes[1] == codes[4] == KafkaError.INVALID_RECORD,
      f"keyless records on a compacted topic -> INVALID_RECORD ({codes})")
check(all(codes[i] == KafkaError._INVALID_DIFFERENT_RECORD for i in (0, 2, 3, 5)),
      f"the batch's keyed records -> _INVALID_DIFFERENT_RECORD, named by record_errors ({codes})")

# OffsetCommit rules for commits outside a generation (Kafka's group coordinator):
# librdkafka's KIP-848 consumer commits an assign()ed partition with generation -1 and
# its member id; accepted while the group has no members (librdkafka 0030/0051/0099).
group = f"{topic}-assigned"
assigned = Consumer({**conf, "group.id": group, "group.protocol": "consumer",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
assigned.assign([TopicPartition(topic, 0)])
message = None
for _ in range(100):
    message = assigned.poll(0.2)
    if message is not None and message.error() is None:
        break
check(message is not None and message.error() is None, "an assigned KIP-848 consumer reads")
committed = assigned.commit(message=message, asynchronous=False)
check(committed[0].error is None and committed[0].offset == message.offset() + 1,
      f"its commit outside any generation is accepted ({committed})")
position = assigned.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
check(position == message.offset() + 1, f"and fetched back ({position})")
assigned.close()

# An admin commit to a group with a live member: UNKNOWN_MEMBER_ID, as Kafka answers.
from confluent_kafka import ConsumerGroupTopicPartitions
member = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
member.subscribe([topic])
for _ in range(100):
    if member.assignment():
        break
    member.poll(0.2)
check(bool(member.assignment()), "a subscribed member joined the group")
altered = admin.alter_consumer_group_offsets(
    [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 0)])])[group].result(15)
error = altered.topic_partitions[0].error
check(error is not None and error.code() == KafkaError.UNKNOWN_MEMBER_ID,
      f"admin commit to an active group -> UNKNOWN_MEMBER_ID ({error})")
member.close()

admin.delete_topics([topic, compacted])[topic].result(15)
ok("deleted the topic")
print("PASS confluent-kafka (librdkafka)")

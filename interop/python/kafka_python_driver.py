"""Interop driver: kafka-python (pure Python client)."""
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import MessageSizeTooLargeError, TopicAlreadyExistsError

from dataset import (CODECS, PARTITIONS, BASE_TIMESTAMP_MS, bootstrap, check, check_consumed,
                     fail, first_at_or_after, ok, records_for, unique_topic)

topic = unique_topic("kafka-python")
admin = KafkaAdminClient(bootstrap_servers=bootstrap())
admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
described = admin.describe_topics([topic])[0]
check(described["error_code"] == 0 and len(described["partitions"]) == PARTITIONS, f"created {topic}")
try:
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    fail("creating an existing topic succeeded")
except TopicAlreadyExistsError:
    ok("existing topic -> TopicAlreadyExistsError")

produced = []
for index, codec in enumerate(CODECS):
    producer = KafkaProducer(bootstrap_servers=bootstrap(), acks="all", linger_ms=20,
                             compression_type=None if codec == "none" else codec, enable_idempotence=False)
    futures = []
    for partition, key, value, headers, timestamp in records_for(index, codec):
        futures.append((producer.send(topic, key=key, value=value, headers=headers, partition=partition,
                                      timestamp_ms=timestamp), key, value, headers, timestamp))
    producer.flush(30)
    for future, key, value, headers, timestamp in futures:
        metadata = future.get(timeout=30)
        produced.append({"partition": metadata.partition, "offset": metadata.offset, "key": key, "value": value,
                         "headers": headers, "timestamp": timestamp})
    producer.close()
    ok(f"{codec}: all records acknowledged")
produced.sort(key=lambda r: (r["partition"], r["offset"]))

consumer = KafkaConsumer(bootstrap_servers=bootstrap(), enable_auto_commit=False, consumer_timeout_ms=10_000)
partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
consumer.assign(partitions)
consumer.seek_to_beginning()
consumed = []
for message in consumer:
    consumed.append({"partition": message.partition, "offset": message.offset, "key": message.key,
                     "value": message.value, "headers": [(k, v) for k, v in message.headers],
                     "timestamp": message.timestamp})
    if len(consumed) == len(produced):
        break
check_consumed(produced, consumed)

middle = BASE_TIMESTAMP_MS + len(produced) * 10 // 2 + 5
found = consumer.offsets_for_times({tp: middle for tp in partitions})
for tp, offset_and_ts in found.items():
    want = first_at_or_after(produced, tp.partition, middle)
    check(offset_and_ts.offset == want["offset"] and offset_and_ts.timestamp == want["timestamp"],
          f"partition {tp.partition}: offset for timestamp -> {want['offset']}")
ends = consumer.end_offsets(partitions)
starts = consumer.beginning_offsets(partitions)
for tp in partitions:
    count = len([r for r in produced if r["partition"] == tp.partition])
    check((starts[tp], ends[tp]) == (0, count), f"partition {tp.partition}: beginning/end offsets (0, {count})")
consumer.close()

big = KafkaProducer(bootstrap_servers=bootstrap(), max_request_size=10_000_000, enable_idempotence=False)
try:
    big.send(topic, value=b"x" * (2 * 1024 * 1024), partition=0).get(timeout=30)
    fail("a 2 MiB record was accepted")
except MessageSizeTooLargeError:
    ok("a 2 MiB record -> MessageSizeTooLargeError from the broker")
big.close()

admin.delete_topics([topic])
ok("deleted the topic")
print("PASS kafka-python")

"""Interop driver: admin APIs through librdkafka's AdminClient (confluent-kafka):
CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DeleteRecords,
DescribeCluster, and the errors Kafka sends for bad input."""
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewPartitions, NewTopic, ResourceType)

from dataset import bootstrap, check, fail, ok, unique_topic

admin = AdminClient({"bootstrap.servers": bootstrap()})


def error_code(future):
    try:
        future.result(15)
        return None
    except KafkaException as error:
        return error.args[0].code()


topic = unique_topic("admin")
admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1, config={"retention.ms": "3600000"})])[topic].result(15)

# Bad CreateTopics input gets Kafka's codes.
bad = admin.create_topics([
    NewTopic(unique_topic("bad-partitions"), num_partitions=0, replication_factor=1),
    NewTopic(unique_topic("bad-rf"), num_partitions=1, replication_factor=3),
    NewTopic("bad name!", num_partitions=1, replication_factor=1),
    NewTopic(unique_topic("bad-config"), num_partitions=1, replication_factor=1, config={"retention.ms": "soon"}),
    NewTopic(unique_topic("unknown-config"), num_partitions=1, replication_factor=1, config={"no.such.config": "1"}),
])
by_kind = {name: error_code(f) for name, f in bad.items()}
for name, code in by_kind.items():
    if name.startswith("bad-partitions"):
        check(code == KafkaError.INVALID_PARTITIONS, "0 partitions -> INVALID_PARTITIONS")
    elif name.startswith("bad-rf"):
        check(code == KafkaError.INVALID_REPLICATION_FACTOR, "replication factor 3 on one broker -> INVALID_REPLICATION_FACTOR")
    elif name == "bad name!":
        check(code == KafkaError.TOPIC_EXCEPTION, "illegal topic name -> INVALID_TOPIC_EXCEPTION")
    else:
        check(code == KafkaError.INVALID_CONFIG, f"{name.split('-')[0]}-{name.split('-')[1]} -> INVALID_CONFIG")

# validate_only creates nothing.
dry = unique_topic("dry-run")
admin.create_topics([NewTopic(dry, num_partitions=1, replication_factor=1)], validate_only=True)[dry].result(15)
check(dry not in admin.list_topics(timeout=10).topics, "validate_only CreateTopics creates nothing")

# CreatePartitions.
admin.create_partitions([NewPartitions(topic, 5)])[topic].result(15)
check(len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5, "CreatePartitions grew the topic to 5")
check(error_code(admin.create_partitions([NewPartitions(topic, 3)])[topic]) == KafkaError.INVALID_PARTITIONS,
      "shrinking partitions -> INVALID_PARTITIONS")

# DescribeConfigs: the override and a default.
resource = ConfigResource(ResourceType.TOPIC, topic)
configs = admin.describe_configs([resource])[resource].result(15)
check(configs["retention.ms"].value == "3600000" and not configs["retention.ms"].is_default,
      "DescribeConfigs shows the retention.ms override")
check(configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default,
      "DescribeConfigs shows cleanup.policy's default")
check(configs["preallocate"].value == "false" and configs["preallocate"].is_default,
      "DescribeConfigs shows preallocate's default, as Kafka")

# preallocate is a Kafka topic config (a boolean): accepted, and checked as Kafka does.
prealloc = unique_topic("preallocated")
admin.create_topics([NewTopic(prealloc, num_partitions=1, replication_factor=1,
                              config={"preallocate": "true"})])[prealloc].result(15)
prealloc_resource = ConfigResource(ResourceType.TOPIC, prealloc)
check(admin.describe_configs([prealloc_resource])[prealloc_resource].result(15)["preallocate"].value == "true",
      "preallocate=true accepted and described")
bad_prealloc = unique_topic("bad-preallocate")
check(error_code(admin.create_topics([NewTopic(bad_prealloc, num_partitions=1, replication_factor=1,
                                               config={"preallocate": "yes"})])[bad_prealloc]) == KafkaError.INVALID_CONFIG,
      "preallocate=yes -> INVALID_CONFIG")

# IncrementalAlterConfigs: set one, delete another, append to a list.
changes = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
    ConfigEntry("max.message.bytes", "2048", incremental_operation=AlterConfigOpType.SET),
    ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
])
admin.incremental_alter_configs([changes])[changes].result(15)
configs = admin.describe_configs([resource])[resource].result(15)
check(configs["max.message.bytes"].value == "2048", "incremental SET max.message.bytes=2048")
check(configs["retention.ms"].is_default, "incremental DELETE restored retention.ms's default")
check(configs["cleanup.policy"].value == "delete,compact", "incremental APPEND cleanup.policy -> delete,compact")

# The new max.message.bytes applies at once: a 4 KiB record is refused.
errors = []
producer = Producer({"bootstrap.servers": bootstrap(), "enable.idempotence": False})
producer.produce(topic, value=b"x" * 4096, partition=0, on_delivery=lambda e, m: errors.append(e))
producer.flush(15)
check(errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE,
      "the altered max.message.bytes is enforced without a restart")

bad_value = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
    ConfigEntry("segment.bytes", "ten", incremental_operation=AlterConfigOpType.SET)])
check(error_code(admin.incremental_alter_configs([bad_value])[bad_value]) == KafkaError.INVALID_CONFIG,
      "a non-numeric segment.bytes -> INVALID_CONFIG")
missing = ConfigResource(ResourceType.TOPIC, unique_topic("missing"), set_config={"retention.ms": "1"})
check(error_code(admin.alter_configs([missing])[missing]) == KafkaError.UNKNOWN_TOPIC_OR_PART,
      "AlterConfigs on a missing topic -> UNKNOWN_TOPIC_OR_PARTITION")

# Broker configs are described and static.
broker_resource = ConfigResource(ResourceType.BROKER, "1")
broker_configs = admin.describe_configs([broker_resource])[broker_resource].result(15)
check(broker_configs["num.partitions"].value == "1", "DescribeConfigs on the broker")

# DeleteRecords.
producer = Producer({"bootstrap.servers": bootstrap(), "enable.idempotence": False})
# The topic is compacted now (cleanup.policy=delete,compact): records need keys.
delivered = []
for i in range(10):
    producer.produce(topic, key=f"k{i}".encode(), value=b"v", partition=1, on_delivery=lambda e, m: delivered.append(e))
producer.flush(15)
check(len(delivered) == 10 and all(e is None for e in delivered), "10 keyed records written to partition 1")
keyless = []
producer.produce(topic, value=b"no key", partition=1, on_delivery=lambda e, m: keyless.append(e))
producer.flush(15)
check(keyless[0] is not None and keyless[0].code() == KafkaError.INVALID_RECORD,
      "a keyless record on the now-compacted topic -> INVALID_RECORD")
result = admin.delete_records([TopicPartition(topic, 1, 4)])
low = result[TopicPartition(topic, 1, 4)].result(15)
check(low.low_watermark == 4, "DeleteRecords moved the low watermark to 4")
beyond = admin.delete_records([TopicPartition(topic, 1, 100)])
check(error_code(beyond[TopicPartition(topic, 1, 100)]) == KafkaError.OFFSET_OUT_OF_RANGE,
      "DeleteRecords past the high watermark -> OFFSET_OUT_OF_RANGE")

# DescribeCluster.
cluster = admin.describe_cluster().result(15)
check(len(cluster.nodes) == 1 and cluster.controller is not None and cluster.cluster_id,
      f"DescribeCluster: one node, controller, cluster id {cluster.cluster_id}")

admin.delete_topics([topic])[topic].result(15)
ok("deleted the topic")
print("PASS admin APIs (librdkafka)")

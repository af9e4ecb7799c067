// Interop driver: Apache Kafka's own Java clients (kafka-clients 4.4.0; 4.1.1 with
// STRAND_KAFKA_VERSION=4.1.1, interop/run.sh's java-4.1) against Strand.
//
// Checks topic administration (AdminClient), produce with every codec (KafkaProducer,
// acks=all, no idempotence: Strand has no InitProducerId), fetch (KafkaConsumer with
// assign()+seek, no group: Strand has no group coordinator), timestamp lookups, offset
// listing, a too-large record, and topic deletion. The records are those of
// interop/python/dataset.py: per codec, 40 keyed records with two headers, explicit
// timestamps and an explicit partition.
//
// Prints one "ok: ..." line per passed check; on the first failed one prints
// "FAIL: ...", deletes the topic (best effort) and exits 1. Every client call has a
// timeout and a watchdog halts the JVM if the whole run overstays, so it never hangs.
//
// Environment: STRAND_BOOTSTRAP (default 127.0.0.1:9092).

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class InteropDriver extends Checks {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final int PARTITIONS = 3;
    static final int RECORDS_PER_CODEC = 40;
    static final long BASE_TIMESTAMP_MS = 1_700_000_000_000L;
    static final String RETENTION_MS = "123456789";

    static final long WATCHDOG_SECONDS = 240;

    static String topic;
    static Admin admin;

    /** One record as sent, with where the broker said it landed. */
    static final class Sent {
        final String codec;
        final int partition;
        final byte[] key;
        final byte[] value;
        final List<Header> headers;
        final long timestamp;
        long offset = -1;

        Sent(String codec, int partition, byte[] key, byte[] value, List<Header> headers, long timestamp) {
            this.codec = codec;
            this.partition = partition;
            this.key = key;
            this.value = value;
            this.headers = headers;
            this.timestamp = timestamp;
        }

        String where() {
            return partition + "/" + offset;
        }
    }

    // ---- reporting -------------------------------------------------------------------

    /** Best effort, before a FAIL exits: the test topic deleted. */
    static void dropTopic() {
        if (admin != null && topic != null) {
            try {
                admin.deleteTopics(List.of(topic)).all().get(5, TimeUnit.SECONDS);
            } catch (Exception ignored) {
                // best effort
            }
        }
    }

    /** Waits for a future that must fail with the given exception type; returns it. */
    static <E extends Throwable> E awaitFailure(String what, Future<?> future, Class<E> expected) {
        try {
            Object value = future.get(STEP_SECONDS, TimeUnit.SECONDS);
            fail(what + ": succeeded (" + value + "), expected " + expected.getSimpleName());
        } catch (TimeoutException e) {
            fail(what + ": no answer within " + STEP_SECONDS + "s, expected " + expected.getSimpleName());
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (expected.isInstance(cause)) {
                return expected.cast(cause);
            }
            fail(what + ": failed with " + cause + ", expected " + expected.getSimpleName());
        } catch (InterruptedException e) {
            fail(what + ": interrupted");
        }
        throw new AssertionError("unreachable");
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String str(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }

    static String headersString(Iterable<Header> headers) {
        StringBuilder sb = new StringBuilder("[");
        for (Header h : headers) {
            if (sb.length() > 1) {
                sb.append(", ");
            }
            sb.append(h.key()).append('=').append(str(h.value()));
        }
        return sb.append(']').toString();
    }

    static boolean sameHeaders(List<Header> want, Iterable<Header> got) {
        List<Header> gotList = new ArrayList<>();
        got.forEach(gotList::add);
        if (want.size() != gotList.size()) {
            return false;
        }
        for (int i = 0; i < want.size(); i++) {
            if (!want.get(i).key().equals(gotList.get(i).key())
                    || !Arrays.equals(want.get(i).value(), gotList.get(i).value())) {
                return false;
            }
        }
        return true;
    }

    // ---- clients ---------------------------------------------------------------------

    static KafkaProducer<byte[], byte[]> producer(String codec, Map<String, String> extra) {
        Properties p = common("strand-interop-java-producer-" + codec);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.RETRIES_CONFIG, "3");
        p.putAll(extra);
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    static KafkaConsumer<byte[], byte[]> consumer() {
        Properties p = common("strand-interop-java-consumer");
        // No group.id: Strand has no group coordinator; assign() + seek only.
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    // ---- the dataset (interop/python/dataset.py) -------------------------------------

    static List<Sent> recordsFor(int codecIndex, String codec) {
        List<Sent> out = new ArrayList<>();
        for (int i = 0; i < RECORDS_PER_CODEC; i++) {
            int n = codecIndex * RECORDS_PER_CODEC + i;
            byte[] key = bytes("key-" + codec + "-" + i);
            byte[] value = bytes("value-" + codec + "-" + i + "-" + "x".repeat(i * 7));
            List<Header> headers = List.of(new RecordHeader("codec", bytes(codec)),
                    new RecordHeader("index", bytes(Integer.toString(i))));
            out.add(new Sent(codec, n % PARTITIONS, key, value, headers, BASE_TIMESTAMP_MS + n * 10L));
        }
        return out;
    }

    // ---- steps -----------------------------------------------------------------------

    static void createAndDescribe() {
        NewTopic newTopic = new NewTopic(topic, PARTITIONS, (short) 1);
        var created = admin.createTopics(List.of(newTopic));
        await("createTopics " + topic, created.all());
        int numPartitions = await("createTopics numPartitions", created.numPartitions(topic));
        Uuid createdId = await("createTopics topicId", created.topicId(topic));
        check(numPartitions == PARTITIONS && !Uuid.ZERO_UUID.equals(createdId),
                "createTopics " + topic + ": " + numPartitions + " partitions, id " + createdId);

        TopicDescription description = await("describeTopics " + topic,
                admin.describeTopics(List.of(topic)).topicNameValues().get(topic));
        check(description.partitions().size() == PARTITIONS,
                "describeTopics: " + description.partitions().size() + " partitions (want " + PARTITIONS + ")");
        check(!Uuid.ZERO_UUID.equals(description.topicId()) && description.topicId().equals(createdId),
                "describeTopics: topic id " + description.topicId() + " non-zero and equal to createTopics'");
        for (TopicPartitionInfo info : description.partitions()) {
            Node leader = info.leader();
            if (leader == null || leader.isEmpty() || info.replicas().size() != 1 || info.isr().size() != 1) {
                fail("describeTopics: partition " + info.partition() + " leader " + leader + " replicas "
                        + info.replicas() + " isr " + info.isr());
            }
        }
        ok("describeTopics: every partition has a leader, 1 replica, 1 in-sync replica");

        TopicExistsException exists = awaitFailure("createTopics (again) " + topic,
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all(), TopicExistsException.class);
        ok("createTopics of an existing topic -> TopicExistsException (" + exists.getMessage() + ")");
    }

    static Config describeTopicConfig() {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Map<ConfigResource, Config> configs = await("describeConfigs " + topic,
                admin.describeConfigs(List.of(resource)).all());
        Config config = configs.get(resource);
        if (config == null) {
            fail("describeConfigs: no entry for " + resource + " in " + configs.keySet());
        }
        return config;
    }

    static void configs() {
        Config config = describeTopicConfig();
        ConfigEntry cleanup = config.get("cleanup.policy");
        ConfigEntry retention = config.get("retention.ms");
        check(config.entries().size() > 5 && cleanup != null && "delete".equals(cleanup.value()) && retention != null,
                "describeConfigs " + topic + ": " + config.entries().size() + " entries, cleanup.policy="
                        + (cleanup == null ? null : cleanup.value()) + ", retention.ms="
                        + (retention == null ? null : retention.value()));
        check(retention.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG
                        || retention.source() == ConfigEntry.ConfigSource.STATIC_BROKER_CONFIG
                        || retention.source() == ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                "describeConfigs: retention.ms not yet set on the topic (source " + retention.source() + ")");

        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(resource,
                List.of(new AlterConfigOp(new ConfigEntry("retention.ms", RETENTION_MS), AlterConfigOp.OpType.SET)));
        await("incrementalAlterConfigs SET retention.ms", admin.incrementalAlterConfigs(ops).all());
        ok("incrementalAlterConfigs: SET retention.ms=" + RETENTION_MS);

        ConfigEntry after = describeTopicConfig().get("retention.ms");
        check(after != null && RETENTION_MS.equals(after.value())
                        && after.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                "describeConfigs after the change: retention.ms=" + (after == null ? null : after.value())
                        + " (source " + (after == null ? null : after.source()) + ")");
    }

    static void partitionsAndCluster() {
        await("createPartitions to 4", admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all());
        TopicDescription description = await("describeTopics after createPartitions",
                admin.describeTopics(List.of(topic)).topicNameValues().get(topic));
        check(description.partitions().size() == 4,
                "createPartitions: " + topic + " now has " + description.partitions().size() + " partitions (want 4)");
        InvalidPartitionsException shrink = awaitFailure("createPartitions to 3",
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all(),
                InvalidPartitionsException.class);
        ok("createPartitions back to 3 -> InvalidPartitionsException (" + shrink.getMessage() + ")");

        DescribeClusterResult cluster = admin.describeCluster();
        Collection<Node> nodes = await("describeCluster nodes", cluster.nodes());
        String clusterId = await("describeCluster clusterId", cluster.clusterId());
        Node controller = await("describeCluster controller", cluster.controller());
        check(nodes.size() == 1 && clusterId != null && !clusterId.isEmpty(),
                "describeCluster: " + nodes.size() + " node " + nodes + ", cluster id " + clusterId
                        + ", controller " + controller);
    }

    static List<Sent> produceAll() {
        List<Sent> produced = new ArrayList<>();
        for (int ci = 0; ci < CODECS.length; ci++) {
            String codec = CODECS[ci];
            List<Sent> block = recordsFor(ci, codec);
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = producer(codec, Map.of())) {
                for (Sent s : block) {
                    futures.add(producer.send(new ProducerRecord<>(topic, s.partition, s.timestamp, s.key, s.value,
                            s.headers)));
                }
                producer.flush();
                for (int i = 0; i < block.size(); i++) {
                    Sent s = block.get(i);
                    RecordMetadata md = await(codec + ": send " + str(s.key), futures.get(i));
                    if (md.partition() != s.partition || md.offset() < 0 || md.timestamp() != s.timestamp) {
                        fail(codec + ": " + str(s.key) + " acknowledged at " + md.partition() + "/" + md.offset()
                                + " ts " + md.timestamp() + ", sent to partition " + s.partition + " ts " + s.timestamp);
                    }
                    s.offset = md.offset();
                }
                producer.close(Duration.ofSeconds(10));
            }
            ok(codec + ": " + block.size() + " records acknowledged (acks=all)");
            produced.addAll(block);
        }
        // Per partition, the acknowledged offsets follow the send order and are contiguous from 0.
        for (int p = 0; p < PARTITIONS; p++) {
            long next = 0;
            for (Sent s : produced) {
                if (s.partition == p) {
                    if (s.offset != next) {
                        fail("partition " + p + ": " + str(s.key) + " acknowledged at offset " + s.offset
                                + ", expected " + next + " (send order, contiguous)");
                    }
                    next++;
                }
            }
            ok("partition " + p + ": acknowledged offsets 0.." + (next - 1) + " in send order");
        }
        return produced;
    }

    static List<TopicPartition> allPartitions(int n) {
        List<TopicPartition> out = new ArrayList<>();
        for (int p = 0; p < n; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    static void consumeAll(List<Sent> produced) {
        List<TopicPartition> partitions = allPartitions(4); // 3 with data + the empty one from createPartitions
        Map<String, Sent> expected = new HashMap<>();
        for (Sent s : produced) {
            expected.put(s.where(), s);
        }
        List<ConsumerRecord<byte[], byte[]>> consumed = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = consumer()) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STEP_SECONDS);
            while (consumed.size() < produced.size() && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                records.forEach(consumed::add);
            }
            // A short extra poll: nothing more may arrive.
            consumer.poll(Duration.ofMillis(500)).forEach(consumed::add);
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(10)));
        }
        check(consumed.size() == produced.size(), "consumed " + consumed.size() + " of " + produced.size() + " records");

        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> byPartition = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : consumed) {
            byPartition.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r);
        }
        check(!byPartition.containsKey(3), "partition 3 (added by createPartitions) is empty");
        for (int p = 0; p < PARTITIONS; p++) {
            List<ConsumerRecord<byte[], byte[]>> records = byPartition.getOrDefault(p, List.of());
            for (int i = 0; i < records.size(); i++) {
                if (records.get(i).offset() != i) {
                    fail("partition " + p + ": record " + i + " has offset " + records.get(i).offset());
                }
            }
            ok("partition " + p + ": " + records.size() + " records, offsets contiguous from 0");
        }
        for (ConsumerRecord<byte[], byte[]> r : consumed) {
            String where = r.partition() + "/" + r.offset();
            Sent want = expected.get(where);
            if (want == null) {
                fail("unexpected record at " + where + " key " + str(r.key()));
            }
            if (!Arrays.equals(want.key, r.key())) {
                fail("key differs at " + where + ": " + str(want.key) + " != " + str(r.key()));
            }
            if (!Arrays.equals(want.value, r.value())) {
                fail("value differs at " + where + ": " + str(want.value) + " != " + str(r.value()));
            }
            if (!sameHeaders(want.headers, r.headers())) {
                fail("headers differ at " + where + ": " + headersString(want.headers) + " != "
                        + headersString(r.headers()));
            }
            if (r.timestamp() != want.timestamp || r.timestampType() != TimestampType.CREATE_TIME) {
                fail("timestamp differs at " + where + ": " + want.timestamp + " != " + r.timestamp() + " ("
                        + r.timestampType() + ")");
            }
        }
        ok("every record matches key, value, headers and CreateTime timestamp at its acknowledged offset");
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> wantOrder = new ArrayList<>();
            for (Sent s : produced) {
                if (s.partition == p) {
                    wantOrder.add(str(s.key));
                }
            }
            List<String> gotOrder = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : byPartition.getOrDefault(p, List.of())) {
                gotOrder.add(str(r.key()));
            }
            check(wantOrder.equals(gotOrder), "partition " + p + ": produce order kept");
        }
    }

    static Sent firstAtOrAfter(List<Sent> produced, int partition, long timestamp) {
        Sent best = null;
        for (Sent s : produced) {
            if (s.partition == partition && s.timestamp >= timestamp && (best == null || s.offset < best.offset)) {
                best = s;
            }
        }
        return best;
    }

    static void timestampsAndOffsets(List<Sent> produced) {
        long middle = BASE_TIMESTAMP_MS + produced.size() * 10L / 2 + 5;
        List<TopicPartition> partitions = allPartitions(PARTITIONS);
        try (KafkaConsumer<byte[], byte[]> consumer = consumer()) {
            Map<TopicPartition, Long> query = new HashMap<>();
            for (TopicPartition tp : partitions) {
                query.put(tp, middle);
            }
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(query, Duration.ofSeconds(15));
            for (TopicPartition tp : partitions) {
                Sent want = firstAtOrAfter(produced, tp.partition(), middle);
                OffsetAndTimestamp got = found.get(tp);
                check(got != null && got.offset() == want.offset && got.timestamp() == want.timestamp,
                        "offsetsForTimes partition " + tp.partition() + " ts " + middle + ": " + got + " (want offset "
                                + want.offset + " ts " + want.timestamp + ")");
            }
            // A timestamp after every record: no offset (null), as Kafka answers -1.
            Map<TopicPartition, Long> late = Map.of(partitions.get(0), BASE_TIMESTAMP_MS + 1_000_000L);
            Map<TopicPartition, OffsetAndTimestamp> none = consumer.offsetsForTimes(late, Duration.ofSeconds(15));
            check(none.get(partitions.get(0)) == null,
                    "offsetsForTimes after the last record -> null (" + none.get(partitions.get(0)) + ")");

            // Consume from the timestamp offsets: the first record read is the expected one.
            consumer.assign(partitions);
            for (TopicPartition tp : partitions) {
                consumer.seek(tp, found.get(tp).offset());
            }
            Map<Integer, ConsumerRecord<byte[], byte[]>> first = new HashMap<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STEP_SECONDS);
            while (first.size() < PARTITIONS && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    first.putIfAbsent(r.partition(), r);
                }
            }
            for (TopicPartition tp : partitions) {
                ConsumerRecord<byte[], byte[]> r = first.get(tp.partition());
                Sent want = firstAtOrAfter(produced, tp.partition(), middle);
                check(r != null && r.offset() == want.offset && Arrays.equals(r.key(), want.key),
                        "partition " + tp.partition() + ": consuming from the timestamp starts at " + want.where());
            }

            Map<TopicPartition, Long> beginning = consumer.beginningOffsets(partitions, Duration.ofSeconds(15));
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions, Duration.ofSeconds(15));
            for (TopicPartition tp : partitions) {
                long count = produced.stream().filter(s -> s.partition == tp.partition()).count();
                check(beginning.get(tp) == 0L && end.get(tp) == count,
                        "partition " + tp.partition() + ": beginningOffsets " + beginning.get(tp) + ", endOffsets "
                                + end.get(tp) + " (want 0, " + count + ")");
            }
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(10)));
        }
    }

    static void recordTooLarge() {
        byte[] big = new byte[2 * 1024 * 1024];
        Arrays.fill(big, (byte) 'x');
        try (KafkaProducer<byte[], byte[]> producer = producer("none",
                Map.of(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "10485760"))) {
            Future<RecordMetadata> future = producer.send(new ProducerRecord<>(topic, 0, null, big));
            producer.flush();
            RecordTooLargeException e = awaitFailure("send a 2 MiB record", future, RecordTooLargeException.class);
            // The client rejects records over max.request.size itself (without asking the
            // broker) with a message naming max.request.size; this one must come from the broker.
            check(!String.valueOf(e.getMessage()).contains("max.request.size"),
                    "a 2 MiB record -> RecordTooLargeException from the broker (" + e.getMessage() + ")");
            producer.close(Duration.ofSeconds(10));
        }
        try (KafkaConsumer<byte[], byte[]> consumer = consumer()) {
            TopicPartition tp = new TopicPartition(topic, 0);
            long end = consumer.endOffsets(List.of(tp), Duration.ofSeconds(15)).get(tp);
            long want = (PARTITIONS - 1 + CODECS.length * RECORDS_PER_CODEC) / PARTITIONS;
            check(end == want, "partition 0: end offset still " + end + " after the rejected record (want " + want + ")");
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(10)));
        }
    }

    static void deleteTopic() {
        await("deleteTopics " + topic, admin.deleteTopics(List.of(topic)).all());
        ok("deleteTopics " + topic);
        String deleted = topic;
        topic = null; // nothing left for fail() to clean up
        Set<String> names = await("listTopics", admin.listTopics().names());
        check(!names.contains(deleted), "listTopics no longer shows " + deleted);
        UnknownTopicOrPartitionException gone = awaitFailure("describeTopics after delete",
                admin.describeTopics(List.of(deleted)).allTopicNames(), UnknownTopicOrPartitionException.class);
        ok("describeTopics of the deleted topic -> UnknownTopicOrPartitionException (" + gone.getMessage() + ")");
    }

    public static void main(String[] args) {
        onFail = InteropDriver::dropTopic;
        watchdog(WATCHDOG_SECONDS, "run exceeded " + WATCHDOG_SECONDS + "s");

        long start = System.nanoTime();
        System.out.println("kafka-clients " + kafkaVersion()
                + " interop against " + bootstrap);
        topic = "java-" + System.nanoTime();
        admin = newAdmin("strand-interop-java-admin");

        createAndDescribe();
        configs();
        partitionsAndCluster();
        List<Sent> produced = produceAll();
        consumeAll(produced);
        timestampsAndOffsets(produced);
        recordTooLarge();
        deleteTopic();

        admin.close(Duration.ofSeconds(10));
        System.out.printf("PASS kafka-clients (Java) in %.1fs%n", (System.nanoTime() - start) / 1e9);
        System.exit(0);
    }
}

// Transactions interop driver: Apache Kafka's own Java clients (kafka-clients 4.4.0, or the
// release STRAND_KAFKA_VERSION names) against Strand's transaction coordinator, validated
// first against Apache Kafka 4.1.1 and 4.4.0.
//
// Scenarios (each on its own topics and transactional ids, all suffixed per run):
//   visibility   commit visible / abort invisible under read_committed; read_uncommitted
//                sees the aborted records too
//   ctp-classic  consume-transform-produce: sendOffsetsToTransaction with the group
//   ctp-consumer member's groupMetadata() (KIP-447: generation and member id checked by
//                the group coordinator), with group.protocol=classic and =consumer
//                (KIP-848); committed offsets move on commit only, and a stale
//                generation is refused
//   fencing      a second producer with the same transactional.id fences the first: its
//                commit, and its send to a partition already in the transaction, fail
//   timeout      transaction.timeout.ms=3000: the coordinator aborts the transaction by
//                itself, and the producer's late commit fails
//   admin        listTransactions, describeTransactions, describeProducers while a
//                transaction is open and after it completed
//
// Kafka 4.x finalizes transaction.version=2, so against Kafka the client speaks the TV2
// protocol (EndTxn v5, an epoch bump per transaction, partitions added implicitly by
// Produce); a broker that does not advertise the feature gets TV0/TV1 (AddPartitionsToTxn
// from the client, EndTxn v4). Where the two protocols give the application different
// exceptions, the expectation depends on the version the broker finalizes, which the
// driver reads (describeFeatures) and prints; each such place says what Kafka does.
//
// Prints one "ok: ..." line per passed check and "FAIL: ..." (with the stack of any
// unexpected exception) on the first failed one, then exits 1. Every wait has a deadline
// and a watchdog halts the JVM if the whole run overstays; nothing asserts on how long an
// operation took.
//
// Environment: STRAND_BOOTSTRAP (default 127.0.0.1:9092). Arguments: scenario names to
// run only those (default: all).

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TransactionsDriver extends Checks {
    // Kafka sweeps for expired transactions every 10 s
    // (transaction.abort.timed.out.transaction.cleanup.interval.ms): 3 s timeout + one
    // sweep interval + slack.
    static final long TIMEOUT_ABORT_SECONDS = 40;
    static final long WATCHDOG_SECONDS = 420;
    static final String SENTINEL = "sentinel-";
    static final List<String> SCENARIOS =
            List.of("visibility", "ctp-classic", "ctp-consumer", "fencing", "timeout", "admin");

    static String run;
    static Admin admin;
    static int transactionVersion;
    static final List<String> createdTopics = new ArrayList<>();

    record Rec(int partition, String value) {}

    interface Call {
        void run() throws Exception;
    }

    // ---- reporting -------------------------------------------------------------------

    /** Best effort (at the end, and before a FAIL exits): the topics of the run deleted. */
    static void deleteTopics() {
        if (admin == null || createdTopics.isEmpty()) {
            return;
        }
        try {
            admin.deleteTopics(createdTopics).all().get(10, TimeUnit.SECONDS);
        } catch (Exception ignored) {
            // best effort
        }
    }

    /** Runs a client call that must succeed; any exception is a FAIL with its stack. */
    static void must(String what, Call call) {
        try {
            call.run();
        } catch (Exception e) {
            fail(what + ": " + e, e);
        }
    }

    /** Runs a call that must throw exactly `expected` (not a subclass of something else). */
    static <E extends Throwable> E mustThrow(String what, Call call, Class<E> expected) {
        try {
            call.run();
        } catch (Throwable t) {
            if (t.getClass() == expected) {
                ok(what + " -> " + expected.getSimpleName() + " (" + t.getMessage() + ")");
                return expected.cast(t);
            }
            fail(what + ": threw " + t + ", expected " + expected.getSimpleName(), t);
        }
        fail(what + ": succeeded, expected " + expected.getSimpleName());
        throw new AssertionError("unreachable");
    }

    /** Waits for a future that must fail with exactly `expected`. */
    static <E extends Throwable> E mustFail(String what, Future<?> future, Class<E> expected) {
        try {
            Object value = future.get(STEP_SECONDS, TimeUnit.SECONDS);
            fail(what + ": succeeded (" + value + "), expected " + expected.getSimpleName());
        } catch (TimeoutException e) {
            fail(what + ": no answer within " + STEP_SECONDS + "s, expected " + expected.getSimpleName());
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause.getClass() == expected) {
                ok(what + " -> " + expected.getSimpleName() + " (" + cause.getMessage() + ")");
                return expected.cast(cause);
            }
            fail(what + ": failed with " + cause + ", expected " + expected.getSimpleName(), cause);
        } catch (InterruptedException e) {
            fail(what + ": interrupted");
        }
        throw new AssertionError("unreachable");
    }

    static void waitUntil(String what, long seconds, BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail(what + ": not within " + seconds + "s");
            }
            sleep(200);
        }
        ok(what);
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            fail("interrupted");
        }
    }

    // ---- clients ---------------------------------------------------------------------

    static String name(String kind) {
        return "jtxn-" + kind + "-" + run;
    }

    static String createTopic(String kind, int partitions) {
        String topic = name(kind);
        await("createTopics " + topic, admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all());
        createdTopics.add(topic);
        return topic;
    }

    static Properties producerProps(String clientId) {
        Properties p = common(clientId);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        // max.block.ms bounds initTransactions, commitTransaction, abortTransaction and
        // sendOffsetsToTransaction: each either completes or throws TimeoutException.
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        return p;
    }

    /** A transactional producer, initialized (InitProducerId done). */
    static KafkaProducer<String, String> txnProducer(String transactionalId, Map<String, String> extra) {
        Properties p = producerProps("jtxn-" + transactionalId);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.putAll(extra);
        KafkaProducer<String, String> producer =
                new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        must("initTransactions " + transactionalId, producer::initTransactions);
        return producer;
    }

    static KafkaProducer<String, String> txnProducer(String transactionalId) {
        return txnProducer(transactionalId, Map.of());
    }

    /** An idempotent, non-transactional producer (inputs and end sentinels). */
    static KafkaProducer<String, String> plainProducer() {
        Properties p = producerProps("jtxn-plain");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    /**
     * Sends the records and waits for every acknowledgement; returns their offsets in
     * order. A transactional producer's records are then on the broker, not buffered:
     * what a later abort or fence acts on was really written.
     */
    static List<Long> sendAcked(KafkaProducer<String, String> producer, String topic, List<Rec> records) {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (Rec r : records) {
            futures.add(producer.send(new ProducerRecord<>(topic, r.partition(), null, r.value())));
        }
        producer.flush();
        List<Long> offsets = new ArrayList<>();
        for (Future<RecordMetadata> f : futures) {
            offsets.add(await("send to " + topic, f).offset());
        }
        return offsets;
    }

    static List<Rec> spread(String prefix, int count, int partitions) {
        List<Rec> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(new Rec(i % partitions, prefix + i));
        }
        return out;
    }

    static List<String> values(List<Rec> records) {
        List<String> out = new ArrayList<>();
        for (Rec r : records) {
            out.add(r.value());
        }
        Collections.sort(out);
        return out;
    }

    static List<TopicPartition> partitions(String topic, int count) {
        List<TopicPartition> out = new ArrayList<>();
        for (int p = 0; p < count; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    /** A consumer without a group (assign() only) at the given isolation level. */
    static KafkaConsumer<String, String> reader(String isolation) {
        Properties p = common("jtxn-reader");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    /**
     * Every record value a fresh consumer at this isolation level is given, from the start
     * of each partition to its end, sorted. "The end" is a sentinel written now by a
     * non-transactional producer: once it has arrived from a partition nothing before it
     * can still show up there, so "exactly these records" holds without waiting out a
     * quiet period (and under read_committed the sentinel arrives only once every
     * transaction before it has completed, its markers included). Only for partitions
     * with no transaction left open.
     */
    static List<String> readToEnd(String topic, int count, String isolation) {
        String tag = SENTINEL + UUID.randomUUID();
        try (KafkaProducer<String, String> writer = plainProducer()) {
            List<Rec> tags = new ArrayList<>();
            for (int p = 0; p < count; p++) {
                tags.add(new Rec(p, tag));
            }
            sendAcked(writer, topic, tags);
            writer.close(Duration.ofSeconds(10));
        }
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> reader = reader(isolation)) {
            List<TopicPartition> tps = partitions(topic, count);
            reader.assign(tps);
            reader.seekToBeginning(tps);
            Set<Integer> pending = new HashSet<>();
            for (int p = 0; p < count; p++) {
                pending.add(p);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STEP_SECONDS);
            while (!pending.isEmpty()) {
                if (System.nanoTime() > deadline) {
                    fail(topic + " (" + isolation + "): no end sentinel from partitions " + pending + " within "
                            + STEP_SECONDS + "s");
                }
                for (ConsumerRecord<String, String> r : reader.poll(Duration.ofMillis(200))) {
                    if (r.value().equals(tag)) {
                        pending.remove(r.partition());
                    } else if (!r.value().startsWith(SENTINEL)) {
                        got.add(r.value());
                    }
                }
            }
            reader.close(CloseOptions.timeout(Duration.ofSeconds(10)));
        }
        Collections.sort(got);
        return got;
    }

    static long latest(TopicPartition tp, IsolationLevel isolation) {
        return await("listOffsets latest " + tp + " " + isolation,
                admin.listOffsets(Map.of(tp, OffsetSpec.latest()), new ListOffsetsOptions(isolation)).all())
                .get(tp).offset();
    }

    static TransactionDescription describeTxn(String transactionalId) {
        return await("describeTransactions " + transactionalId,
                admin.describeTransactions(List.of(transactionalId)).description(transactionalId));
    }

    /** This transactional id's entry in listTransactions (with these options), or null. */
    static TransactionListing listed(String transactionalId, ListTransactionsOptions options) {
        for (TransactionListing l : await("listTransactions", admin.listTransactions(options).all())) {
            if (l.transactionalId().equals(transactionalId)) {
                return l;
            }
        }
        return null;
    }

    static List<ProducerState> producersOf(TopicPartition tp) {
        return await("describeProducers " + tp, admin.describeProducers(List.of(tp)).partitionResult(tp))
                .activeProducers();
    }

    static ProducerState producerOf(TopicPartition tp, long producerId) {
        for (ProducerState s : producersOf(tp)) {
            if (s.producerId() == producerId) {
                return s;
            }
        }
        return null;
    }

    static int finalizedTransactionVersion() {
        FeatureMetadata features = await("describeFeatures", admin.describeFeatures().featureMetadata());
        FinalizedVersionRange range = features.finalizedFeatures().get("transaction.version");
        return range == null ? 0 : range.maxVersionLevel();
    }

    // ---- scenarios -------------------------------------------------------------------

    static void visibility() {
        String topic = createTopic("vis", 3);
        KafkaProducer<String, String> producer = txnProducer(name("vis"));
        List<Rec> first = spread("committed-a-", 10, 3);
        List<Rec> aborted = spread("aborted-", 5, 3);
        List<Rec> second = spread("committed-b-", 3, 3);

        producer.beginTransaction();
        sendAcked(producer, topic, first);
        must("commitTransaction", producer::commitTransaction);
        producer.beginTransaction();
        sendAcked(producer, topic, aborted);
        must("abortTransaction", producer::abortTransaction);
        producer.beginTransaction();
        sendAcked(producer, topic, second);
        must("commitTransaction", producer::commitTransaction);
        producer.close(Duration.ofSeconds(10));

        List<Rec> committed = new ArrayList<>(first);
        committed.addAll(second);
        List<Rec> all = new ArrayList<>(committed);
        all.addAll(aborted);
        check(readToEnd(topic, 3, "read_committed").equals(values(committed)),
                "visibility: read_committed sees exactly the 13 committed records, none of the 5 aborted");
        check(readToEnd(topic, 3, "read_uncommitted").equals(values(all)),
                "visibility: read_uncommitted sees all 18, the aborted ones included");
    }

    static Map<TopicPartition, Long> committedBy(KafkaConsumer<String, String> member, List<TopicPartition> tps) {
        Map<TopicPartition, Long> out = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : member.committed(new HashSet<>(tps),
                Duration.ofSeconds(15)).entrySet()) {
            out.put(e.getKey(), e.getValue() == null ? -1L : e.getValue().offset());
        }
        return out;
    }

    /** The group's committed offsets by AdminClient, stable ones only (require_stable). */
    static Map<TopicPartition, Long> committedByAdmin(String group) {
        Map<TopicPartition, OffsetAndMetadata> found = await("listConsumerGroupOffsets " + group,
                admin.listConsumerGroupOffsets(group, new ListConsumerGroupOffsetsOptions().requireStable(true))
                        .partitionsToOffsetAndMetadata());
        Map<TopicPartition, Long> out = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
        found.forEach((tp, om) -> out.put(tp, om == null ? -1L : om.offset()));
        return out;
    }

    static List<ConsumerRecord<String, String>> pollExactly(KafkaConsumer<String, String> member, int count) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STEP_SECONDS);
        while (got.size() < count && System.nanoTime() < deadline) {
            member.poll(Duration.ofMillis(200)).forEach(got::add);
        }
        if (got.size() != count) {
            fail("the group member got " + got.size() + " of " + count + " input records within " + STEP_SECONDS + "s");
        }
        return got;
    }

    /** The member's positions on its assignment: the offsets the transaction commits. */
    static Map<TopicPartition, OffsetAndMetadata> positions(KafkaConsumer<String, String> member) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        for (TopicPartition tp : member.assignment()) {
            out.put(tp, new OffsetAndMetadata(member.position(tp, Duration.ofSeconds(15))));
        }
        return out;
    }

    /** One transaction: the inputs' transforms to the sink, and the member's positions. */
    static void transform(KafkaProducer<String, String> transformer, KafkaConsumer<String, String> member,
                          String sink, List<ConsumerRecord<String, String>> inputs) {
        transformer.beginTransaction();
        List<Rec> outputs = new ArrayList<>();
        for (ConsumerRecord<String, String> r : inputs) {
            outputs.add(new Rec(r.partition(), "out-" + r.value()));
        }
        sendAcked(transformer, sink, outputs);
        must("sendOffsetsToTransaction",
                () -> transformer.sendOffsetsToTransaction(positions(member), member.groupMetadata()));
    }

    /** protocol: "classic" or "consumer" (KIP-848), the group member's group.protocol. */
    static void consumeTransformProduce(String protocol) {
        String kind = "ctp-" + protocol;
        String source = createTopic(kind + "-in", 3);
        String sink = createTopic(kind + "-out", 3);
        String group = name(kind + "-group");
        List<TopicPartition> sourceTps = partitions(source, 3);
        List<Rec> inputs = spread("in-", 20, 3);
        try (KafkaProducer<String, String> writer = plainProducer()) {
            sendAcked(writer, source, inputs);
            writer.close(Duration.ofSeconds(10));
        }

        Properties p = common("jtxn-" + kind + "-member");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        KafkaConsumer<String, String> member = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
        member.subscribe(List.of(source));
        KafkaProducer<String, String> transformer = txnProducer(name(kind));

        List<ConsumerRecord<String, String>> round1 = pollExactly(member, 20);
        check(member.assignment().size() == 3, kind + ": the member is assigned all 3 input partitions");
        ConsumerGroupMetadata meta = member.groupMetadata();
        // KIP-447: the transaction carries the member's identity, so the group coordinator
        // can refuse offsets from a member that has been rebalanced away.
        check(meta.generationId() > 0 && !meta.memberId().isEmpty(),
                kind + ": groupMetadata has generation " + meta.generationId() + " and member id " + meta.memberId());
        transform(transformer, member, sink, round1);
        must("commitTransaction", transformer::commitTransaction);

        Map<TopicPartition, Long> ends = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
        for (TopicPartition tp : sourceTps) {
            ends.put(tp, latest(tp, IsolationLevel.READ_UNCOMMITTED));
        }
        // commitTransaction returns once the coordinator logged PrepareCommit; the offsets
        // become stable when the marker reaches __consumer_offsets, shortly after. Both
        // reads ask for stable offsets (the Java consumer always sets require_stable).
        waitUntil(kind + ": after the commit the group's committed offsets reach the input's end " + ends,
                STEP_SECONDS, () -> committedBy(member, sourceTps).equals(ends));
        check(committedByAdmin(group).equals(ends), kind + ": AdminClient (require_stable) shows the same offsets");

        List<Rec> more = spread("in2-", 5, 3);
        try (KafkaProducer<String, String> writer = plainProducer()) {
            sendAcked(writer, source, more);
            writer.close(Duration.ofSeconds(10));
        }
        List<ConsumerRecord<String, String>> round2 = pollExactly(member, 5);
        transform(transformer, member, sink, round2);
        must("abortTransaction", transformer::abortTransaction);
        check(committedBy(member, sourceTps).equals(ends) && committedByAdmin(group).equals(ends),
                kind + ": after the abort the committed offsets have not moved");

        // Offsets sent with a generation the group is not at: the group coordinator answers
        // TxnOffsetCommit with ILLEGAL_GENERATION, which the producer reports as
        // CommitFailedException (an abortable error: the transaction must be aborted).
        // That holds for a KIP-848 group too: Kafka validates the member epoch there and
        // turns its STALE_MEMBER_EPOCH into ILLEGAL_GENERATION for TxnOffsetCommit
        // (OffsetMetadataManager.validateTransactionalOffsetCommit); the producer has no
        // handling for STALE_MEMBER_EPOCH and would fail fatally ("Unexpected error in
        // TxnOffsetCommitResponse"), leaving its transaction open until it times out.
        ConsumerGroupMetadata current = member.groupMetadata();
        ConsumerGroupMetadata stale = new ConsumerGroupMetadata(current.groupId(), current.generationId() + 1,
                current.memberId(), current.groupInstanceId());
        transformer.beginTransaction();
        sendAcked(transformer, sink, List.of(new Rec(0, "out-stale")));
        mustThrow(kind + ": sendOffsetsToTransaction with generation " + stale.generationId() + " (group at "
                        + current.generationId() + ")",
                () -> transformer.sendOffsetsToTransaction(positions(member), stale), CommitFailedException.class);
        must("abortTransaction after the refused offsets", transformer::abortTransaction);
        check(committedBy(member, sourceTps).equals(ends) && committedByAdmin(group).equals(ends),
                kind + ": the refused offsets were not committed");

        transformer.close(Duration.ofSeconds(10));
        member.close(CloseOptions.timeout(Duration.ofSeconds(10)));
        List<String> want = new ArrayList<>();
        for (Rec r : inputs) {
            want.add("out-" + r.value());
        }
        Collections.sort(want);
        check(readToEnd(sink, 3, "read_committed").equals(want),
                kind + ": read_committed sees the 20 committed outputs and none of the aborted ones");
    }

    static void fencing() {
        // The zombie's commit: its transaction is open (records acknowledged) when the
        // successor's initTransactions bumps the epoch and aborts it. Kafka answers the
        // zombie's EndTxn (v4 under TV0/1, v5 under TV2) with PRODUCER_FENCED, which the
        // client turns into the fatal ProducerFencedException.
        String topic = createTopic("fence", 1);
        String sharedId = name("fence");
        KafkaProducer<String, String> zombie = txnProducer(sharedId);
        zombie.beginTransaction();
        sendAcked(zombie, topic, List.of(new Rec(0, "zombie-0"), new Rec(0, "zombie-1")));
        KafkaProducer<String, String> successor = txnProducer(sharedId);
        ok("fencing: the successor's initTransactions completed while the zombie's transaction was open");
        mustThrow("fencing: the zombie's commitTransaction", zombie::commitTransaction, ProducerFencedException.class);
        mustThrow("fencing: the fenced zombie's next beginTransaction", zombie::beginTransaction,
                ProducerFencedException.class);
        zombie.close(Duration.ofSeconds(5));

        successor.beginTransaction();
        sendAcked(successor, topic, List.of(new Rec(0, "successor-0")));
        must("successor commitTransaction", successor::commitTransaction);
        successor.close(Duration.ofSeconds(10));
        check(readToEnd(topic, 1, "read_committed").equals(List.of("successor-0")),
                "fencing: read_committed sees the successor's record and none of the zombie's");
        check(readToEnd(topic, 1, "read_uncommitted").equals(List.of("successor-0", "zombie-0", "zombie-1")),
                "fencing: the zombie's records were written (read_uncommitted sees them), then aborted");

        // The zombie's send to a partition already in its transaction: no AddPartitionsToTxn,
        // the Produce itself carries the old epoch and the partition's producer state (at
        // the abort marker's bumped epoch) refuses it with INVALID_PRODUCER_EPOCH, which the
        // client treats as abortable (InvalidProducerEpochException); commit then rethrows
        // it, and the abort, whose EndTxn carries the old epoch, is fenced. (The send's
        // future completes just before the client records the error, so commit throws
        // either its own copy or, failing the queued EndTxn, the broker's: same class,
        // the message differs; only the class is asserted.)
        String topic2 = createTopic("fence-send", 1);
        String sharedId2 = name("fence-send");
        KafkaProducer<String, String> zombie2 = txnProducer(sharedId2);
        zombie2.beginTransaction();
        sendAcked(zombie2, topic2, List.of(new Rec(0, "zombie-0")));
        KafkaProducer<String, String> successor2 = txnProducer(sharedId2);
        Future<RecordMetadata> late = zombie2.send(new ProducerRecord<>(topic2, 0, null, "zombie-late"));
        zombie2.flush();
        mustFail("fencing: the zombie's send to its partition after the fence", late,
                InvalidProducerEpochException.class);
        mustThrow("fencing: the zombie's commitTransaction after the refused send", zombie2::commitTransaction,
                InvalidProducerEpochException.class);
        mustThrow("fencing: the zombie's abortTransaction", zombie2::abortTransaction, ProducerFencedException.class);
        zombie2.close(Duration.ofSeconds(5));
        successor2.close(Duration.ofSeconds(10));
        check(readToEnd(topic2, 1, "read_committed").isEmpty(),
                "fencing: read_committed sees nothing of the fenced zombie's");
        check(readToEnd(topic2, 1, "read_uncommitted").equals(List.of("zombie-0")),
                "fencing: read_uncommitted sees only the record acknowledged before the fence, not the late one");
    }

    static void timeoutAbort() {
        String topic = createTopic("timeout", 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        String id = name("timeout");
        KafkaProducer<String, String> producer =
                txnProducer(id, Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "3000"));
        producer.beginTransaction();
        sendAcked(producer, topic, List.of(new Rec(0, "stale-0"), new Rec(0, "stale-1")));
        TransactionDescription open = describeTxn(id);
        check(open.state() == TransactionState.ONGOING && open.transactionTimeoutMs() == 3000,
                "timeout: the transaction is Ongoing with a 3000 ms timeout (" + open.state() + ", "
                        + open.transactionTimeoutMs() + ")");
        check(latest(tp, IsolationLevel.READ_COMMITTED) == 0, "timeout: the open transaction holds read_committed's end at 0");

        waitUntil("timeout: the coordinator aborts the expired transaction (read_committed's end passes it)",
                TIMEOUT_ABORT_SECONDS, () -> latest(tp, IsolationLevel.READ_COMMITTED) > 1);
        check(latest(tp, IsolationLevel.READ_COMMITTED) == 3 && latest(tp, IsolationLevel.READ_UNCOMMITTED) == 3,
                "timeout: both ends are 3 (the abort marker took offset 2)");
        waitUntil("timeout: describeTransactions shows CompleteAbort", STEP_SECONDS,
                () -> describeTxn(id).state() == TransactionState.COMPLETE_ABORT);
        TransactionDescription aborted = describeTxn(id);
        // Kafka aborts an expired transaction as a new instance would fence it: with a
        // bumped epoch, so the producer that let it expire cannot continue it.
        check(aborted.producerId() == open.producerId() && aborted.producerEpoch() > open.producerEpoch(),
                "timeout: the abort bumped the epoch (" + open.producerEpoch() + " -> " + aborted.producerEpoch()
                        + ", producer id " + aborted.producerId() + ")");

        // The late commit, with the old epoch. TV0/1 (EndTxn v4): the epoch differs, the
        // coordinator answers PRODUCER_FENCED -> ProducerFencedException. TV2 (EndTxn v5):
        // the old epoch is exactly one below the coordinator's, which TV2 takes for a
        // retry of the request that completed the transaction; a COMMIT "retry" of a
        // CompleteAbort is INVALID_TXN_STATE -> InvalidTxnStateException. Both fatal.
        Class<? extends Exception> expected =
                transactionVersion >= 2 ? InvalidTxnStateException.class : ProducerFencedException.class;
        mustThrow("timeout: the late commitTransaction (transaction.version " + transactionVersion + ")",
                producer::commitTransaction, expected);
        producer.close(Duration.ofSeconds(5));
        check(readToEnd(topic, 1, "read_committed").isEmpty(),
                "timeout: the timed-out records are never delivered under read_committed");
    }

    static void adminViews() {
        String topic = createTopic("admin", 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        String id = name("admin");
        // A plain record first, so the transaction's first offset is 1, not 0.
        try (KafkaProducer<String, String> writer = plainProducer()) {
            sendAcked(writer, topic, List.of(new Rec(0, "plain-0")));
            writer.close(Duration.ofSeconds(10));
        }
        KafkaProducer<String, String> producer =
                txnProducer(id, Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000"));

        TransactionDescription idle = describeTxn(id);
        check(idle.state() == TransactionState.EMPTY && idle.topicPartitions().isEmpty(),
                "admin: after initTransactions describeTransactions shows Empty (" + idle.state() + ")");

        producer.beginTransaction();
        List<Long> offsets = sendAcked(producer, topic,
                List.of(new Rec(0, "txn-0"), new Rec(0, "txn-1"), new Rec(0, "txn-2")));
        check(offsets.equals(List.of(1L, 2L, 3L)), "admin: the transaction's records are at offsets " + offsets);

        TransactionDescription open = describeTxn(id);
        System.out.println("  describeTransactions (open): " + open);
        check(open.state() == TransactionState.ONGOING, "admin: describeTransactions shows Ongoing while open");
        check(open.topicPartitions().equals(Set.of(tp)), "admin: its partitions are " + open.topicPartitions());
        check(open.transactionTimeoutMs() == 60000 && open.transactionStartTimeMs().isPresent()
                        && open.producerId() >= 0,
                "admin: timeout 60000 ms, a start time, producer id " + open.producerId() + " epoch "
                        + open.producerEpoch());

        TransactionListing listing = listed(id, new ListTransactionsOptions());
        check(listing != null && listing.state() == TransactionState.ONGOING && listing.producerId() == open.producerId(),
                "admin: listTransactions lists it as Ongoing with the same producer id (" + listing + ")");
        check(listed(id, new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING))) != null,
                "admin: listTransactions filtered to Ongoing lists it");
        check(listed(id, new ListTransactionsOptions().filterStates(List.of(TransactionState.COMPLETE_COMMIT))) == null,
                "admin: listTransactions filtered to CompleteCommit does not");
        check(listed(id, new ListTransactionsOptions().filterProducerIds(List.of(open.producerId()))) != null,
                "admin: listTransactions filtered to its producer id lists it");
        // KIP-1152 (ListTransactions v2): the whole id must match the pattern.
        String prefix = id.substring(0, id.length() - 2);
        check(listed(id, new ListTransactionsOptions().filterOnTransactionalIdPattern(prefix + ".*")) != null,
                "admin: listTransactions with the pattern " + prefix + ".* lists it");
        check(listed(id, new ListTransactionsOptions().filterOnTransactionalIdPattern(prefix)) == null,
                "admin: the pattern " + prefix + " (a prefix of the id only) does not");

        List<ProducerState> producers = producersOf(tp);
        System.out.println("  describeProducers (open): " + producers);
        ProducerState state = producerOf(tp, open.producerId());
        check(state != null && state.producerEpoch() == open.producerEpoch(),
                "admin: describeProducers shows the transactional producer with its epoch (" + state + ")");
        check(state.currentTransactionStartOffset().equals(OptionalLong.of(1)),
                "admin: its currentTransactionStartOffset is 1 (" + state.currentTransactionStartOffset() + ")");
        check(state.lastSequence() == 2, "admin: its lastSequence is 2 (" + state.lastSequence() + ")");
        boolean plainIdle = producers.stream().anyMatch(s -> s.producerId() != open.producerId()
                && s.currentTransactionStartOffset().isEmpty());
        check(plainIdle, "admin: the plain idempotent producer is listed too, without an open transaction");
        check(latest(tp, IsolationLevel.READ_COMMITTED) == 1,
                "admin: read_committed's end (the LSO) is the transaction's start offset 1");

        must("commitTransaction", producer::commitTransaction);
        // commitTransaction returns at PrepareCommit; CompleteCommit follows the markers.
        waitUntil("admin: describeTransactions reaches CompleteCommit after the commit", STEP_SECONDS,
                () -> describeTxn(id).state() == TransactionState.COMPLETE_COMMIT);
        TransactionDescription done = describeTxn(id);
        System.out.println("  describeTransactions (committed): " + done);
        check(done.topicPartitions().isEmpty() && done.producerId() == open.producerId(),
                "admin: the completed transaction has no partitions left, same producer id");
        TransactionListing after = listed(id, new ListTransactionsOptions());
        check(after != null && after.state() == TransactionState.COMPLETE_COMMIT,
                "admin: listTransactions lists it as CompleteCommit (" + after + ")");
        // CompleteCommit is logged after every marker was written, so the partition has
        // no open transaction for this producer any more.
        ProducerState closed = producerOf(tp, open.producerId());
        check(closed != null && closed.currentTransactionStartOffset().isEmpty(),
                "admin: describeProducers shows no open transaction after the commit (" + closed + ")");
        check(latest(tp, IsolationLevel.READ_COMMITTED) == 5,
                "admin: read_committed's end is 5 (the commit marker took offset 4)");

        producer.beginTransaction();
        sendAcked(producer, topic, List.of(new Rec(0, "txn-aborted")));
        must("abortTransaction", producer::abortTransaction);
        waitUntil("admin: describeTransactions reaches CompleteAbort after an abort", STEP_SECONDS,
                () -> describeTxn(id).state() == TransactionState.COMPLETE_ABORT);
        producer.close(Duration.ofSeconds(10));
    }

    public static void main(String[] args) {
        onFail = TransactionsDriver::deleteTopics;
        awaitTrace = Trace.AFTER;
        Set<String> wanted = new HashSet<>(args.length == 0 ? SCENARIOS : List.of(args));
        for (String w : wanted) {
            if (!SCENARIOS.contains(w)) {
                System.out.println("FAIL: unknown scenario " + w + " (known: " + SCENARIOS + ")");
                System.exit(2);
            }
        }
        watchdog(WATCHDOG_SECONDS, "run exceeded " + WATCHDOG_SECONDS + "s");

        long start = System.nanoTime();
        run = UUID.randomUUID().toString().substring(0, 8);
        admin = newAdmin("jtxn-admin");
        transactionVersion = finalizedTransactionVersion();
        System.out.println("kafka-clients " + kafkaVersion()
                + " transactions against " + bootstrap + " (run " + run + "; the broker finalizes transaction.version="
                + transactionVersion + ", so the client uses the TV" + (transactionVersion >= 2 ? "2" : "0/1")
                + " protocol)");

        Map<String, Runnable> scenarios = new LinkedHashMap<>();
        scenarios.put("visibility", TransactionsDriver::visibility);
        scenarios.put("ctp-classic", () -> consumeTransformProduce("classic"));
        scenarios.put("ctp-consumer", () -> consumeTransformProduce("consumer"));
        scenarios.put("fencing", TransactionsDriver::fencing);
        scenarios.put("timeout", TransactionsDriver::timeoutAbort);
        scenarios.put("admin", TransactionsDriver::adminViews);
        for (Map.Entry<String, Runnable> s : scenarios.entrySet()) {
            if (wanted.contains(s.getKey())) {
                System.out.println("--- " + s.getKey());
                System.out.flush();
                s.getValue().run();
            }
        }

        deleteTopics();
        admin.close(Duration.ofSeconds(10));
        System.out.printf("PASS transactions (kafka-clients %s, Java) in %.1fs%n",
                kafkaVersion(), (System.nanoTime() - start) / 1e9);
        System.exit(0);
    }
}

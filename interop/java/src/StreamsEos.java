// Kafka Streams exactly-once interop: a word count (kafka-streams 4.4.0, or the release
// STRAND_KAFKA_VERSION names; processing.guarantee=exactly_once_v2) against Strand,
// validated first against Apache Kafka 4.1.1 and 4.4.0.
//
// Lines -> flatMapValues(words) -> groupBy(word) -> count() -> output topic. The groupBy
// puts a repartition topic between the two sub-topologies and the count's store has a
// changelog topic, so one run exercises everything exactly_once_v2 relies on: one
// transactional producer per stream thread (transactional.id from the application id and
// the thread), sendOffsetsToTransaction with the group's metadata (KIP-447), read_committed
// consumption of the repartition topic, transactional changelog writes, DeleteRecords on
// the repartition topic after commits, and the internal topics' creation.
//
// The input is a fixed set of lines with a known word distribution. A read_committed
// consumer of the output keeps the latest count per word and the run passes once it
// equals the expected counts exactly. On the way, every committed update must be larger
// than the last one for its word and never above the final count: a duplicate (a record
// counted twice, the failure exactly-once rules out) would show as a value above it.
// After close(), the application's committed input offsets (read with require_stable)
// are the input's end.
//
// Prints "ok: ..." per check and "FAIL: ..." on the first failed one (exit 1). Every wait
// has a deadline and a watchdog halts the JVM if the run overstays; nothing asserts on how
// long an operation took. Topics, group and transactional ids carry a per-run suffix.
//
// Environment: STRAND_BOOTSTRAP (default 127.0.0.1:9092); STRAND_STREAMS_STATE_DIR (Streams'
// state.dir; default a fresh temp dir).

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import java.util.stream.LongStream;

import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Grouped;

public final class StreamsEos extends StreamsWordCount {
    static final int LINES = 2000;
    static final long OUTPUT_DEADLINE_SECONDS = 120;
    static final long WATCHDOG_SECONDS = 300;

    // ---- the input -------------------------------------------------------------------

    static void produceInput(String topic) {
        Properties p = common("streams-eos-input");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(),
                new StringSerializer())) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < LINES; i++) {
                // Unkeyed and spread over the partitions: the groupBy must repartition.
                futures.add(producer.send(new ProducerRecord<>(topic, i % PARTITIONS, null, line(i))));
            }
            producer.flush();
            for (Future<RecordMetadata> f : futures) {
                await("produce input", f);
            }
            producer.close(Duration.ofSeconds(10));
        }
        ok("produced " + LINES + " lines to " + topic);
    }

    // ---- the application -------------------------------------------------------------

    static KafkaStreams startApp(AtomicReference<Throwable> died) throws IOException {
        stateDir = makeStateDir("strand-streams-eos-");
        // Two threads: two transactional producers, and the tasks spread between them.
        Properties p = eosProps(appId, stateDir, 2);
        // Single broker: the internal topics (repartition, changelog) with one replica.
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);

        KafkaStreams app = new KafkaStreams(topology(Grouped.with(Serdes.String(), Serdes.String()), "counts"), p);
        app.setUncaughtExceptionHandler(e -> {
            died.compareAndSet(null, e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        app.start();
        return app;
    }

    /**
     * Reads the output under read_committed until the latest count per word equals the
     * expected counts, checking every committed update on the way; fails at the deadline.
     */
    static void awaitCounts(String output, Map<String, Long> expected, AtomicReference<Throwable> died) {
        Properties p = common("streams-eos-verifier");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        Map<String, Long> latest = new TreeMap<>();
        long updates = 0;
        try (KafkaConsumer<String, Long> reader = new KafkaConsumer<>(p, new StringDeserializer(),
                new LongDeserializer())) {
            List<TopicPartition> tps = partitions(output);
            reader.assign(tps);
            reader.seekToBeginning(tps);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(OUTPUT_DEADLINE_SECONDS);
            while (!latest.equals(expected)) {
                if (died.get() != null) {
                    died.get().printStackTrace(System.out);
                    fail("the Streams application died: " + died.get());
                }
                if (System.nanoTime() > deadline) {
                    Map<String, String> diff = new TreeMap<>();
                    for (Map.Entry<String, Long> e : expected.entrySet()) {
                        Long got = latest.get(e.getKey());
                        if (!e.getValue().equals(got)) {
                            diff.put(e.getKey(), got + " (want " + e.getValue() + ")");
                        }
                    }
                    fail("read_committed output did not reach the expected counts within " + OUTPUT_DEADLINE_SECONDS
                            + "s; Streams state " + streams.state() + ", " + updates + " updates read, differing: "
                            + diff);
                }
                for (ConsumerRecord<String, Long> r : reader.poll(Duration.ofMillis(200))) {
                    updates++;
                    Long want = expected.get(r.key());
                    if (want == null) {
                        fail("output has a word that is not in the input: " + r.key());
                    }
                    Long before = latest.get(r.key());
                    if (r.value() > want) {
                        fail("word " + r.key() + " counted " + r.value() + " > " + want
                                + " (a duplicate: an input record counted twice)");
                    }
                    if (before != null && r.value() <= before) {
                        fail("word " + r.key() + ": committed count went from " + before + " to " + r.value());
                    }
                    latest.put(r.key(), r.value());
                }
            }
            reader.close(CloseOptions.timeout(Duration.ofSeconds(10)));
        }
        ok("read_committed output: the latest count of every one of the " + expected.size()
                + " words equals the expected count (" + updates + " committed updates read, each larger than the"
                + " last for its word and none above the final count)");
    }

    public static void main(String[] args) throws IOException {
        onFail = () -> cleanUp(true);
        awaitTrace = Trace.BEFORE;
        metadataMaxAgeMs = null;
        watchdog(WATCHDOG_SECONDS, "run exceeded " + WATCHDOG_SECONDS + "s");

        long start = System.nanoTime();
        String run = UUID.randomUUID().toString().substring(0, 8);
        appId = "strand-eos-" + run;
        input = "eos-lines-" + run;
        output = "eos-counts-" + run;
        System.out.println("kafka-streams " + kafkaVersion()
                + " exactly_once_v2 word count against " + bootstrap + " (application.id " + appId + ")");

        admin = newAdmin("streams-eos-admin");
        await("createTopics", admin.createTopics(List.of(new NewTopic(input, PARTITIONS, (short) 1),
                new NewTopic(output, PARTITIONS, (short) 1))).all());
        createdTopics.add(input);
        createdTopics.add(output);

        Map<String, Long> expected = expectedCounts(LongStream.range(0, LINES).boxed().collect(Collectors.toList()));
        long total = expected.values().stream().mapToLong(Long::longValue).sum();
        check(expected.size() == vocabulary, "input: " + LINES + " lines, " + total + " words, " + expected.size()
                + " distinct (counts " + expected.values().stream().mapToLong(Long::longValue).min().orElse(0) + ".."
                + expected.values().stream().mapToLong(Long::longValue).max().orElse(0) + ")");
        produceInput(input);

        AtomicReference<Throwable> died = new AtomicReference<>();
        streams = startApp(died);
        awaitCounts(output, expected, died);

        Set<String> internal = await("listTopics", admin.listTopics().names()).stream()
                .filter(t -> t.startsWith(appId + "-")).collect(Collectors.toCollection(TreeSet::new));
        check(internal.stream().anyMatch(t -> t.endsWith("-repartition"))
                        && internal.stream().anyMatch(t -> t.endsWith("-changelog")),
                "Streams created its internal topics " + internal);

        check(streams.close(Duration.ofSeconds(STEP_SECONDS)), "KafkaStreams.close() completed");
        streams.cleanUp();
        streams = null;

        // The transaction that made the last counts visible carried the input offsets
        // past every line (each line yields at least one word), so the stable committed
        // offsets are the input's end.
        checkCommittedInput("the application's", StreamsWordCount::stableOffsets);

        cleanUp(true);
        admin.close(Duration.ofSeconds(10));
        System.out.printf("PASS streams-eos (kafka-streams %s, exactly_once_v2) in %.1fs%n",
                kafkaVersion(), (System.nanoTime() - start) / 1e9);
        System.exit(0);
    }
}

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
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
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
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class StreamsEos {
    static final int LINES = 2000;
    static final int VOCABULARY = 50;
    static final int PARTITIONS = 3;
    static final long STEP_SECONDS = 30;
    static final long OUTPUT_DEADLINE_SECONDS = 120;
    static final long WATCHDOG_SECONDS = 300;

    static String bootstrap;
    static Admin admin;
    static String appId;
    static final List<String> createdTopics = new ArrayList<>();
    static KafkaStreams streams;
    static Path stateDir;

    // ---- reporting -------------------------------------------------------------------

    static void ok(String message) {
        System.out.println("ok: " + message);
        System.out.flush();
    }

    static void fail(String message) {
        System.out.println("FAIL: " + message);
        System.out.flush();
        cleanUp();
        System.exit(1);
    }

    static void check(boolean condition, String message) {
        if (!condition) {
            fail(message);
        }
        ok(message);
    }

    static <T> T await(String what, Future<T> future) {
        try {
            return future.get(STEP_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            fail(what + ": no answer within " + STEP_SECONDS + "s");
        } catch (ExecutionException e) {
            e.getCause().printStackTrace(System.out);
            fail(what + ": " + e.getCause());
        } catch (InterruptedException e) {
            fail(what + ": interrupted");
        }
        throw new AssertionError("unreachable");
    }

    /** Best effort: the app stopped, its local state, its topics (internal ones too). */
    static void cleanUp() {
        if (streams != null) {
            streams.close(Duration.ofSeconds(10));
            streams.cleanUp();
            streams = null;
        }
        if (stateDir != null) {
            try (Stream<Path> paths = Files.walk(stateDir)) {
                paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException ignored) {
                // best effort
            }
        }
        if (admin == null) {
            return;
        }
        try {
            List<String> doomed = new ArrayList<>(createdTopics);
            for (String t : admin.listTopics().names().get(10, TimeUnit.SECONDS)) {
                if (t.startsWith(appId + "-")) {
                    doomed.add(t);
                }
            }
            admin.deleteTopics(doomed).all().get(10, TimeUnit.SECONDS);
        } catch (Exception ignored) {
            // best effort
        }
    }

    // ---- the input -------------------------------------------------------------------

    static String word(int i) {
        return String.format("w%02d", i);
    }

    /**
     * Line i has 1 to 7 words, picked by strides that are co-prime with the vocabulary, so
     * every word occurs and the counts differ from word to word (uneven distribution).
     */
    static String line(int i) {
        int n = 1 + i % 7;
        StringBuilder sb = new StringBuilder();
        for (int j = 0; j < n; j++) {
            int w = (i * 7 + j * j * 3 + j * 11) % VOCABULARY;
            if (j > 0) {
                sb.append(' ');
            }
            sb.append(word(w));
        }
        return sb.toString();
    }

    static List<String> words(String line) {
        return Arrays.asList(line.toLowerCase().split("\\s+"));
    }

    static Map<String, Long> expectedCounts() {
        Map<String, Long> counts = new TreeMap<>();
        for (int i = 0; i < LINES; i++) {
            for (String w : words(line(i))) {
                counts.merge(w, 1L, Long::sum);
            }
        }
        return counts;
    }

    static Properties common(String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        p.put("request.timeout.ms", "15000");
        p.put("socket.connection.setup.timeout.ms", "5000");
        p.put("socket.connection.setup.timeout.max.ms", "10000");
        p.put("reconnect.backoff.max.ms", "1000");
        return p;
    }

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

    static KafkaStreams startApp(String input, String output, AtomicReference<Throwable> died) throws IOException {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(StreamsEos::words)
                .groupBy((key, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        // Streams warns about (and the OS may clean) a state dir under /tmp: the script
        // passes one in its build dir; a temp dir otherwise. Removed at the end either way.
        String dir = System.getenv("STRAND_STREAMS_STATE_DIR");
        stateDir = dir != null ? Files.createDirectories(Path.of(dir)) : Files.createTempDirectory("strand-streams-eos-");
        Properties p = common(appId);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        // Single broker: the internal topics (repartition, changelog) with one replica.
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // Two threads: two transactional producers, and the tasks spread between them.
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        KafkaStreams app = new KafkaStreams(builder.build(), p);
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
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < PARTITIONS; i++) {
                tps.add(new TopicPartition(output, i));
            }
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

    /**
     * The Kafka client version on the classpath, as AppInfoParser reports it (it reads the
     * same kafka/kafka-version.properties; that class is internal and Kafka 4.4 moved it to
     * org.apache.kafka.common.utils.internals, so it is not called, to compile against both).
     */
    static String kafkaVersion() {
        try (java.io.InputStream in = org.apache.kafka.clients.producer.KafkaProducer.class
                .getResourceAsStream("/kafka/kafka-version.properties")) {
            java.util.Properties p = new java.util.Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "unknown");
        } catch (java.io.IOException e) {
            return "unknown";
        }
    }

    public static void main(String[] args) throws IOException {
        bootstrap = System.getenv().getOrDefault("STRAND_BOOTSTRAP", "127.0.0.1:9092");
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(TimeUnit.SECONDS.toMillis(WATCHDOG_SECONDS));
            } catch (InterruptedException e) {
                return;
            }
            System.out.println("FAIL: watchdog: run exceeded " + WATCHDOG_SECONDS + "s");
            System.out.flush();
            Runtime.getRuntime().halt(2);
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        long start = System.nanoTime();
        String run = UUID.randomUUID().toString().substring(0, 8);
        appId = "strand-eos-" + run;
        String input = "eos-lines-" + run;
        String output = "eos-counts-" + run;
        System.out.println("kafka-streams " + kafkaVersion()
                + " exactly_once_v2 word count against " + bootstrap + " (application.id " + appId + ")");

        Properties adminProps = common("streams-eos-admin");
        adminProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        admin = Admin.create(adminProps);
        await("createTopics", admin.createTopics(List.of(new NewTopic(input, PARTITIONS, (short) 1),
                new NewTopic(output, PARTITIONS, (short) 1))).all());
        createdTopics.add(input);
        createdTopics.add(output);

        Map<String, Long> expected = expectedCounts();
        long total = expected.values().stream().mapToLong(Long::longValue).sum();
        check(expected.size() == VOCABULARY, "input: " + LINES + " lines, " + total + " words, " + expected.size()
                + " distinct (counts " + expected.values().stream().mapToLong(Long::longValue).min().orElse(0) + ".."
                + expected.values().stream().mapToLong(Long::longValue).max().orElse(0) + ")");
        produceInput(input);

        AtomicReference<Throwable> died = new AtomicReference<>();
        streams = startApp(input, output, died);
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
        Map<TopicPartition, OffsetSpec> latestSpec = new HashMap<>();
        for (int i = 0; i < PARTITIONS; i++) {
            latestSpec.put(new TopicPartition(input, i), OffsetSpec.latest());
        }
        Map<TopicPartition, Long> ends = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
        await("listOffsets input", admin.listOffsets(latestSpec).all()).forEach((tp, info) -> ends.put(tp, info.offset()));
        Map<TopicPartition, OffsetAndMetadata> committed = await("listConsumerGroupOffsets " + appId,
                admin.listConsumerGroupOffsets(appId, new ListConsumerGroupOffsetsOptions().requireStable(true))
                        .partitionsToOffsetAndMetadata());
        Map<TopicPartition, Long> committedInput = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
        committed.forEach((tp, om) -> {
            if (tp.topic().equals(input) && om != null) {
                committedInput.put(tp, om.offset());
            }
        });
        check(committedInput.equals(ends), "the application's committed input offsets " + committedInput
                + " are the input's end " + ends);

        cleanUp();
        admin.close(Duration.ofSeconds(10));
        System.out.printf("PASS streams-eos (kafka-streams %s, exactly_once_v2) in %.1fs%n",
                kafkaVersion(), (System.nanoTime() - start) / 1e9);
        System.exit(0);
    }
}

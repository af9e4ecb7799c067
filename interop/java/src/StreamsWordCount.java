// The Kafka Streams word count the exactly-once drivers share (StreamsEos, StreamsEosCluster,
// StreamsGroupsFailover; their scripts compile this file and Checks.java with them): the
// input (line i: 1 to 7 words of w00, w01, ...), the topology (lines -> flatMapValues(words)
// -> groupBy(word) -> count() -> output) and its exactly_once_v2 settings; and for the runs
// fed continuously (StreamsEosCluster, StreamsGroupsFailover) the idempotent input producer
// (line i, key "line-<i>", partition i % 3, at `rate` lines a second), the read_committed
// verifier of the output (every update of a word is its last plus one) and the checks once
// the input stops. Only API kafka-streams 4.1 has too (StreamsEos and StreamsEosCluster run
// with it).

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiConsumer;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.apache.kafka.clients.admin.Admin;
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
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

class StreamsWordCount extends Checks {
    static final int PARTITIONS = 3;
    /** For the output to reach the expected counts once the input stopped. */
    static final long FINAL_SECONDS = 120;
    /** For a read of a whole topic. */
    static final long READ_SECONDS = 60;

    /** How many words (w00, w01, ...) the lines use. */
    static int vocabulary = 50;
    /** Input lines a second and the most lines produced (the fed runs). */
    static int rate = 100;
    static int maxLines;
    /** Of the topics and of Streams' internal ones (the fed runs). */
    static short replication = 3;
    static int minIsr = 2;
    /** The client ids' prefix: <clients>-input, -verifier, -reader. */
    static String clients;

    static Admin admin;
    static String appId;
    static String input;
    static String output;
    static final List<String> createdTopics = new ArrayList<>();
    /** The one KafkaStreams instance of StreamsEos and StreamsEosCluster. */
    static volatile KafkaStreams streams;
    /** Streams' state dir (the parent of the instances' ones for StreamsGroupsFailover). */
    static Path stateDir;
    /** The first Streams failure: checkAlive() fails the run with deathMessage of it. */
    static final AtomicReference<Throwable> died = new AtomicReference<>();
    static Function<Throwable, String> deathMessage = t -> "a Streams thread died: " + t;
    static InputProducer producer;
    static Verifier verifier;

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
            int w = (i * 7 + j * j * 3 + j * 11) % vocabulary;
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

    /** Every word's count in the given lines. */
    static Map<String, Long> expectedCounts(Collection<Long> lines) {
        Map<String, Long> counts = new TreeMap<>();
        for (long i : lines) {
            for (String w : words(line((int) i))) {
                counts.merge(w, 1L, Long::sum);
            }
        }
        return counts;
    }

    static List<TopicPartition> partitions(String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) {
            tps.add(new TopicPartition(topic, i));
        }
        return tps;
    }

    /** The input and output topics, with `replication` and min.insync.replicas `minIsr`. */
    static void createTopics() {
        Map<String, String> configs = Map.of(TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG, String.valueOf(minIsr));
        await("createTopics", admin.createTopics(List.of(
                new NewTopic(input, PARTITIONS, replication).configs(configs),
                new NewTopic(output, PARTITIONS, replication).configs(configs))).all());
        createdTopics.add(input);
        createdTopics.add(output);
    }

    // ---- the application -------------------------------------------------------------

    /** input -> flatMapValues(words) -> groupBy(word, grouped) -> count(store) -> output. */
    static Topology topology(Grouped<String, String> grouped, String store) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(StreamsWordCount::words)
                .groupBy((key, w) -> w, grouped)
                .count(Materialized.as(store))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    /**
     * An instance's settings: exactly_once_v2 for `appId`, `threads` stream threads (one
     * transactional producer each), its state dir, the input read from the start.
     */
    static Properties eosProps(String clientId, Path dir, int threads) {
        Properties p = common(clientId);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
        p.put(StreamsConfig.STATE_DIR_CONFIG, dir.toString());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        return p;
    }

    /**
     * eosProps and, for the fed runs, a commit every 100 ms and no record cache (one count
     * update per input word, checkable update by update), the internal topics with
     * `replication` and min.insync.replicas `minIsr`.
     */
    static Properties fedProps(String clientId, Path dir, int threads) {
        Properties p = eosProps(clientId, dir, threads);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, (int) replication);
        p.put(StreamsConfig.topicPrefix(TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG), String.valueOf(minIsr));
        return p;
    }

    /**
     * Streams warns about (and the OS may clean) a state dir under /tmp: the scripts pass one
     * in their build dir (STRAND_STREAMS_STATE_DIR); a fresh temp dir otherwise.
     */
    static Path makeStateDir(String tempPrefix) throws IOException {
        String dir = System.getenv("STRAND_STREAMS_STATE_DIR");
        return dir != null ? Files.createDirectories(Path.of(dir)) : Files.createTempDirectory(tempPrefix);
    }

    /** Best effort: the state dir removed. */
    static void removeStateDir() {
        if (stateDir != null) {
            try (Stream<Path> paths = Files.walk(stateDir)) {
                paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException ignored) {
                // best effort
            }
        }
    }

    /**
     * Best effort: `streams` stopped, its local state and, with deleteTopics, its topics
     * (internal ones too; a failed run of StreamsEosCluster keeps them for a look at the logs).
     */
    static void cleanUp(boolean deleteTopics) {
        KafkaStreams app = streams;
        if (app != null) {
            streams = null;
            app.close(Duration.ofSeconds(10));
            app.cleanUp();
        }
        removeStateDir();
        if (admin == null || !deleteTopics) {
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

    // ---- the fed runs ----------------------------------------------------------------

    /** Line i to partition i % PARTITIONS at `rate` lines a second until stopped. */
    static final class InputProducer implements Runnable {
        final KafkaProducer<String, String> kafka;
        final Thread thread = new Thread(this, "input-producer");
        final AtomicLong sent = new AtomicLong();
        final AtomicLong acked = new AtomicLong();
        /** Lines whose send failed: written or not, the input topic tells. */
        final Set<Integer> failed = new ConcurrentSkipListSet<>();
        final AtomicReference<Exception> firstFailure = new AtomicReference<>();
        /** send() itself threw: the producer stopped. */
        final AtomicReference<Exception> error = new AtomicReference<>();
        volatile boolean stop;

        InputProducer() {
            Properties p = common(clients + "-input");
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            p.put(ProducerConfig.ACKS_CONFIG, "all");
            p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
            p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
            kafka = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        }

        @Override
        public void run() {
            // Ticks of 50 ms, rate/20 lines each; a tick that ran late is not made up.
            int perTick = Math.max(1, rate / 20);
            int i = 0;
            try {
                while (!stop && i < maxLines) {
                    long tick = System.nanoTime();
                    for (int k = 0; k < perTick && i < maxLines; k++, i++) {
                        int n = i;
                        kafka.send(new ProducerRecord<>(input, i % PARTITIONS, "line-" + i, line(i)), (md, e) -> {
                            if (e != null) {
                                failed.add(n);
                                if (firstFailure.compareAndSet(null, e)) {
                                    System.out.println("input producer: line " + n + " not acknowledged: " + e);
                                    System.out.flush();
                                }
                            } else {
                                acked.incrementAndGet();
                            }
                        });
                        sent.set(i + 1);
                    }
                    long left = TimeUnit.MILLISECONDS.toNanos(50) - (System.nanoTime() - tick);
                    if (left > 0) {
                        Thread.sleep(TimeUnit.NANOSECONDS.toMillis(left));
                    }
                }
            } catch (Exception e) {
                error.compareAndSet(null, e);
            }
        }

        /** Stops, waits for every acknowledgement; returns the number of lines sent. */
        long finish() throws InterruptedException {
            stop = true;
            thread.join(TimeUnit.SECONDS.toMillis(STEP_SECONDS));
            if (thread.isAlive()) {
                fail("input producer: send() still blocked " + STEP_SECONDS + "s after stop");
            }
            kafka.flush();
            kafka.close(Duration.ofSeconds(10));
            if (error.get() != null) {
                error.get().printStackTrace(System.out);
                fail("input producer: " + error.get());
            }
            if (acked.get() + failed.size() != sent.get()) {
                fail("input producer: " + sent.get() + " sent, " + acked.get() + " acknowledged, " + failed.size()
                        + " failed after flush() and close()");
            }
            return sent.get();
        }
    }

    /**
     * read_committed over the output from its start: every update of a word is its last
     * update plus one (the first 1).
     */
    static final class Verifier implements Runnable {
        final Thread thread = new Thread(this, "verifier");
        final Map<String, Long> last = new HashMap<>();
        final AtomicLong updates = new AtomicLong();
        final AtomicReference<String> violation = new AtomicReference<>();
        volatile boolean stop;

        @Override
        public void run() {
            Properties p = common(clients + "-verifier");
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
            p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
            try (KafkaConsumer<byte[], byte[]> reader = new KafkaConsumer<>(p, new ByteArrayDeserializer(),
                    new ByteArrayDeserializer())) {
                List<TopicPartition> tps = partitions(output);
                reader.assign(tps);
                reader.seekToBeginning(tps);
                while (!stop) {
                    for (ConsumerRecord<byte[], byte[]> r : reader.poll(Duration.ofMillis(200))) {
                        String w = new String(r.key(), StandardCharsets.UTF_8);
                        long v = ByteBuffer.wrap(r.value()).getLong();
                        synchronized (this) {
                            long before = last.getOrDefault(w, 0L);
                            if (v != before + 1 && violation.get() == null) {
                                violation.set("read_committed output " + r.topic() + "-" + r.partition() + "@"
                                        + r.offset() + ": word " + w + " count " + v + " after " + before
                                        + " (want " + (before + 1) + "): "
                                        + (v <= before ? "an input record counted twice" : "updates missing"));
                            }
                            last.put(w, v);
                        }
                        updates.incrementAndGet();
                    }
                }
                reader.close(CloseOptions.timeout(Duration.ofSeconds(10)));
            } catch (Exception e) {
                e.printStackTrace(System.out);
                violation.compareAndSet(null, "verifier: " + e);
            }
        }

        synchronized Map<String, Long> snapshot() {
            return new TreeMap<>(last);
        }
    }

    /**
     * Every record of the topic's partitions up to their end (the last stable offset for
     * read_committed), in partition order, handed to `each`.
     */
    static long readAll(String topic, String isolation, BiConsumer<TopicPartition, ConsumerRecord<byte[], byte[]>> each) {
        Properties p = common(clients + "-reader");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        long n = 0;
        try (KafkaConsumer<byte[], byte[]> reader = new KafkaConsumer<>(p, new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            List<TopicPartition> tps = partitions(topic);
            reader.assign(tps);
            reader.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = reader.endOffsets(tps, Duration.ofSeconds(STEP_SECONDS));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(READ_SECONDS);
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (reader.position(tp, Duration.ofSeconds(STEP_SECONDS)) < ends.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    Map<TopicPartition, Long> positions = new HashMap<>();
                    for (TopicPartition tp : tps) {
                        positions.put(tp, reader.position(tp));
                    }
                    fail(isolation + " read of " + topic + " did not reach the end " + ends + " within "
                            + READ_SECONDS + "s (positions " + positions + ")");
                }
                for (ConsumerRecord<byte[], byte[]> r : reader.poll(Duration.ofMillis(200))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (r.offset() < ends.get(tp)) {
                        each.accept(tp, r);
                        n++;
                    }
                }
            }
            reader.close(CloseOptions.timeout(Duration.ofSeconds(10)));
        }
        return n;
    }

    /** A failure as soon as one shows: Streams died, the verifier saw a bad update, the producer stopped. */
    static void checkAlive() {
        if (died.get() != null) {
            died.get().printStackTrace(System.out);
            fail(deathMessage.apply(died.get()));
        }
        if (verifier.violation.get() != null) {
            fail(verifier.violation.get());
        }
        if (producer.error.get() != null) {
            producer.error.get().printStackTrace(System.out);
            fail("input producer: " + producer.error.get());
        }
    }

    /** Every second "progress: lines=.. acked=.. updates=.. <state>", then checkAlive(). */
    static void progress(Supplier<String> state) {
        while (true) {
            try {
                Thread.sleep(1000);
            } catch (InterruptedException e) {
                return;
            }
            System.out.println("progress: lines=" + producer.sent.get() + " acked=" + producer.acked.get()
                    + " updates=" + verifier.updates.get() + " " + state.get());
            System.out.flush();
            checkAlive();
        }
    }

    /**
     * Stops the input and checks the topic holds each line at most once, on its partition,
     * unchanged, and every acknowledged one. A line whose send failed may be there or not
     * (an idempotent producer's batch can be written and still time out: its retry to a new
     * leader falls outside the five batches the broker remembers when newer ones went there
     * first, with Kafka as with Strand): the expected counts are those of the lines the topic
     * holds, returned. With countFailed the check says how many failed sends were written.
     */
    static Map<String, Long> finishInput(boolean countFailed) throws InterruptedException {
        long lines = producer.finish();
        Set<Integer> failed = producer.failed;
        ok("input: " + lines + " lines sent, " + producer.acked.get() + " acknowledged, " + failed.size()
                + " failed" + (failed.isEmpty() ? "" : " (first " + producer.firstFailure.get() + ")"));

        Map<Long, Integer> seen = new HashMap<>();
        List<String> bad = new ArrayList<>();
        long inputRecords = readAll(input, "read_uncommitted", (tp, r) -> {
            String key = new String(r.key(), StandardCharsets.UTF_8);
            long i = Long.parseLong(key.substring("line-".length()));
            seen.merge(i, 1, Integer::sum);
            if (tp.partition() != i % PARTITIONS || !new String(r.value(), StandardCharsets.UTF_8).equals(line((int) i))) {
                bad.add(tp + "@" + r.offset() + " " + key);
            }
        });
        List<Long> twice = seen.entrySet().stream().filter(e -> e.getValue() > 1).map(Map.Entry::getKey).sorted()
                .limit(10).collect(Collectors.toList());
        long missing = 0;
        long failedThere = 0;
        for (long i = 0; i < lines; i++) {
            if (failed.contains((int) i)) {
                failedThere += seen.containsKey(i) ? 1 : 0;
            } else if (!seen.containsKey(i)) {
                missing++;
            }
        }
        long beyond = seen.keySet().stream().filter(i -> i < 0 || i >= lines).count();
        check(twice.isEmpty() && bad.isEmpty() && missing == 0 && beyond == 0, "input topic: " + inputRecords
                + " records, each line at most once and every acknowledged one (twice " + twice
                + ", acknowledged but missing " + missing + ", unknown " + beyond + ", misplaced or altered "
                + bad.subList(0, Math.min(10, bad.size()))
                + (countFailed ? "; of the " + failed.size() + " failed sends " + failedThere + " written" : "") + ")");
        return expectedCounts(seen.keySet());
    }

    /**
     * Waits for the verifier's latest counts to be `expected`; past FINAL_SECONDS `diagnose`
     * prints what may help and the run fails, saying `state`. Then stops the verifier.
     */
    static void awaitCounts(Map<String, Long> expected, Supplier<String> state, Runnable diagnose)
            throws InterruptedException {
        long total = expected.values().stream().mapToLong(Long::longValue).sum();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(FINAL_SECONDS);
        while (!verifier.snapshot().equals(expected)) {
            checkAlive();
            if (System.nanoTime() > deadline) {
                Map<String, Long> got = verifier.snapshot();
                Map<String, String> diff = new TreeMap<>();
                for (Map.Entry<String, Long> e : expected.entrySet()) {
                    if (!e.getValue().equals(got.get(e.getKey()))) {
                        diff.put(e.getKey(), got.get(e.getKey()) + " (want " + e.getValue() + ")");
                    }
                }
                diagnose.run();
                fail("read_committed output did not reach the expected counts within " + FINAL_SECONDS + "s; "
                        + state.get() + ", " + verifier.updates.get() + " updates read, differing: " + diff);
            }
            Thread.sleep(100);
        }
        checkAlive();
        ok("read_committed output (while running): " + verifier.updates.get() + " updates, each the last of its"
                + " word plus one; the latest count of every one of the " + expected.size()
                + " words equals its count in the input (" + total + " words)");
    }

    static void stopVerifier() throws InterruptedException {
        verifier.stop = true;
        verifier.thread.join(TimeUnit.SECONDS.toMillis(STEP_SECONDS));
    }

    /**
     * After the app closed, a fresh read_committed read of the whole output: exactly 1..count
     * per word, nothing else. How many more records read_uncommitted sees (those of aborted
     * transactions) is reported, followed by `note`.
     */
    static void checkOutput(Map<String, Long> expected, String note) {
        long total = expected.values().stream().mapToLong(Long::longValue).sum();
        Map<String, Long> latest = new TreeMap<>();
        List<String> wrong = new ArrayList<>();
        long committed = readAll(output, "read_committed", (tp, r) -> {
            String w = new String(r.key(), StandardCharsets.UTF_8);
            long v = ByteBuffer.wrap(r.value()).getLong();
            long before = latest.getOrDefault(w, 0L);
            if (v != before + 1 && wrong.size() < 10) {
                wrong.add(tp + "@" + r.offset() + " " + w + "=" + v + " after " + before);
            }
            latest.put(w, v);
        });
        check(wrong.isEmpty() && latest.equals(expected) && committed == total, "read_committed output after close: "
                + committed + " records, exactly 1..count for each word, in order (out of sequence: " + wrong + ")");
        long uncommitted = readAll(output, "read_uncommitted", (tp, r) -> { });
        ok("read_uncommitted output: " + uncommitted + " records, " + (uncommitted - committed)
                + " more than read_committed " + note);
    }

    /** The application's stable committed offsets (require_stable), as a consumer group's. */
    static Map<TopicPartition, OffsetAndMetadata> stableOffsets() {
        return await("listConsumerGroupOffsets " + appId,
                admin.listConsumerGroupOffsets(appId, new ListConsumerGroupOffsetsOptions().requireStable(true))
                        .partitionsToOffsetAndMetadata());
    }

    /** `whose` committed input offsets (asked for after the input's ends) are the input's end. */
    static void checkCommittedInput(String whose, Supplier<Map<TopicPartition, OffsetAndMetadata>> offsets) {
        Map<TopicPartition, OffsetSpec> latestSpec = new HashMap<>();
        for (TopicPartition tp : partitions(input)) {
            latestSpec.put(tp, OffsetSpec.latest());
        }
        Map<TopicPartition, Long> ends = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
        await("listOffsets input", admin.listOffsets(latestSpec).all()).forEach((tp, info) -> ends.put(tp, info.offset()));
        Map<TopicPartition, Long> committedInput = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
        offsets.get().forEach((tp, om) -> {
            if (tp.topic().equals(input) && om != null) {
                committedInput.put(tp, om.offset());
            }
        });
        check(committedInput.equals(ends), whose + " committed input offsets " + committedInput
                + " are the input's end " + ends);
    }
}

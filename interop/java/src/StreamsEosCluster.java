// Kafka Streams exactly-once through broker faults: a word count (kafka-streams 4.4.0,
// processing.guarantee=exactly_once_v2, commit.interval.ms 100) fed continuously while
// interop/cluster/streams_eos_failover_test.py kills nodes of a 3-node Strand cluster.
// Validated alone (no faults) against Apache Kafka 4.1.1 (with kafka-streams 4.1.1).
//
// Lines -> flatMapValues(words) -> groupBy(word) (a repartition topic) -> count() (a
// changelog topic) -> output topic, with the record cache off (statestore.cache.max.bytes
// 0): every word of the input yields exactly one count update, so under exactly-once the
// committed updates of a word are exactly 1, 2, 3, ..., its final count, in order. An
// input record processed twice shows as a repeated or a skipped value (say 5, 6, 7, 5:
// a transaction's output visible twice, or an aborted one's visible), one lost as a count
// short of the final one. The input (line i, key "line-<i>", on partition i % 3) is
// produced by an idempotent producer at a steady rate until the test says "stop", so the
// application is processing whenever a node dies.
//
// Checks, "ok: ..." each, "FAIL: ..." on the first failed one (exit 1):
//   * while running, a read_committed consumer of the output: every update is the last
//     one of its word plus one (first 1);
//   * after "stop": the input topic holds each line at most once and every acknowledged
//     one (the idempotent producer's part; a send that failed may or may not have been
//     written, so the expected counts are those of the lines the topic holds), the latest
//     count of every word equals the count in the input;
//   * after KafkaStreams.close(): a fresh read_committed read of the whole output is
//     exactly the sequences 1..count per word (nothing else, nothing twice); the
//     changelog (read_committed, compacted) increases per word to the final count; the
//     group's stable committed offsets (require_stable) are the input's end. How many
//     more records read_uncommitted sees in the output (aborted transactions' records) is
//     reported, not checked.
// A Streams thread dying is a failure (but for KAFKA-20785, see isKafka20785). Every wait has a deadline and a watchdog halts the
// JVM if the run overstays; nothing asserts on how long an operation took.
//
// Control (with --controlled) by lines on stdin: "ids" prints the application's
// transactions as ListTransactions and DescribeTransactions give them,
//   txn-ids: <transactional id>|<state>|<coordinator id>|<producer id>|<epoch>|<partitions> ...
// (or "txn-ids-error: ..."); "stop" ends the input and runs the final checks; end of
// input before "stop" is a failure. Without --controlled, --lines lines are produced and
// the final checks follow. Printed on the way: "ready: ..." once the application runs,
// "progress: lines=<produced> acked=<acknowledged> updates=<committed updates read>
// state=<Streams state>" every second, "streams: <old> -> <new>" on state changes.
//
// Options: --replication N (3; topics and Streams' internal topics), --min-isr N (2),
// --threads N (2 stream threads: two transactional ids), --rate N (input lines per
// second, 100), --lines N (most lines produced, 30000), --transaction-timeout-ms N (the
// producers' transaction.timeout.ms; Streams' default 10000), --strict-txn-state (a thread
// dying of KAFKA-20785 fails the run; by default it is replaced, see isKafka20785),
// --controlled.
// Environment: STRAND_BOOTSTRAP (default 127.0.0.1:9092); STRAND_STREAMS_STATE_DIR (Streams'
// state.dir; default a fresh temp dir).

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
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
import java.util.UUID;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiConsumer;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
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
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class StreamsEosCluster {
    static final int VOCABULARY = 50;
    static final int PARTITIONS = 3;
    static final long STEP_SECONDS = 30;
    static final long FINAL_DEADLINE_SECONDS = 120;
    static final long READ_DEADLINE_SECONDS = 60;
    static final long WATCHDOG_SECONDS = 420;

    static short replication = 3;
    static int minIsr = 2;
    static int threads = 2;
    static int rate = 100;
    static int maxLines = 30000;
    static boolean controlled = false;
    static int transactionTimeoutMs = -1;
    static boolean strictTxnState = false;
    static final AtomicLong replaced = new AtomicLong();

    static String bootstrap;
    static Admin admin;
    static String appId;
    static String input;
    static String output;
    static final List<String> createdTopics = new ArrayList<>();
    static volatile KafkaStreams streams;
    static Path stateDir;
    static final AtomicReference<Throwable> died = new AtomicReference<>();
    static InputProducer producer;
    static Verifier verifier;

    // ---- reporting -------------------------------------------------------------------

    static void ok(String message) {
        System.out.println("ok: " + message);
        System.out.flush();
    }

    static synchronized void fail(String message) {
        System.out.println("FAIL: " + message);
        System.out.flush();
        cleanUp(false);
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

    /**
     * Best effort: the app stopped, its local state and, with deleteTopics, its topics
     * (internal ones too; a failed run keeps them for a look at the logs).
     */
    static void cleanUp(boolean deleteTopics) {
        KafkaStreams app = streams;
        if (app != null) {
            streams = null;
            app.close(Duration.ofSeconds(10));
            app.cleanUp();
        }
        if (stateDir != null) {
            try (Stream<Path> paths = Files.walk(stateDir)) {
                paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException ignored) {
                // best effort
            }
        }
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

    // ---- the input -------------------------------------------------------------------

    static String word(int i) {
        return String.format("w%02d", i);
    }

    /** Line i: 1 to 7 words, uneven counts, every word of the vocabulary used. */
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

    static Map<String, Long> expectedCounts(Collection<Long> lines) {
        Map<String, Long> counts = new TreeMap<>();
        for (long i : lines) {
            for (String w : words(line((int) i))) {
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
        p.put("metadata.max.age.ms", "5000");
        return p;
    }

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
            Properties p = common("streams-eos-cluster-input");
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

        /** Stops, waits for every acknowledgement; returns the number of lines. */
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
            Properties p = common("streams-eos-cluster-verifier");
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

    static List<TopicPartition> partitions(String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) {
            tps.add(new TopicPartition(topic, i));
        }
        return tps;
    }

    /**
     * Every record of the topic's partitions up to their end (the last stable offset for
     * read_committed), in partition order, handed to `each`.
     */
    static long readAll(String topic, String isolation, BiConsumer<TopicPartition, ConsumerRecord<byte[], byte[]>> each) {
        Properties p = common("streams-eos-cluster-reader");
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
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(READ_DEADLINE_SECONDS);
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
                            + READ_DEADLINE_SECONDS + "s (positions " + positions + ")");
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

    // ---- the application -------------------------------------------------------------

    static KafkaStreams startApp() throws IOException {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(StreamsEosCluster::words)
                .groupBy((key, w) -> w, Grouped.<String, String>as("words").withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        String dir = System.getenv("STRAND_STREAMS_STATE_DIR");
        stateDir = dir != null ? Files.createDirectories(Path.of(dir)) : Files.createTempDirectory("strand-streams-eos-");
        Properties p = common(appId);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        // No record cache: one count update per input word, so the output is checkable
        // update by update.
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, (int) replication);
        p.put(StreamsConfig.topicPrefix(TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG), String.valueOf(minIsr));
        // Two threads: two transactional producers, the tasks spread between them.
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // A fenced thread (TaskMigratedException) unsubscribes without a LeaveGroup
        // (Streams' consumers never send one) and rejoins as a new member: the group's
        // rebalance waits for its old member's session to expire, 45 s by default (once for
        // the join, once more if that member had joined already), with Kafka as with
        // Strand. The group's minimum keeps that short.
        p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);
        if (transactionTimeoutMs > 0) {
            // Shorter than a node's downtime: the coordinator that takes over may abort an
            // open transaction (an epoch bump), fencing the producer: its tasks migrate,
            // their state comes back from the changelog, their input is processed again.
            p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), transactionTimeoutMs);
        }

        KafkaStreams app = new KafkaStreams(builder.build(), p);
        app.setUncaughtExceptionHandler(e -> {
            if (!strictTxnState && isKafka20785(e)) {
                replaced.incrementAndGet();
                System.out.println("known: KAFKA-20785 (a commit racing the coordinator's timeout abort gets"
                        + " INVALID_TXN_STATE, fatal, with Kafka 4.1-4.4 as with Strand); replacing the thread: " + e
                        + " caused by " + e.getCause());
                System.out.flush();
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
            }
            died.compareAndSet(null, e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        app.setStateListener((now, before) -> {
            System.out.println("streams: " + before + " -> " + now);
            System.out.flush();
        });
        app.start();
        return app;
    }

    /**
     * KAFKA-20785: under transaction version 2 a coordinator that aborts a transaction past
     * its timeout bumps the epoch by one, so the producer's EndTxn(commit) of that
     * transaction, arriving (or retried) just after, passes as a retry and fails the state
     * check with INVALID_TXN_STATE, which the producer treats as fatal: the Streams thread
     * dies in commitTransaction instead of being fenced. Kafka 4.1.1 and 4.4.0 answer so too
     * (fixed upstream later: PRODUCER_FENCED). The transaction is aborted either way; a
     * replacement thread keeps exactly-once, which the checks still verify.
     */
    static boolean isKafka20785(Throwable e) {
        return e instanceof org.apache.kafka.streams.errors.StreamsException
                && String.valueOf(e.getMessage()).startsWith("Error encountered trying to commit a transaction")
                && e.getCause() instanceof org.apache.kafka.common.errors.InvalidTxnStateException;
    }

    /** "ids": the application's transactions (ListTransactions, DescribeTransactions). */
    static void printTransactions() {
        try {
            Collection<TransactionListing> listed = admin.listTransactions().all().get(15, TimeUnit.SECONDS);
            List<String> ids = listed.stream().map(TransactionListing::transactionalId)
                    .filter(id -> id.startsWith(appId + "-")).sorted().collect(Collectors.toList());
            Map<String, TransactionDescription> described = ids.isEmpty() ? Map.of()
                    : admin.describeTransactions(ids).all().get(15, TimeUnit.SECONDS);
            StringBuilder sb = new StringBuilder("txn-ids:");
            for (String id : ids) {
                TransactionDescription d = described.get(id);
                sb.append(' ').append(id).append('|').append(d.state()).append('|').append(d.coordinatorId())
                        .append('|').append(d.producerId()).append('|').append(d.producerEpoch()).append('|')
                        .append(d.topicPartitions().size());
            }
            System.out.println(sb);
        } catch (Exception e) {
            System.out.println("txn-ids-error: " + (e instanceof ExecutionException ? e.getCause() : e));
        }
        System.out.flush();
    }

    /** A failure as soon as one shows: a Streams thread died, the verifier saw a bad update. */
    static void checkAlive() {
        if (died.get() != null) {
            died.get().printStackTrace(System.out);
            fail("a Streams thread died: " + died.get());
        }
        if (verifier.violation.get() != null) {
            fail(verifier.violation.get());
        }
        if (producer.error.get() != null) {
            producer.error.get().printStackTrace(System.out);
            fail("input producer: " + producer.error.get());
        }
    }

    static void progress() {
        while (true) {
            try {
                Thread.sleep(1000);
            } catch (InterruptedException e) {
                return;
            }
            KafkaStreams app = streams;
            System.out.println("progress: lines=" + producer.sent.get() + " acked=" + producer.acked.get()
                    + " updates=" + verifier.updates.get() + " state=" + (app == null ? "closed" : app.state()));
            System.out.flush();
            checkAlive();
        }
    }

    static void finish() throws InterruptedException {
        long lines = producer.finish();
        Set<Integer> failed = producer.failed;
        ok("input: " + lines + " lines sent, " + producer.acked.get() + " acknowledged, " + failed.size()
                + " failed" + (failed.isEmpty() ? "" : " (first " + producer.firstFailure.get() + ")"));

        // The input topic holds each line at most once, on its partition, unchanged, and
        // every acknowledged one. A line whose send failed may be there or not (an
        // idempotent producer's batch can be written and still time out: its retry to a
        // new leader falls outside the five batches the broker remembers when newer ones
        // went there first, with Kafka as with Strand): the expected counts are those of
        // the lines the topic holds.
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
                + bad.subList(0, Math.min(10, bad.size())) + "; of the " + failed.size() + " failed sends "
                + failedThere + " written)");

        Map<String, Long> expected = expectedCounts(seen.keySet());
        long total = expected.values().stream().mapToLong(Long::longValue).sum();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(FINAL_DEADLINE_SECONDS);
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
                printTransactions();
                fail("read_committed output did not reach the expected counts within " + FINAL_DEADLINE_SECONDS
                        + "s; Streams state " + streams.state() + ", " + verifier.updates.get()
                        + " updates read, differing: " + diff);
            }
            Thread.sleep(100);
        }
        checkAlive();
        ok("read_committed output (while running): " + verifier.updates.get() + " updates, each the last of its"
                + " word plus one; the latest count of every one of the " + expected.size()
                + " words equals its count in the input (" + total + " words)");
        verifier.stop = true;
        verifier.thread.join(TimeUnit.SECONDS.toMillis(STEP_SECONDS));

        KafkaStreams app = streams;
        check(app.close(Duration.ofSeconds(STEP_SECONDS)), "KafkaStreams.close() completed");
        checkAlive();
        app.cleanUp();
        streams = null;

        // A fresh read of the whole output: exactly 1..count per word.
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
        check(wrong.isEmpty() && latest.equals(expected) && committed == total, "read_committed output after"
                + " close: " + committed + " records, exactly 1.." + "count for each word, in order (out of"
                + " sequence: " + wrong + ")");
        long uncommitted = readAll(output, "read_uncommitted", (tp, r) -> { });
        ok("read_uncommitted output: " + uncommitted + " records, " + (uncommitted - committed)
                + " more than read_committed (from aborted transactions; reported, not checked); stream threads"
                + " replaced after KAFKA-20785: " + replaced.get());

        // The changelog (compacted: values may be gone, never out of order) ends at the counts.
        String changelog = appId + "-counts-changelog";
        Map<String, Long> stored = new TreeMap<>();
        List<String> backwards = new ArrayList<>();
        long changes = readAll(changelog, "read_committed", (tp, r) -> {
            String w = new String(r.key(), StandardCharsets.UTF_8);
            byte[] value = r.value();
            // A timestamped store's changelog value: 8 bytes of timestamp, then the count.
            long v = ByteBuffer.wrap(value, value.length - 8, 8).getLong();
            Long before = stored.get(w);
            if (before != null && v <= before && backwards.size() < 10) {
                backwards.add(tp + "@" + r.offset() + " " + w + "=" + v + " after " + before);
            }
            stored.put(w, v);
        });
        check(backwards.isEmpty() && stored.equals(expected), "changelog " + changelog + " (read_committed, "
                + changes + " records): increasing per word, ending at the expected counts (backwards: "
                + backwards + ")");

        // The last commit carried the input offsets to the end of every partition.
        Map<TopicPartition, OffsetSpec> latestSpec = new HashMap<>();
        for (TopicPartition tp : partitions(input)) {
            latestSpec.put(tp, OffsetSpec.latest());
        }
        Map<TopicPartition, Long> ends = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
        await("listOffsets input", admin.listOffsets(latestSpec).all()).forEach((tp, info) -> ends.put(tp, info.offset()));
        Map<TopicPartition, OffsetAndMetadata> offsets = await("listConsumerGroupOffsets " + appId,
                admin.listConsumerGroupOffsets(appId, new ListConsumerGroupOffsetsOptions().requireStable(true))
                        .partitionsToOffsetAndMetadata());
        Map<TopicPartition, Long> committedInput = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
        offsets.forEach((tp, om) -> {
            if (tp.topic().equals(input) && om != null) {
                committedInput.put(tp, om.offset());
            }
        });
        check(committedInput.equals(ends), "the application's committed input offsets " + committedInput
                + " are the input's end " + ends);
    }

    static int intArg(String[] args, int i) {
        if (i >= args.length) {
            System.out.println("FAIL: " + args[i - 1] + " needs a value");
            System.exit(2);
        }
        return Integer.parseInt(args[i]);
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

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--replication" -> replication = (short) intArg(args, ++i);
                case "--min-isr" -> minIsr = intArg(args, ++i);
                case "--threads" -> threads = intArg(args, ++i);
                case "--rate" -> rate = intArg(args, ++i);
                case "--lines" -> maxLines = intArg(args, ++i);
                case "--transaction-timeout-ms" -> transactionTimeoutMs = intArg(args, ++i);
                case "--strict-txn-state" -> strictTxnState = true;
                case "--controlled" -> controlled = true;
                default -> {
                    System.out.println("FAIL: unknown option " + args[i]);
                    System.exit(2);
                }
            }
        }
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
        appId = "strand-eos-cluster-" + run;
        input = "eos-cluster-lines-" + run;
        output = "eos-cluster-counts-" + run;
        System.out.println("kafka-streams " + kafkaVersion()
                + " exactly_once_v2 word count against " + bootstrap + " (application.id " + appId + ", "
                + threads + " threads, replication " + replication + ", min.insync.replicas " + minIsr + ", "
                + rate + " lines/s, transaction.timeout.ms "
                + (transactionTimeoutMs > 0 ? String.valueOf(transactionTimeoutMs) : "default") + ")");

        Properties adminProps = common("streams-eos-cluster-admin");
        adminProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        admin = Admin.create(adminProps);
        Map<String, String> topicConfig = Map.of(TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG, String.valueOf(minIsr));
        await("createTopics", admin.createTopics(List.of(
                new NewTopic(input, PARTITIONS, replication).configs(topicConfig),
                new NewTopic(output, PARTITIONS, replication).configs(topicConfig))).all());
        createdTopics.add(input);
        createdTopics.add(output);
        ok("created " + input + " and " + output + " (" + PARTITIONS + " partitions, replication " + replication
                + ", min.insync.replicas " + minIsr + ")");

        producer = new InputProducer();
        verifier = new Verifier();
        streams = startApp();
        producer.thread.start();
        verifier.thread.start();
        Thread progress = new Thread(StreamsEosCluster::progress, "progress");
        progress.setDaemon(true);
        progress.start();
        System.out.println("ready: app=" + appId + " input=" + input + " output=" + output);
        System.out.flush();

        if (controlled) {
            BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String command;
            while ((command = commands.readLine()) != null) {
                command = command.trim();
                if (command.equals("ids")) {
                    printTransactions();
                } else if (command.equals("stop")) {
                    break;
                } else if (!command.isEmpty()) {
                    System.out.println("unknown command: " + command);
                }
            }
            if (command == null) {
                fail("stdin closed before \"stop\"");
            }
        } else {
            while (producer.thread.isAlive()) {
                producer.thread.join(1000);
            }
        }
        finish();
        progress.interrupt();

        cleanUp(true);
        admin.close(Duration.ofSeconds(10));
        System.out.printf("PASS streams-eos-cluster (kafka-streams %s, exactly_once_v2) in %.1fs%n",
                kafkaVersion(), (System.nanoTime() - start) / 1e9);
        System.out.flush();
        System.exit(0);
    }
}

// Streams groups (KIP-1071, group.protocol=streams) through a kill of the group coordinator:
// interop/cluster/streams_groups_test.py runs this against a 3-node Strand cluster and
// kill -9s the node that coordinates the application id while it processes.
//
// A word count (kafka-streams 4.4.0, group.protocol=streams, processing.guarantee=
// exactly_once_v2, commit.interval.ms 100, no record cache) on two KafkaStreams instances
// in this JVM ("a" and "b", one stream thread each: two members with two process ids), fed
// continuously by an idempotent producer (line i, key "line-<i>", partition i % 3) at
// --rate lines a second. Lines -> flatMapValues(words) -> groupBy(word) -> count() ->
// output: with the record cache off every input word yields one count update, so under
// exactly-once the committed updates of a word are exactly 1, 2, 3, ..., its count.
// Input, output and the internal topics (created by the broker for the group) have
// replication factor --replication (3) and min.insync.replicas --min-isr (2).
//
// Checks, "ok: ..." each, "FAIL: ..." on the first failed one (exit 1):
//   * while running, a read_committed consumer of the output: every update of a word is
//     its last one plus one (the first 1); an instance going to ERROR or a stream thread
//     dying is a failure;
//   * after "stop": the input topic holds each line at most once and every acknowledged
//     one (the expected counts are those of the lines it holds: a send that timed out may
//     still have been written); the latest count of every word equals its count in the
//     input; both instances are RUNNING; they close with LEAVE_GROUP; a fresh
//     read_committed read of the whole output is exactly 1..count per word; the committed
//     input offsets (listStreamsGroupOffsets) are the input's end.
//
// Control by lines on stdin (end of input before "stop" is a failure):
//   describe   prints the group as describeStreamsGroups gives it (the Admin client finds
//              the coordinator with FindCoordinator), one line:
//              group: <state> <group epoch> <assignment epoch> <coordinator id> \
//                     <member id>|<client id>|<member epoch>|<active tasks, + joined>|<process id> ...
//              or "group-error: ...";
//   stop       ends the input and runs the final checks.
// Printed on the way: "ready: app=<application id>" once both instances are RUNNING,
// "streams <a|b>: <old> -> <new>" on state changes, and every second
// "progress: lines=<produced> acked=<acknowledged> updates=<committed updates read> a=<state> b=<state>".
//
// Every wait has a deadline and a watchdog halts the JVM if the run overstays. Environment:
// STRAND_BOOTSTRAP (default 127.0.0.1:9092), STREAMS_GROUPS_RUN (suffix of the topic and
// application names), STRAND_STREAMS_STATE_DIR (parent of the two state dirs; default a
// temp dir). Options: --rate N (100), --replication N (3), --min-isr N (2), --lines N (most
// lines produced, 60000).

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
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
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
import org.apache.kafka.clients.admin.ListStreamsGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
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
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class StreamsGroupsFailover {
    static final int VOCABULARY = 40;
    static final int PARTITIONS = 3;
    static final long STEP_SECONDS = 30;
    static final long START_SECONDS = 90;
    static final long FINAL_SECONDS = 120;
    static final long READ_SECONDS = 60;
    static final long WATCHDOG_SECONDS = 330;

    static int rate = 100;
    static int maxLines = 60000;
    static short replication = 3;
    static int minIsr = 2;

    static String bootstrap;
    static String appId;
    static String input;
    static String output;
    static Admin admin;
    static Path stateRoot;
    static final Map<String, KafkaStreams> apps = new TreeMap<>();
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

    /** Best effort: the instances closed, their local state removed. */
    static void cleanUp() {
        List<KafkaStreams> open;
        synchronized (apps) {
            open = new ArrayList<>(apps.values());
            apps.clear();
        }
        for (KafkaStreams app : open) {
            app.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                    .withTimeout(Duration.ofSeconds(5)));
        }
        if (stateRoot != null) {
            try (Stream<Path> paths = Files.walk(stateRoot)) {
                paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException ignored) {
                // best effort
            }
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
            if (j > 0) {
                sb.append(' ');
            }
            sb.append(word((i * 7 + j * j * 3 + j * 11) % VOCABULARY));
        }
        return sb.toString();
    }

    static List<String> words(String line) {
        return Arrays.asList(line.toLowerCase().split("\\s+"));
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

    static List<TopicPartition> partitions(String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) {
            tps.add(new TopicPartition(topic, i));
        }
        return tps;
    }

    /** Line i to partition i % PARTITIONS at `rate` lines a second until stopped. */
    static final class InputProducer implements Runnable {
        final KafkaProducer<String, String> kafka;
        final Thread thread = new Thread(this, "input-producer");
        final AtomicLong sent = new AtomicLong();
        final AtomicLong acked = new AtomicLong();
        final Set<Integer> failed = new ConcurrentSkipListSet<>();
        final AtomicReference<Exception> firstFailure = new AtomicReference<>();
        final AtomicReference<Exception> error = new AtomicReference<>();
        volatile boolean stop;

        InputProducer() {
            Properties p = common("streams-groups-failover-input");
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

    /** read_committed over the output from its start: every update of a word is its last plus one. */
    static final class Verifier implements Runnable {
        final Thread thread = new Thread(this, "verifier");
        final Map<String, Long> last = new HashMap<>();
        final AtomicLong updates = new AtomicLong();
        final AtomicReference<String> violation = new AtomicReference<>();
        volatile boolean stop;

        @Override
        public void run() {
            Properties p = common("streams-groups-failover-verifier");
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
                reader.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(10)));
            } catch (Exception e) {
                e.printStackTrace(System.out);
                violation.compareAndSet(null, "verifier: " + e);
            }
        }

        synchronized Map<String, Long> snapshot() {
            return new TreeMap<>(last);
        }
    }

    /** Every record of the topic up to its end (the last stable offset for read_committed). */
    static long readAll(String topic, String isolation, BiConsumer<TopicPartition, ConsumerRecord<byte[], byte[]>> each) {
        Properties p = common("streams-groups-failover-reader");
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
                    fail(isolation + " read of " + topic + " did not reach the end " + ends + " within "
                            + READ_SECONDS + "s");
                }
                for (ConsumerRecord<byte[], byte[]> r : reader.poll(Duration.ofMillis(200))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (r.offset() < ends.get(tp)) {
                        each.accept(tp, r);
                        n++;
                    }
                }
            }
            reader.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(10)));
        }
        return n;
    }

    // ---- the application -------------------------------------------------------------

    static KafkaStreams startInstance(String name) throws IOException {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(StreamsGroupsFailover::words)
                .groupBy((key, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts-store"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        Properties p = common(appId + "-" + name);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        // No record cache: one count update per input word, checkable update by update.
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, (int) replication);
        p.put(StreamsConfig.topicPrefix(TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG), String.valueOf(minIsr));
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.STATE_DIR_CONFIG, Files.createDirectories(stateRoot.resolve(name)).toString());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        KafkaStreams app = new KafkaStreams(builder.build(), p);
        app.setUncaughtExceptionHandler(e -> {
            died.compareAndSet(null, new IllegalStateException("instance " + name + ": a stream thread died", e));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        app.setStateListener((now, before) -> {
            System.out.println("streams " + name + ": " + before + " -> " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR) {
                died.compareAndSet(null, new IllegalStateException(name + " went from " + before + " to ERROR"));
            }
        });
        synchronized (apps) {
            apps.put(name, app);
        }
        app.start();
        return app;
    }

    static String states() {
        StringBuilder sb = new StringBuilder();
        synchronized (apps) {
            for (Map.Entry<String, KafkaStreams> e : apps.entrySet()) {
                sb.append(' ').append(e.getKey()).append('=').append(e.getValue().state());
            }
        }
        return sb.toString().trim();
    }

    static boolean allRunning() {
        synchronized (apps) {
            return apps.size() == 2 && apps.values().stream().allMatch(a -> a.state() == KafkaStreams.State.RUNNING);
        }
    }

    static String tasks(List<StreamsGroupMemberAssignment.TaskIds> ids) {
        Set<String> out = new TreeSet<>();
        for (StreamsGroupMemberAssignment.TaskIds t : ids) {
            for (int part : t.partitions()) {
                out.add(t.subtopologyId() + "_" + part);
            }
        }
        return out.isEmpty() ? "-" : String.join("+", out);
    }

    /** "describe": the group as describeStreamsGroups gives it, one line. */
    static void printGroup() {
        try {
            StreamsGroupDescription d = admin.describeStreamsGroups(List.of(appId)).all().get(20, TimeUnit.SECONDS)
                    .get(appId);
            StringBuilder sb = new StringBuilder("group: ");
            sb.append(d.groupState()).append(' ').append(d.groupEpoch()).append(' ').append(d.targetAssignmentEpoch())
                    .append(' ').append(d.coordinator() == null ? -1 : d.coordinator().id());
            List<StreamsGroupMemberDescription> members = new ArrayList<>(d.members());
            members.sort(Comparator.comparing(StreamsGroupMemberDescription::clientId));
            for (StreamsGroupMemberDescription m : members) {
                sb.append(' ').append(m.memberId()).append('|').append(m.clientId()).append('|')
                        .append(m.memberEpoch()).append('|').append(tasks(m.assignment().activeTasks())).append('|')
                        .append(m.processId());
            }
            System.out.println(sb);
        } catch (Exception e) {
            System.out.println("group-error: " + (e instanceof ExecutionException ? e.getCause() : e));
        }
        System.out.flush();
    }

    /** A failure as soon as one shows: an instance died, the verifier saw a bad update. */
    static void checkAlive() {
        if (died.get() != null) {
            died.get().printStackTrace(System.out);
            fail("a Kafka Streams instance failed: " + died.get() + " caused by " + died.get().getCause());
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
            System.out.println("progress: lines=" + producer.sent.get() + " acked=" + producer.acked.get()
                    + " updates=" + verifier.updates.get() + " " + states());
            System.out.flush();
            checkAlive();
        }
    }

    static void finish() throws InterruptedException {
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
        for (long i = 0; i < lines; i++) {
            if (!failed.contains((int) i) && !seen.containsKey(i)) {
                missing++;
            }
        }
        long beyond = seen.keySet().stream().filter(i -> i < 0 || i >= lines).count();
        check(twice.isEmpty() && bad.isEmpty() && missing == 0 && beyond == 0, "input topic: " + inputRecords
                + " records, each line at most once and every acknowledged one (twice " + twice
                + ", acknowledged but missing " + missing + ", unknown " + beyond + ", misplaced or altered "
                + bad.subList(0, Math.min(10, bad.size())) + ")");

        Map<String, Long> expected = new TreeMap<>();
        for (long i : seen.keySet()) {
            for (String w : words(line((int) i))) {
                expected.merge(w, 1L, Long::sum);
            }
        }
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
                printGroup();
                fail("read_committed output did not reach the expected counts within " + FINAL_SECONDS + "s; "
                        + states() + ", " + verifier.updates.get() + " updates read, differing: " + diff);
            }
            Thread.sleep(100);
        }
        checkAlive();
        ok("read_committed output (while running): " + verifier.updates.get() + " updates, each the last of its"
                + " word plus one; the latest count of every one of the " + expected.size()
                + " words equals its count in the input (" + total + " words)");
        check(allRunning(), "both instances RUNNING at the end (" + states() + ")");
        verifier.stop = true;
        verifier.thread.join(TimeUnit.SECONDS.toMillis(STEP_SECONDS));

        for (String name : List.of("a", "b")) {
            KafkaStreams app;
            synchronized (apps) {
                app = apps.remove(name);
            }
            boolean closed = app.close(CloseOptions.groupMembershipOperation(
                    CloseOptions.GroupMembershipOperation.LEAVE_GROUP).withTimeout(Duration.ofSeconds(STEP_SECONDS)));
            check(closed, name + ": KafkaStreams.close(LEAVE_GROUP) completed");
        }
        checkAlive();

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
                + " more than read_committed (aborted transactions; reported, not checked)");

        Map<TopicPartition, OffsetSpec> latestSpec = new HashMap<>();
        for (TopicPartition tp : partitions(input)) {
            latestSpec.put(tp, OffsetSpec.latest());
        }
        Map<TopicPartition, Long> ends = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
        await("listOffsets input", admin.listOffsets(latestSpec).all()).forEach((tp, info) -> ends.put(tp, info.offset()));
        Map<TopicPartition, OffsetAndMetadata> offsets = await("listStreamsGroupOffsets " + appId,
                admin.listStreamsGroupOffsets(Map.of(appId, new ListStreamsGroupOffsetsSpec()))
                        .partitionsToOffsetAndMetadata(appId));
        Map<TopicPartition, Long> committedInput = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
        offsets.forEach((tp, om) -> {
            if (tp.topic().equals(input) && om != null) {
                committedInput.put(tp, om.offset());
            }
        });
        check(committedInput.equals(ends), "the group's committed input offsets " + committedInput
                + " are the input's end " + ends);
    }

    // ---- main ------------------------------------------------------------------------

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--rate" -> rate = Integer.parseInt(args[++i]);
                case "--lines" -> maxLines = Integer.parseInt(args[++i]);
                case "--replication" -> replication = Short.parseShort(args[++i]);
                case "--min-isr" -> minIsr = Integer.parseInt(args[++i]);
                default -> {
                    System.out.println("FAIL: unknown argument " + args[i]);
                    System.exit(2);
                }
            }
        }
        bootstrap = System.getenv().getOrDefault("STRAND_BOOTSTRAP", "127.0.0.1:9092");
        String run = System.getenv().getOrDefault("STREAMS_GROUPS_RUN", "");
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(TimeUnit.SECONDS.toMillis(WATCHDOG_SECONDS));
            } catch (InterruptedException e) {
                return;
            }
            System.out.println("FAIL: watchdog: the app did not finish in " + WATCHDOG_SECONDS + " s");
            System.out.flush();
            Runtime.getRuntime().halt(2);
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        appId = "streams-groups-failover-app" + run;
        input = "streams-groups-failover-in" + run;
        output = "streams-groups-failover-out" + run;
        String dir = System.getenv("STRAND_STREAMS_STATE_DIR");
        stateRoot = dir != null ? Files.createDirectories(Path.of(dir))
                : Files.createTempDirectory("strand-streams-groups-failover-");
        System.out.println("group.protocol=streams, exactly_once_v2 word count on two instances against " + bootstrap
                + " (application.id " + appId + ", " + rate + " lines/s)");
        System.out.flush();

        Properties adminProps = common("streams-groups-failover-admin");
        adminProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        admin = Admin.create(adminProps);
        Map<String, String> configs = Map.of(TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG, String.valueOf(minIsr));
        await("createTopics", admin.createTopics(List.of(
                new NewTopic(input, Optional.of(PARTITIONS), Optional.of(replication)).configs(configs),
                new NewTopic(output, Optional.of(PARTITIONS), Optional.of(replication)).configs(configs))).all());

        producer = new InputProducer();
        verifier = new Verifier();
        verifier.thread.start();
        producer.thread.start();
        startInstance("a");
        startInstance("b");
        Thread reporter = new Thread(StreamsGroupsFailover::progress, "progress");
        reporter.setDaemon(true);
        reporter.start();

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(START_SECONDS);
        while (!allRunning()) {
            checkAlive();
            if (System.nanoTime() > deadline) {
                printGroup();
                fail("the instances not RUNNING within " + START_SECONDS + "s: " + states());
            }
            Thread.sleep(100);
        }
        System.out.println("ready: app=" + appId);
        System.out.flush();

        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String command;
        while ((command = commands.readLine()) != null) {
            switch (command.trim()) {
                case "describe" -> printGroup();
                case "stop" -> {
                    finish();
                    admin.close(Duration.ofSeconds(10));
                    cleanUp();
                    System.out.println("PASS");
                    System.out.flush();
                    System.exit(0);
                }
                case "" -> { }
                default -> {
                    System.out.println("unknown command " + command);
                    System.out.flush();
                }
            }
        }
        fail("end of input before \"stop\"");
    }
}

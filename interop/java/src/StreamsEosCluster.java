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
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Grouped;

public final class StreamsEosCluster extends StreamsWordCount {
    static final long WATCHDOG_SECONDS = 420;

    static int threads = 2;
    static boolean controlled = false;
    static int transactionTimeoutMs = -1;
    static boolean strictTxnState = false;
    static final AtomicLong replaced = new AtomicLong();

    // ---- the application -------------------------------------------------------------

    static KafkaStreams startApp() throws IOException {
        stateDir = makeStateDir("strand-streams-eos-");
        // Two threads: two transactional producers, the tasks spread between them.
        Properties p = fedProps(appId, stateDir, threads);
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

        KafkaStreams app = new KafkaStreams(topology(Grouped.<String, String>as("words")
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()), "counts"), p);
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

    static void finish() throws InterruptedException {
        Map<String, Long> expected = finishInput(true);
        awaitCounts(expected, () -> "Streams state " + streams.state(), StreamsEosCluster::printTransactions);
        stopVerifier();

        KafkaStreams app = streams;
        check(app.close(Duration.ofSeconds(STEP_SECONDS)), "KafkaStreams.close() completed");
        checkAlive();
        app.cleanUp();
        streams = null;

        checkOutput(expected, "(from aborted transactions; reported, not checked); stream threads"
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
        checkCommittedInput("the application's", StreamsWordCount::stableOffsets);
    }

    static int intArg(String[] args, int i) {
        if (i >= args.length) {
            System.out.println("FAIL: " + args[i - 1] + " needs a value");
            System.exit(2);
        }
        return Integer.parseInt(args[i]);
    }

    public static void main(String[] args) throws Exception {
        onFail = () -> cleanUp(false);
        awaitTrace = Trace.BEFORE;
        clients = "streams-eos-cluster";
        maxLines = 30000;
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
        watchdog(WATCHDOG_SECONDS, "run exceeded " + WATCHDOG_SECONDS + "s");

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

        admin = newAdmin("streams-eos-cluster-admin");
        createTopics();
        ok("created " + input + " and " + output + " (" + PARTITIONS + " partitions, replication " + replication
                + ", min.insync.replicas " + minIsr + ")");

        producer = new InputProducer();
        verifier = new Verifier();
        streams = startApp();
        producer.thread.start();
        verifier.thread.start();
        Thread progress = new Thread(() -> progress(() -> {
            KafkaStreams app = streams;
            return "state=" + (app == null ? "closed" : app.state());
        }), "progress");
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

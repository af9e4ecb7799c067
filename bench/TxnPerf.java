// Transactional producer benchmark for bench/compare.py's W8 (run it through
// bench/txn-perf.sh): Apache Kafka's own Java producer (kafka-clients 4.4.0) with a
// transactional.id, its defaults otherwise (acks=all, idempotent, batch.size=16384,
// linger.ms=5, no compression). After initTransactions it runs a fixed number of
// transactions as fast as it can, each
//
//   beginTransaction(); N x send() round-robin over the partitions; commitTransaction()
//
// so every transaction spans every partition (records go to partition seq mod P
// explicitly, not through the sticky partitioner). Each commitTransaction() call is timed
// from the call to its return: it flushes the transaction's last batches and waits for
// their acks, then sends EndTxn and waits for the coordinator's answer (under transaction
// version 2 the coordinator answers once the commit is decided, and writes the markers
// afterwards). Kafka's ProducerPerformance has a transactional mode but does not report
// commit latency, hence this driver.
//
// --no-transactions is the baseline without transactions: the same producer without a
// transactional.id (so acks=all and idempotent, Kafka's defaults), the same sends, and
// flush() where the transactional run calls commitTransaction(), timed the same way (the
// "commit_*" figures are then flush() latencies): what a transaction costs over the
// idempotent producer at the same sync points.
//
// Output: one line on stdout, key=value pairs after "TXNPERF", e.g.
//   TXNPERF mode=transactions records=200000 transactions=2000 records_per_txn=100
//   record_size=1024 partitions=6 seconds=9.812 records_per_s=20383.1 mb_per_s=19.905
//   txn_per_s=203.83 commit_avg_ms=1.234 commit_p50_ms=1.100 commit_p99_ms=3.400
//   commit_max_ms=40.100 txn_p50_ms=4.800 txn_p99_ms=9.000 init_ms=120.5 send_errors=0
// (one line; MB = 2^20 bytes, as ProducerPerformance prints it; the clock runs from the
// first beginTransaction() to the last commitTransaction()'s return, initTransactions is
// not in it.) On any failure it prints "TXNPERF-FAIL: ..." and exits 1; a watchdog halts
// the JVM after --timeout-s.
//
// Arguments: --bootstrap HOST:PORT --topic T [--transactions 2000]
//   [--records-per-txn 100] [--record-size 1024] [--partitions 6]
//   [--transactional-id ID] [--no-transactions] [--timeout-s 600]
//   [--producer-prop key=value]...

import java.util.Arrays;
import java.util.Properties;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnPerf {
    static void die(String message, Throwable e) {
        System.out.println("TXNPERF-FAIL: " + message + (e == null ? "" : ": " + e));
        System.out.flush();
        if (e != null) {
            e.printStackTrace();
        }
        System.exit(1);
    }

    static String need(String[] args, int i) {
        if (i >= args.length) {
            die("missing value after " + args[i - 1], null);
        }
        return args[i];
    }

    /** Nearest-rank percentile of sorted nanosecond values, in milliseconds. */
    static double pct(long[] sorted, double p) {
        int rank = (int) Math.ceil(p * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))] / 1e6;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        String topic = null;
        int transactions = 2000;
        int perTxn = 100;
        int recordSize = 1024;
        int partitions = 6;
        String txnId = "txn-perf-" + UUID.randomUUID();
        long timeoutS = 600;
        boolean transactional = true;
        Properties extra = new Properties();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = need(args, ++i);
                case "--topic" -> topic = need(args, ++i);
                case "--transactions" -> transactions = Integer.parseInt(need(args, ++i));
                case "--records-per-txn" -> perTxn = Integer.parseInt(need(args, ++i));
                case "--record-size" -> recordSize = Integer.parseInt(need(args, ++i));
                case "--partitions" -> partitions = Integer.parseInt(need(args, ++i));
                case "--transactional-id" -> txnId = need(args, ++i);
                case "--timeout-s" -> timeoutS = Long.parseLong(need(args, ++i));
                case "--no-transactions" -> transactional = false;
                case "--producer-prop" -> {
                    String kv = need(args, ++i);
                    int eq = kv.indexOf('=');
                    if (eq < 1) {
                        die("--producer-prop wants key=value, got " + kv, null);
                    }
                    extra.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
                }
                default -> die("unknown argument " + args[i], null);
            }
        }
        if (bootstrap == null || topic == null || transactions < 1 || perTxn < 1
                || partitions < 1 || recordSize < 0) {
            die("usage: TxnPerf --bootstrap HOST:PORT --topic T [--transactions N] "
                    + "[--records-per-txn N] [--record-size B] [--partitions P] "
                    + "[--transactional-id ID] [--no-transactions] [--timeout-s S] "
                    + "[--producer-prop k=v]...", null);
        }

        final long deadlineS = timeoutS;
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(TimeUnit.SECONDS.toMillis(deadlineS));
            } catch (InterruptedException e) {
                return;
            }
            System.out.println("TXNPERF-FAIL: not done after " + deadlineS + " s");
            System.out.flush();
            Runtime.getRuntime().halt(1);
        }, "txn-perf-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (transactional) {
            props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        }
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
                ByteArraySerializer.class.getName());
        props.putAll(extra);

        // Like ProducerPerformance: one random payload of uppercase letters, sent every time.
        byte[] payload = new byte[recordSize];
        Random random = new Random(0);
        for (int i = 0; i < payload.length; i++) {
            payload[i] = (byte) (random.nextInt(26) + 65);
        }

        AtomicLong sendErrors = new AtomicLong();
        AtomicReference<Exception> firstError = new AtomicReference<>();
        long[] commitNs = new long[transactions];
        long[] txnNs = new long[transactions];
        long records = 0;
        double initMs;
        long startNs;
        long endNs;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            long t = System.nanoTime();
            if (transactional) {
                producer.initTransactions();
            } else {
                producer.partitionsFor(topic); // metadata, as initTransactions does not
            }
            initMs = (System.nanoTime() - t) / 1e6;
            long seq = 0;
            startNs = System.nanoTime();
            for (int i = 0; i < transactions; i++) {
                long begin = System.nanoTime();
                if (transactional) {
                    producer.beginTransaction();
                }
                for (int r = 0; r < perTxn; r++) {
                    int partition = (int) (seq++ % partitions);
                    producer.send(new ProducerRecord<>(topic, partition, null, payload),
                            (metadata, e) -> {
                                if (e != null) {
                                    sendErrors.incrementAndGet();
                                    firstError.compareAndSet(null, e);
                                }
                            });
                }
                long commit = System.nanoTime();
                try {
                    if (transactional) {
                        producer.commitTransaction();
                    } else {
                        producer.flush();
                        if (sendErrors.get() > 0) {
                            die("a send of transaction " + (i + 1) + " failed", firstError.get());
                        }
                    }
                } catch (Exception e) {
                    die("commitTransaction of transaction " + (i + 1) + " of " + transactions
                            + " failed (first send error: " + firstError.get() + ")", e);
                }
                long done = System.nanoTime();
                commitNs[i] = done - commit;
                txnNs[i] = done - begin;
                records += perTxn;
            }
            endNs = System.nanoTime();
        } catch (Exception e) {
            die("producer failed", e);
            return;
        }
        if (sendErrors.get() > 0) {
            die(sendErrors.get() + " sends failed", firstError.get());
        }
        double seconds = (endNs - startNs) / 1e9;
        long[] commits = commitNs.clone();
        Arrays.sort(commits);
        long[] txns = txnNs.clone();
        Arrays.sort(txns);
        double commitAvg = Arrays.stream(commitNs).average().orElse(0) / 1e6;
        System.out.printf(java.util.Locale.ROOT,
                "TXNPERF mode=%s records=%d transactions=%d records_per_txn=%d record_size=%d "
                        + "partitions=%d seconds=%.3f records_per_s=%.1f mb_per_s=%.3f "
                        + "txn_per_s=%.2f commit_avg_ms=%.3f commit_p50_ms=%.3f "
                        + "commit_p99_ms=%.3f commit_max_ms=%.3f txn_p50_ms=%.3f "
                        + "txn_p99_ms=%.3f init_ms=%.1f send_errors=%d%n",
                transactional ? "transactions" : "idempotent", records, transactions, perTxn,
                recordSize, partitions, seconds,
                records / seconds, records * (double) recordSize / (1 << 20) / seconds,
                transactions / seconds, commitAvg, pct(commits, 0.50), pct(commits, 0.99),
                commits[commits.length - 1] / 1e6, pct(txns, 0.50), pct(txns, 0.99), initMs,
                sendErrors.get());
        System.out.flush();
    }
}

// What the Java interop drivers share (InteropDriver, TransactionsDriver, StreamsEos,
// StreamsEosCluster, StreamsGroupsDriver, StreamsGroupsFailover; each script in interop/java
// compiles this file with its driver): "ok: ..." per check and "FAIL: ..." on the first
// failed one (exit 1), calls with a deadline, the watchdog, the clients' common settings. A
// driver extends Checks to call these unqualified (the unnamed package allows no static
// import). Only kafka-clients API every release the drivers run with has (4.1 and later).

import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

class Checks {
    /** How long one call (an admin call, a send's future) may take. */
    static final long STEP_SECONDS = 30;

    static String bootstrap = System.getenv().getOrDefault("STRAND_BOOTSTRAP", "127.0.0.1:9092");
    /** metadata.max.age.ms of every client (a moved leader is found fast); null: the client's default. */
    static String metadataMaxAgeMs = "5000";
    /** Run by fail() before it exits: the driver's best-effort cleanup. */
    static Runnable onFail = () -> { };

    /** How await() shows a failed call: its cause only, or with its stack trace before or after the FAIL line. */
    enum Trace { NONE, BEFORE, AFTER }

    static Trace awaitTrace = Trace.NONE;

    Checks() {
    }

    // ---- reporting -------------------------------------------------------------------

    static void ok(String message) {
        System.out.println("ok: " + message);
        System.out.flush();
    }

    static void fail(String message) {
        fail(message, null);
    }

    /** "FAIL: message", the cause's stack trace (if any), the driver's cleanup, exit 1. */
    static synchronized void fail(String message, Throwable cause) {
        System.out.println("FAIL: " + message);
        if (cause != null) {
            cause.printStackTrace(System.out);
        }
        System.out.flush();
        onFail.run();
        System.exit(1);
    }

    static void check(boolean condition, String message) {
        if (!condition) {
            fail(message);
        }
        ok(message);
    }

    /** Waits for a future with the step timeout; any failure or timeout is a FAIL. */
    static <T> T await(String what, Future<T> future) {
        try {
            return future.get(STEP_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            fail(what + ": no answer within " + STEP_SECONDS + "s");
        } catch (ExecutionException e) {
            if (awaitTrace == Trace.BEFORE) {
                e.getCause().printStackTrace(System.out);
            }
            fail(what + ": " + e.getCause(), awaitTrace == Trace.AFTER ? e.getCause() : null);
        } catch (InterruptedException e) {
            fail(what + ": interrupted");
        }
        throw new AssertionError("unreachable");
    }

    /** A daemon thread that halts the JVM (exit 2) with "FAIL: watchdog: <message>" after `seconds`. */
    static void watchdog(long seconds, String message) {
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(TimeUnit.SECONDS.toMillis(seconds));
            } catch (InterruptedException e) {
                return;
            }
            System.out.println("FAIL: watchdog: " + message);
            System.out.flush();
            Runtime.getRuntime().halt(2);
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    // ---- clients ---------------------------------------------------------------------

    static Properties common(String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        p.put("request.timeout.ms", "15000");
        p.put("socket.connection.setup.timeout.ms", "5000");
        p.put("socket.connection.setup.timeout.max.ms", "10000");
        p.put("reconnect.backoff.max.ms", "1000");
        if (metadataMaxAgeMs != null) {
            p.put("metadata.max.age.ms", metadataMaxAgeMs);
        }
        return p;
    }

    /** An Admin client whose calls time out after 30 s. */
    static Admin newAdmin(String clientId) {
        Properties p = common(clientId);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    /**
     * The Kafka client version on the classpath, as AppInfoParser reports it (it reads the
     * same kafka/kafka-version.properties; that class is internal and Kafka 4.4 moved it to
     * org.apache.kafka.common.utils.internals, so it is not called, to compile against both).
     */
    static String kafkaVersion() {
        try (java.io.InputStream in = org.apache.kafka.clients.producer.KafkaProducer.class
                .getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "unknown");
        } catch (java.io.IOException e) {
            return "unknown";
        }
    }
}

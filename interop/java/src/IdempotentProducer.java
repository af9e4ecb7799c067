// Sends COUNT records with the Java producer's defaults (enable.idempotence=true,
// acks=all) and writes the value of every acknowledged record to ACK_FILE, one per line.
// Used by interop/python/idempotent_restart_test.py, which restarts the broker mid-stream,
// and interop/cluster/client_failover.py (with RATE, records/s, to span leader kills).
import java.io.FileWriter;
import java.io.PrintWriter;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class IdempotentProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        String ackFile = args[3];
        int rate = args.length > 4 ? Integer.parseInt(args[4]) : 0;
        long started = System.nanoTime();
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("linger.ms", "5");
        props.put("delivery.timeout.ms", "120000");
        props.put("reconnect.backoff.ms", "50");
        props.put("reconnect.backoff.max.ms", "500");
        AtomicLong failures = new AtomicLong();
        try (PrintWriter acks = new PrintWriter(new FileWriter(ackFile));
             KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                String value = Integer.toString(i);
                producer.send(new ProducerRecord<>(topic, i % 3, value, value), (metadata, error) -> {
                    if (error == null) {
                        synchronized (acks) {
                            acks.println(value);
                        }
                    } else {
                        failures.incrementAndGet();
                        System.err.println("failed " + value + ": " + error);
                    }
                });
                if (rate > 0 && i % 100 == 0) {
                    long due = started + (long) i * 1_000_000_000L / rate;
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                    }
                }
                if (i % 10000 == 0) {
                    System.out.println("sent " + i);
                    System.out.flush();
                }
            }
            producer.flush();
        }
        System.out.println("done, failures=" + failures.get());
        System.exit(failures.get() == 0 ? 0 : 3);
    }
}

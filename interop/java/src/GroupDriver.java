// Consumer-group driver: Apache Kafka's Java clients (kafka-clients 4.4.0) in the roles
// that interop/python/java_groups_test.py orchestrates against Strand (or, to compare,
// against Apache Kafka). One JVM process per role, so that a group member can be killed
// with kill -9.
//
//   GroupDriver create   --bootstrap B --topic T --partitions N
//   GroupDriver produce  --bootstrap B --topic T --from I --count C
//       keyed records key "k-<i>", value "v-<i>" for i in [I, I+C), acks=all, default
//       partitioner; prints "P <i> <partition> <offset>" per record, then "PRODUCED <C>".
//   GroupDriver committed --bootstrap B --group G --topic T
//       prints "C <partition> <offset>" (-1: none) per partition, from OffsetFetch.
//   GroupDriver member   --bootstrap B --group G --topic T --name N
//                        [--strategy default|range|cooperative-sticky]
//                        [--instance-id I] [--session-ms MS] [--heartbeat-ms MS]
//                        [--protocol classic|consumer] [--remote-assignor uniform|range]
//                        [--pattern REGEX | --broker-pattern REGEX] [--metadata-max-age-ms MS]
//       a KafkaConsumer (group.protocol=classic unless --protocol consumer, KIP-848; then
//       session/heartbeat/strategy are the broker's and --remote-assignor sets
//       group.remote.assignor) that subscribes to T, or with --pattern to the topics
//       matching a java.util.regex.Pattern (resolved by the client from metadata), or
//       with --broker-pattern to a SubscriptionPattern (RE2J, resolved by the broker;
//       consumer protocol only). Commits (commitSync) after every poll that returned
//       records and, for revoked partitions, in onPartitionsRevoked. Prints one line per
//       event:
//         ASSIGNED gen=<g> member=<id> added=<p,..> now=<p,..> tnow=<topic:p,..>
//         REVOKED gen=<g> removed=<p,..> now=<p,..> tnow=<topic:p,..>    LOST ...
//         REC <partition> <offset> <key> <topic>
//         COMMITTED <p>:<offset>,...    COMMIT_FAILED <exception>
//         STATUS gen=<g> member=<id> now=<p,..> paused=<bool> tnow=<topic:p,..>
//         CLOSED / ERROR <exception>
//       (gen is groupMetadata().generationId(): the member epoch under KIP-848)
//       and reads commands from stdin: status, pause, resume, close (KafkaConsumer.close():
//       a dynamic member leaves, a static one stays), close-leave, close-remain. EOF on
//       stdin closes the consumer, so a member never outlives its harness.
//
// Every role has a watchdog (--max-seconds, default 600) that halts the JVM.

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class GroupDriver {
    static final PrintStream OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);

    static synchronized void emit(String line) {
        OUT.println(line);
        OUT.flush();
    }

    static Map<String, String> options(String[] args) {
        Map<String, String> out = new HashMap<>();
        for (int i = 1; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("bad option " + args[i]);
            }
            out.put(args[i].substring(2), args[i + 1]);
        }
        return out;
    }

    static String need(Map<String, String> opts, String key) {
        String v = opts.get(key);
        if (v == null) throw new IllegalArgumentException("--" + key + " is required");
        return v;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: GroupDriver create|produce|committed|member --bootstrap B ...");
            System.exit(2);
        }
        Map<String, String> opts = options(args);
        long maxSeconds = Long.parseLong(opts.getOrDefault("max-seconds", "600"));
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(maxSeconds * 1000);
            } catch (InterruptedException e) {
                return;
            }
            emit("ERROR watchdog: still running after " + maxSeconds + "s");
            Runtime.getRuntime().halt(3);
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        try {
            switch (args[0]) {
                case "create" -> create(opts);
                case "produce" -> produce(opts);
                case "committed" -> committed(opts);
                case "member" -> member(opts);
                default -> throw new IllegalArgumentException("unknown mode " + args[0]);
            }
        } catch (Throwable t) {
            emit("ERROR " + t);
            t.printStackTrace();
            System.out.flush();
            Runtime.getRuntime().halt(1);
        }
        System.exit(0);
    }

    static void create(Map<String, String> opts) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, need(opts, "bootstrap"));
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        try (Admin admin = Admin.create(p)) {
            String topic = need(opts, "topic");
            int partitions = Integer.parseInt(need(opts, "partitions"));
            try {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) throw e;
            }
            emit("CREATED " + topic + " " + partitions);
        }
    }

    static void produce(Map<String, String> opts) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, need(opts, "bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        String topic = need(opts, "topic");
        int from = Integer.parseInt(need(opts, "from"));
        int count = Integer.parseInt(need(opts, "count"));
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = from; i < from + count; i++) {
                futures.add(producer.send(new ProducerRecord<>(topic, "k-" + i, "v-" + i)));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata m = futures.get(i).get(30, TimeUnit.SECONDS);
                emit("P " + (from + i) + " " + m.partition() + " " + m.offset());
            }
        }
        emit("PRODUCED " + count);
    }

    static void committed(Map<String, String> opts) {
        Properties p = consumerProps(opts);
        String topic = need(opts, "topic");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(30));
            Set<TopicPartition> tps = infos.stream().map(i -> new TopicPartition(topic, i.partition())).collect(Collectors.toSet());
            Map<TopicPartition, OffsetAndMetadata> got = consumer.committed(tps, Duration.ofSeconds(30));
            for (TopicPartition tp : new TreeSet<>(tps.stream().map(TopicPartition::partition).collect(Collectors.toSet()))
                    .stream().map(n -> new TopicPartition(topic, n)).toList()) {
                OffsetAndMetadata o = got.get(tp);
                emit("C " + tp.partition() + " " + (o == null ? -1 : o.offset()));
            }
        }
    }

    static Properties consumerProps(Map<String, String> opts) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, need(opts, "bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, need(opts, "group"));
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        return p;
    }

    static String parts(Collection<TopicPartition> tps) {
        if (tps.isEmpty()) return "-";
        return new TreeSet<>(tps.stream().map(TopicPartition::partition).toList()).stream()
                .map(String::valueOf).collect(Collectors.joining(","));
    }

    static String tparts(Collection<TopicPartition> tps) {
        if (tps.isEmpty()) return "-";
        return tps.stream().sorted((a, b) -> a.topic().equals(b.topic())
                        ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()))
                .map(tp -> tp.topic() + ":" + tp.partition()).collect(Collectors.joining(","));
    }

    static void member(Map<String, String> opts) throws Exception {
        Properties p = consumerProps(opts);
        String pattern = opts.get("pattern");
        String brokerPattern = opts.get("broker-pattern");
        String topic = pattern == null && brokerPattern == null ? need(opts, "topic") : null;
        String name = need(opts, "name");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        String protocol = opts.getOrDefault("protocol", "classic");
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (opts.containsKey("metadata-max-age-ms")) {
            p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, Integer.parseInt(opts.get("metadata-max-age-ms")));
        }
        if (protocol.equals("consumer")) {
            // KIP-848: session timeout, heartbeat interval and assignment are the broker's;
            // the client refuses session.timeout.ms, heartbeat.interval.ms and
            // partition.assignment.strategy.
            if (opts.containsKey("remote-assignor")) {
                p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, opts.get("remote-assignor"));
            }
        } else {
            int session = Integer.parseInt(opts.getOrDefault("session-ms", "45000"));
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, session);
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
                    Integer.parseInt(opts.getOrDefault("heartbeat-ms", String.valueOf(Math.min(3000, session / 3)))));
            String strategy = opts.getOrDefault("strategy", "default");
            switch (strategy) {
                case "default" -> { }
                case "range" -> p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
                case "cooperative-sticky" ->
                        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
                default -> throw new IllegalArgumentException("unknown strategy " + strategy);
            }
        }
        if (opts.containsKey("instance-id")) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, opts.get("instance-id"));

        LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) commands.add(line.trim());
            } catch (Exception e) {
                // fall through: treat as EOF
            }
            commands.add("close");
        }, "stdin");
        reader.setDaemon(true);
        reader.start();

        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
        boolean[] paused = {false};

        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                Map<TopicPartition, OffsetAndMetadata> mine = new HashMap<>();
                for (TopicPartition tp : partitions) {
                    OffsetAndMetadata o = pending.remove(tp);
                    if (o != null) mine.put(tp, o);
                }
                if (!mine.isEmpty()) commit(consumer, mine, "revoke");
                Set<TopicPartition> now = new HashSet<>(consumer.assignment());
                now.removeAll(partitions);
                emit("REVOKED gen=" + consumer.groupMetadata().generationId() + " removed=" + parts(partitions)
                        + " now=" + parts(now) + " tnow=" + tparts(now));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                if (paused[0]) consumer.pause(partitions);
                emit("ASSIGNED gen=" + consumer.groupMetadata().generationId() + " member="
                        + consumer.groupMetadata().memberId() + " added=" + parts(partitions)
                        + " now=" + parts(consumer.assignment()) + " tnow=" + tparts(consumer.assignment()));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                for (TopicPartition tp : partitions) pending.remove(tp);
                Set<TopicPartition> now = new HashSet<>(consumer.assignment());
                now.removeAll(partitions);
                emit("LOST gen=" + consumer.groupMetadata().generationId() + " removed=" + parts(partitions)
                        + " now=" + parts(now) + " tnow=" + tparts(now));
            }
        };
        if (pattern != null) {
            consumer.subscribe(Pattern.compile(pattern), listener);
        } else if (brokerPattern != null) {
            consumer.subscribe(new SubscriptionPattern(brokerPattern), listener);
        } else {
            consumer.subscribe(List.of(topic), listener);
        }
        emit("STARTED " + name);
        while (true) {
            String cmd;
            while ((cmd = commands.poll()) != null) {
                switch (cmd) {
                    case "status" -> emit("STATUS gen=" + consumer.groupMetadata().generationId() + " member="
                            + consumer.groupMetadata().memberId() + " now=" + parts(consumer.assignment())
                            + " paused=" + paused[0] + " tnow=" + tparts(consumer.assignment()));
                    case "pause" -> {
                        paused[0] = true;
                        consumer.pause(consumer.assignment());
                        emit("PAUSED " + parts(consumer.paused()));
                    }
                    case "resume" -> {
                        paused[0] = false;
                        consumer.resume(consumer.paused());
                        emit("RESUMED");
                    }
                    case "close", "close-leave", "close-remain" -> {
                        if (!pending.isEmpty()) commit(consumer, new HashMap<>(pending), "close");
                        CloseOptions options = CloseOptions.timeout(Duration.ofSeconds(30));
                        if (cmd.equals("close-leave")) {
                            options = options.withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP);
                        } else if (cmd.equals("close-remain")) {
                            options = options.withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP);
                        }
                        consumer.close(options);
                        emit("CLOSED");
                        return;
                    }
                    case "" -> { }
                    default -> emit("ERROR unknown command " + cmd);
                }
            }
            ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
            for (ConsumerRecord<String, String> r : records) {
                emit("REC " + r.partition() + " " + r.offset() + " " + r.key() + " " + r.topic());
                pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            if (!pending.isEmpty()) {
                Map<TopicPartition, OffsetAndMetadata> batch = new HashMap<>(pending);
                if (commit(consumer, batch, "poll")) {
                    batch.forEach((tp, o) -> pending.remove(tp, o));
                }
            }
        }
    }

    static boolean commit(KafkaConsumer<String, String> consumer, Map<TopicPartition, OffsetAndMetadata> offsets, String when) {
        try {
            consumer.commitSync(offsets, Duration.ofSeconds(15));
            emit("COMMITTED " + offsets.entrySet().stream()
                    .sorted(Map.Entry.comparingByKey((a, b) -> Integer.compare(a.partition(), b.partition())))
                    .map(e -> e.getKey().partition() + ":" + e.getValue().offset())
                    .collect(Collectors.joining(",")));
            return true;
        } catch (RuntimeException e) {
            emit("COMMIT_FAILED " + when + " " + e.getClass().getSimpleName() + ": " + e.getMessage());
            return false;
        }
    }
}

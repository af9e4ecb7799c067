// Share groups (KIP-932) with Apache Kafka's Java clients (kafka-clients 4.4.0) against a
// running broker (STRAND_BOOTSTRAP): KafkaShareConsumers in implicit and explicit
// acknowledgement modes, and the Admin client's share group calls. Prints "ok: ..." per
// check and "FAIL: ..." on the first failure (exit 1). The same driver runs against
// Apache Kafka 4.4 (interop/java/share-groups.sh --kafka) so its checks are Kafka's
// behaviour, not Strand's idea of it.
//
// Sections:
//   implicit  two members of one group split 300 records over 3 partitions: each record
//             delivered exactly once, both members get some (implicit acknowledgement)
//   explicit  released records come back with their delivery count raised; rejected
//             ones never do; accepted ones are done (explicit acknowledgement, commitSync)
//   lock      a member that stops polling loses its records when their acquisition lock
//             runs out (share.record.lock.duration.ms set on the group), and another
//             member gets them, delivery count 2
//   failover  (interop/cluster/share_groups_test.py) a member accepts and commits records
//             while the harness kills the partition's leader (SHARE_FAILOVER_DIR: the
//             driver writes "ready" there and goes on once "killed" appears): every record
//             is delivered, and none whose acknowledgement committed is delivered again
//   admin     describeShareGroups, listGroups, listShareGroupOffsets, alterShareGroupOffsets
//             (replays from an offset), deleteShareGroupOffsets, deleteShareGroups

import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public class ShareGroupsDriver {
    static String bootstrap;
    /** Appended to every topic and group name, so a run can repeat on one broker. */
    static String run = System.getenv().getOrDefault("SHARE_RUN", "");

    static void ok(String what) {
        System.out.println("ok: " + what);
    }

    static void check(boolean condition, String what) {
        if (!condition) {
            System.out.println("FAIL: " + what);
            System.exit(1);
        }
        ok(what);
    }

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(p);
    }

    static KafkaProducer<String, String> producer() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static KafkaShareConsumer<String, String> consumer(String group, String mode) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put("share.acknowledgement.mode", mode);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
        return new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    /** The broker's default replication factor (3 on the test clusters). */
    static void createTopic(Admin admin, String topic, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, Optional.of(partitions), Optional.empty())))
            .all().get(30, TimeUnit.SECONDS);
    }

    /** Share groups start at the end of the log unless told otherwise (Kafka's default). */
    static void groupConfig(Admin admin, String group, String name, String value) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        admin.incrementalAlterConfigs(Map.of(resource,
                List.of(new AlterConfigOp(new ConfigEntry(name, value), AlterConfigOp.OpType.SET))))
            .all().get(30, TimeUnit.SECONDS);
    }

    static void produce(String topic, int from, int count, int partitions) throws Exception {
        try (KafkaProducer<String, String> producer = producer()) {
            for (int i = from; i < from + count; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, "k" + i, "v" + i));
            }
            producer.flush();
        }
    }

    /** Records in batches of `step` (one flush each), so consumers get them over several polls. */
    static void produceInSteps(String topic, int total, int step, int partitions) throws Exception {
        try (KafkaProducer<String, String> producer = producer()) {
            for (int i = 0; i < total; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, "k" + i, "v" + i));
                if ((i + 1) % step == 0) {
                    producer.flush();
                }
            }
            producer.flush();
        }
    }

    static void implicit() throws Exception {
        String topic = "share-implicit" + run, group = "share-implicit-group" + run;
        try (Admin admin = admin()) {
            createTopic(admin, topic, 3);
            groupConfig(admin, group, "share.auto.offset.reset", "earliest");
        }
        ConcurrentHashMap<String, Integer> seen = new ConcurrentHashMap<>();
        AtomicInteger duplicates = new AtomicInteger();
        Map<Integer, AtomicInteger> perMember = new ConcurrentHashMap<>();
        AtomicBoolean stop = new AtomicBoolean();
        ExecutorService pool = Executors.newFixedThreadPool(2);
        List<Future<?>> members = new ArrayList<>();
        for (int m = 0; m < 2; m++) {
            int member = m;
            perMember.put(member, new AtomicInteger());
            members.add(pool.submit(() -> {
                try (KafkaShareConsumer<String, String> consumer = consumer(group, "implicit")) {
                    consumer.subscribe(List.of(topic));
                    while (!stop.get()) {
                        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                            if (seen.put(record.value(), member) != null) {
                                duplicates.incrementAndGet();
                            }
                            perMember.get(member).incrementAndGet();
                        }
                    }
                }
                return null;
            }));
        }
        // Both members join first, then the records arrive in small steps, so the group
        // has settled on its two members while there is still work to share.
        Thread.sleep(5_000);
        produceInSteps(topic, 300, 10, 3);
        long deadline = System.currentTimeMillis() + 60_000;
        while (seen.size() < 300 && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        // Give a duplicate a chance to show up before stopping.
        Thread.sleep(1000);
        stop.set(true);
        for (Future<?> f : members) {
            f.get(60, TimeUnit.SECONDS);
        }
        pool.shutdown();
        check(seen.size() == 300, "implicit: all 300 records delivered (" + seen.size() + ")");
        check(duplicates.get() == 0, "implicit: no record delivered twice (" + duplicates.get() + ")");
        check(perMember.get(0).get() > 0 && perMember.get(1).get() > 0,
            "implicit: both members got records (" + perMember.get(0) + ", " + perMember.get(1) + ")");
    }

    static void explicit() throws Exception {
        String topic = "share-explicit" + run, group = "share-explicit-group" + run;
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1);
            groupConfig(admin, group, "share.auto.offset.reset", "earliest");
        }
        produce(topic, 0, 30, 1);
        Map<String, Short> deliveries = new HashMap<>();
        Set<String> accepted = new HashSet<>(), rejected = new HashSet<>();
        try (KafkaShareConsumer<String, String> consumer = consumer(group, "explicit")) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (accepted.size() + rejected.size() < 30 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    short count = record.deliveryCount().orElse((short) -1);
                    deliveries.merge(record.value(), count, (a, b) -> (short) Math.max(a, b));
                    int n = Integer.parseInt(record.value().substring(1));
                    if (rejected.contains(record.value()) || accepted.contains(record.value())) {
                        System.out.println("FAIL: explicit: " + record.value() + " delivered after it was settled");
                        System.exit(1);
                    }
                    if (n % 3 == 0 && count == 1) {
                        consumer.acknowledge(record, AcknowledgeType.RELEASE);
                    } else if (n % 3 == 1) {
                        consumer.acknowledge(record, AcknowledgeType.REJECT);
                        rejected.add(record.value());
                    } else {
                        consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                        accepted.add(record.value());
                    }
                }
                Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
                for (Optional<KafkaException> error : result.values()) {
                    if (error.isPresent()) {
                        System.out.println("FAIL: explicit: commitSync failed: " + error.get());
                        System.exit(1);
                    }
                }
            }
        }
        check(accepted.size() == 20 && rejected.size() == 10,
            "explicit: 20 accepted, 10 rejected (" + accepted.size() + ", " + rejected.size() + ")");
        boolean released = true;
        for (int n = 0; n < 30; n += 3) {
            released &= deliveries.getOrDefault("v" + n, (short) 0) == 2;
        }
        check(released, "explicit: released records came back with delivery count 2");
        check(deliveries.get("v1") == 1, "explicit: a record delivered once has delivery count 1");
    }

    static void lock() throws Exception {
        String topic = "share-lock" + run, group = "share-lock-group" + run;
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1);
            groupConfig(admin, group, "share.auto.offset.reset", "earliest");
            groupConfig(admin, group, "share.record.lock.duration.ms", "15000");
        }
        produce(topic, 0, 5, 1);
        KafkaShareConsumer<String, String> stalled = consumer(group, "explicit");
        stalled.subscribe(List.of(topic));
        int held = 0;
        long deadline = System.currentTimeMillis() + 30_000;
        while (held == 0 && System.currentTimeMillis() < deadline) {
            held = stalled.poll(Duration.ofMillis(200)).count();
        }
        check(held == 5, "lock: the first member holds all 5 records");
        // It stops polling without acknowledging (its heartbeats go on, in the background).
        Map<String, Short> second = new HashMap<>();
        long started = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> other = consumer(group, "explicit")) {
            other.subscribe(List.of(topic));
            deadline = System.currentTimeMillis() + 45_000;
            while (second.size() < 5 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : other.poll(Duration.ofMillis(200))) {
                    second.put(record.value(), record.deliveryCount().orElse((short) -1));
                    other.acknowledge(record, AcknowledgeType.ACCEPT);
                }
                other.commitSync();
            }
        }
        long waited = System.currentTimeMillis() - started;
        check(second.size() == 5, "lock: the other member got the 5 records once their lock ran out");
        check(second.values().stream().allMatch(c -> c == 2), "lock: each with delivery count 2 " + second);
        check(waited >= 10_000, "lock: not before the lock duration (" + waited + " ms)");
        stalled.close(Duration.ofSeconds(10));
    }

    static void adminSection() throws Exception {
        String topic = "share-admin" + run, group = "share-admin-group" + run;
        try (Admin admin = admin()) {
            createTopic(admin, topic, 2);
            groupConfig(admin, group, "share.auto.offset.reset", "earliest");
            produce(topic, 0, 20, 2);
            try (KafkaShareConsumer<String, String> consumer = consumer(group, "implicit")) {
                consumer.subscribe(List.of(topic));
                int got = 0;
                long deadline = System.currentTimeMillis() + 30_000;
                while (got < 20 && System.currentTimeMillis() < deadline) {
                    got += consumer.poll(Duration.ofMillis(200)).count();
                }
                consumer.commitSync();
                check(got == 20, "admin: the member consumed 20 records");
                ShareGroupDescription described = admin.describeShareGroups(List.of(group))
                    .all().get(30, TimeUnit.SECONDS).get(group);
                check(described.groupState() == GroupState.STABLE && described.members().size() == 1,
                    "admin: describeShareGroups: Stable with one member (" + described + ")");
                Collection<GroupListing> listed = admin.listGroups(ListGroupsOptions.forShareGroups())
                    .all().get(30, TimeUnit.SECONDS);
                check(listed.stream().anyMatch(g -> g.groupId().equals(group)
                        && g.type().orElse(null) == GroupType.SHARE),
                    "admin: listGroups(forShareGroups) lists the group as a share group");
                try {
                    admin.alterShareGroupOffsets(group, Map.of(new TopicPartition(topic, 0), 0L))
                        .all().get(30, TimeUnit.SECONDS);
                    check(false, "admin: alterShareGroupOffsets refused while the group has a member");
                } catch (ExecutionException e) {
                    check(e.getCause() instanceof org.apache.kafka.common.errors.GroupNotEmptyException,
                        "admin: alterShareGroupOffsets refused while the group has a member (" + e.getCause() + ")");
                }
            }
            Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo(group).get(30, TimeUnit.SECONDS);
            // Kafka 4.4 persists a start offset one write behind the acknowledgements that
            // move it (its lag counts the settled records past it); Strand's moves with
            // them. Both report lag 0 once everything is acknowledged.
            check(offsets.size() == 2
                    && offsets.values().stream().allMatch(o -> o.startOffset() >= 0 && o.startOffset() <= 10),
                "admin: listShareGroupOffsets: both partitions initialized " + offsets);
            check(offsets.values().stream().allMatch(o -> o.lag().orElse(-1L) == 0),
                "admin: listShareGroupOffsets: lag 0 " + offsets);
            admin.alterShareGroupOffsets(group, Map.of(new TopicPartition(topic, 0), 4L))
                .all().get(30, TimeUnit.SECONDS);
            ok("admin: alterShareGroupOffsets on the empty group");
            try (KafkaShareConsumer<String, String> consumer = consumer(group, "implicit")) {
                consumer.subscribe(List.of(topic));
                Set<String> again = new TreeSet<>();
                long deadline = System.currentTimeMillis() + 30_000;
                while (again.size() < 6 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                        again.add(record.partition() + ":" + record.offset());
                    }
                }
                consumer.commitSync();
                check(again.equals(new TreeSet<>(List.of("0:4", "0:5", "0:6", "0:7", "0:8", "0:9"))),
                    "admin: the reset partition is delivered again from offset 4 " + again);
            }
            admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get(30, TimeUnit.SECONDS);
            offsets = admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo(group).get(30, TimeUnit.SECONDS);
            check(offsets.isEmpty(), "admin: deleteShareGroupOffsets leaves no offsets " + offsets);
            admin.deleteShareGroups(List.of(group)).all().get(30, TimeUnit.SECONDS);
            Collection<GroupListing> listed = admin.listGroups(ListGroupsOptions.forShareGroups())
                .all().get(30, TimeUnit.SECONDS);
            check(listed.stream().noneMatch(g -> g.groupId().equals(group)), "admin: deleteShareGroups");
        }
    }

    static void failover() throws Exception {
        String topic = "share-failover" + run, group = "share-failover-group" + run;
        java.nio.file.Path dir = java.nio.file.Path.of(System.getenv("SHARE_FAILOVER_DIR"));
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1);
            groupConfig(admin, group, "share.auto.offset.reset", "earliest");
        }
        int total = 400;
        produceInSteps(topic, total, 10, 1);
        Set<String> committed = new HashSet<>(), delivered = new HashSet<>();
        int redeliveredCommitted = 0;
        boolean signalled = false;
        try (KafkaShareConsumer<String, String> consumer = consumer(group, "explicit")) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 150_000;
            while (committed.size() < total && System.currentTimeMillis() < deadline) {
                List<String> batch = new ArrayList<>();
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    if (committed.contains(record.value())) {
                        redeliveredCommitted++;
                    }
                    delivered.add(record.value());
                    batch.add(record.value());
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                }
                Map<TopicIdPartition, Optional<KafkaException>> result;
                try {
                    result = consumer.commitSync(Duration.ofSeconds(10));
                } catch (KafkaException e) {
                    continue; // the leader moved: these records come back
                }
                if (result.values().stream().allMatch(Optional::isEmpty)) {
                    committed.addAll(batch);
                }
                if (!signalled && committed.size() >= total / 2) {
                    java.nio.file.Files.writeString(dir.resolve("ready"), "" + committed.size());
                    long wait = System.currentTimeMillis() + 60_000;
                    while (!java.nio.file.Files.exists(dir.resolve("killed")) && System.currentTimeMillis() < wait) {
                        Thread.sleep(100);
                    }
                    signalled = true;
                    ok("failover: " + committed.size() + " committed when the leader was killed");
                }
            }
        }
        check(delivered.size() == total, "failover: all " + total + " records delivered (" + delivered.size() + ")");
        check(committed.size() == total, "failover: all " + total + " acknowledgements committed (" + committed.size() + ")");
        check(redeliveredCommitted == 0,
            "failover: no record delivered again after its acknowledgement committed (" + redeliveredCommitted + ")");
    }

    public static void main(String[] args) throws Exception {
        bootstrap = System.getenv().getOrDefault("STRAND_BOOTSTRAP", "127.0.0.1:9092");
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(280_000);
                System.out.println("FAIL: the driver did not finish in 280 s");
                System.exit(1);
            } catch (InterruptedException e) {
                // done in time
            }
        });
        watchdog.setDaemon(true);
        watchdog.start();
        List<String> sections = args.length > 0 ? Arrays.asList(args)
            : List.of("implicit", "explicit", "lock", "admin");
        for (String section : sections) {
            switch (section) {
                case "implicit" -> implicit();
                case "explicit" -> explicit();
                case "lock" -> lock();
                case "admin" -> adminSection();
                case "failover" -> failover();
                default -> check(false, "unknown section " + section);
            }
        }
        System.exit(0);
    }
}

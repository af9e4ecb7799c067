// Streams groups (KIP-1071, group.protocol=streams) with Kafka Streams 4.4 and the Admin
// client against a running broker (STRAND_BOOTSTRAP): the broker, not the client, runs the
// rebalance (StreamsGroupHeartbeat, API 88), creates the internal topics and answers
// StreamsGroupDescribe (API 89). Prints "ok: ..." per check and "FAIL: ..." on the first
// failure (exit 1). Written and validated against Apache Kafka 4.4.0 (interop/kafka/
// run-kafka.sh), so its checks are Kafka's behaviour, not Strand's idea of it.
//
// One word count (input -> flatMapValues -> groupBy(word) -> count(counts-store) -> output),
// processing.guarantee=at_least_once, two KafkaStreams instances in this JVM (own state
// dirs, one stream thread each, so two members with two process ids):
//   counts     the output's latest value per word equals the words produced
//   topics     the broker created <app>-counts-store-repartition and -changelog itself
//              (Streams sends no CreateTopics in this mode), 3 partitions each, with the
//              configs Streams asked for (changelog compacted, repartition retention -1)
//   describe   describeStreamsGroups: Stable, 2 members with process ids, the 6 active
//              tasks (subtopologies 0 and 1, partitions 0-2) split with no overlap, epochs,
//              the topology with both subtopologies and the internal topics
//   list       listGroups lists the application id as a streams group
//   failover   one instance closes (leaving the group): the other ends with all 6 tasks
//              and counts more input correctly
//   offsets    listStreamsGroupOffsets: committed input offsets at the input's end
//   empty      after both instances closed, the group is Empty with no members
// interop/java/streams-groups.sh then runs kafka-streams-groups on the group it leaves.
//
// Every wait has a deadline; a watchdog halts the JVM if the whole run overstays. Topic and
// group names carry STREAMS_GROUPS_RUN (the script sets one per run), so a run can repeat
// on one broker. Environment: STRAND_BOOTSTRAP (default 127.0.0.1:9092),
// STRAND_STREAMS_STATE_DIR (parent of the two state dirs; default a temp dir).

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListStreamsGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class StreamsGroupsDriver extends Checks {
    static final int PARTITIONS = 3;
    static final long WATCHDOG_SECONDS = 240;
    /** Per poll loop (a state, counts, offsets to be reached). */
    static final long WAIT_SECONDS = 60;
    /** Every task of the word count: subtopology 0 reads the input, 1 the repartition topic. */
    static final Set<String> ALL_TASKS = java.util.Collections.unmodifiableSet(
            new TreeSet<>(List.of("0_0", "0_1", "0_2", "1_0", "1_1", "1_2")));

    static String run = System.getenv().getOrDefault("STREAMS_GROUPS_RUN", "");
    static String appId;
    static String input;
    static String output;
    static String repartition;
    static String changelog;
    static Admin admin;
    static Path stateRoot;
    static final AtomicReference<Throwable> died = new AtomicReference<>();
    static final List<KafkaStreams> open = new ArrayList<>();
    static long start = System.nanoTime();

    // ---- reporting -------------------------------------------------------------------

    static String elapsed() {
        return String.format("%.1fs", (System.nanoTime() - start) / 1e9);
    }

    /** Best effort, before a FAIL exits: the open instances leave the group. */
    static void closeOpen() {
        for (KafkaStreams s : open) {
            s.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                    .withTimeout(Duration.ofSeconds(5)));
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            fail("interrupted");
        }
    }

    static void checkAlive() {
        Throwable t = died.get();
        if (t != null) {
            t.printStackTrace(System.out);
            fail("a Kafka Streams instance died: " + t);
        }
    }

    // ---- the input -------------------------------------------------------------------

    static final List<String> VOCABULARY = List.of("apple", "banana", "cherry", "date", "elder", "fig",
            "grape", "hazel", "iris", "juniper", "kiwi", "lemon");

    /** Line i of a batch: 1 to 5 words, an uneven distribution over the vocabulary. */
    static String line(int batch, int i) {
        int n = 1 + i % 5;
        List<String> words = new ArrayList<>();
        for (int j = 0; j < n; j++) {
            words.add(VOCABULARY.get((i * 5 + j * j * 3 + j * 7 + batch) % VOCABULARY.size()));
        }
        if (batch == 2 && i % 10 == 0) {
            words.add("late"); // a word only the second batch has: a new key after the failover
        }
        return String.join(" ", words);
    }

    static List<String> words(String line) {
        return Arrays.asList(line.toLowerCase().split("\\s+"));
    }

    static void addCounts(Map<String, Long> counts, int batch, int lines) {
        for (int i = 0; i < lines; i++) {
            for (String w : words(line(batch, i))) {
                counts.merge(w, 1L, Long::sum);
            }
        }
    }

    static void produce(int batch, int lines) {
        Properties p = common("streams-groups-input");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(),
                new StringSerializer())) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < lines; i++) {
                // Unkeyed and spread over the partitions: the groupBy must repartition.
                futures.add(producer.send(new ProducerRecord<>(input, i % PARTITIONS, null, line(batch, i))));
            }
            producer.flush();
            for (Future<RecordMetadata> f : futures) {
                await("produce to " + input, f);
            }
        }
    }

    // ---- the application -------------------------------------------------------------

    static KafkaStreams startInstance(String name) throws IOException {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(StreamsGroupsDriver::words)
                .groupBy((key, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts-store"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        Properties p = common(appId + "-" + name);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATE_DIR_CONFIG, Files.createDirectories(stateRoot.resolve(name)).toString());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        KafkaStreams app = new KafkaStreams(builder.build(), p);
        app.setUncaughtExceptionHandler(e -> {
            died.compareAndSet(null, e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        app.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.ERROR) {
                died.compareAndSet(null, new IllegalStateException(name + " went from " + before + " to ERROR"));
            }
        });
        app.start();
        open.add(app);
        return app;
    }

    static void close(KafkaStreams app, String name) {
        // LEAVE_GROUP: a StreamsGroupHeartbeat with member epoch -1, so the broker moves the
        // tasks at once instead of after the session timeout (45 s).
        boolean closed = app.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                .withTimeout(Duration.ofSeconds(STEP_SECONDS)));
        open.remove(app);
        check(closed, name + ": KafkaStreams.close(LEAVE_GROUP) completed (" + elapsed() + ")");
    }

    static String consumerClientId(KafkaStreams app) {
        Set<String> ids = new TreeSet<>();
        for (ThreadMetadata t : app.metadataForLocalThreads()) {
            ids.add(t.consumerClientId());
        }
        return ids.size() == 1 ? ids.iterator().next() : ids.toString();
    }

    static void awaitRunning(Map<String, KafkaStreams> apps) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (apps.values().stream().anyMatch(a -> a.state() != KafkaStreams.State.RUNNING)) {
            checkAlive();
            if (System.nanoTime() > deadline) {
                Map<String, KafkaStreams.State> states = new TreeMap<>();
                apps.forEach((n, a) -> states.put(n, a.state()));
                String group;
                try {
                    group = summary(admin.describeStreamsGroups(List.of(appId)).all().get(10, TimeUnit.SECONDS)
                            .get(appId));
                } catch (Exception e) {
                    group = "describe failed: " + e;
                }
                fail("instances not RUNNING within " + WAIT_SECONDS + "s: " + states + "; the group: " + group);
            }
            sleep(100);
        }
    }

    // ---- the output ------------------------------------------------------------------

    static KafkaConsumer<String, Long> outputReader() {
        Properties p = common("streams-groups-verifier");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        KafkaConsumer<String, Long> reader = new KafkaConsumer<>(p, new StringDeserializer(), new LongDeserializer());
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) {
            tps.add(new TopicPartition(output, i));
        }
        reader.assign(tps);
        reader.seekToBeginning(tps);
        return reader;
    }

    /** Reads on until the latest count per word is `expected`; fails at the deadline. */
    static void awaitCounts(KafkaConsumer<String, Long> reader, Map<String, Long> latest, Map<String, Long> expected,
            String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        long updates = 0;
        while (!latest.equals(expected)) {
            checkAlive();
            if (System.nanoTime() > deadline) {
                Map<String, String> diff = new TreeMap<>();
                Set<String> keys = new TreeSet<>(expected.keySet());
                keys.addAll(latest.keySet());
                for (String k : keys) {
                    if (!java.util.Objects.equals(expected.get(k), latest.get(k))) {
                        diff.put(k, latest.get(k) + " (want " + expected.get(k) + ")");
                    }
                }
                fail(what + ": the output's latest counts are not the expected ones within " + WAIT_SECONDS
                        + "s; " + updates + " updates read, differing: " + diff);
            }
            for (ConsumerRecord<String, Long> r : reader.poll(Duration.ofMillis(200))) {
                latest.put(r.key(), r.value());
                updates++;
            }
        }
        ok(what + ": the output's latest count per word is exactly the input's (" + expected.size() + " words, "
                + expected.values().stream().mapToLong(Long::longValue).sum() + " occurrences, " + updates
                + " updates read, " + elapsed() + ")");
    }

    // ---- the group -------------------------------------------------------------------

    static StreamsGroupDescription describe() {
        return await("describeStreamsGroups " + appId,
                admin.describeStreamsGroups(List.of(appId)).all()).get(appId);
    }

    /** Describes the group until `until` holds; fails with the last description at the deadline. */
    static StreamsGroupDescription awaitGroup(String what, Predicate<StreamsGroupDescription> until) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (true) {
            checkAlive();
            StreamsGroupDescription d = describe();
            if (until.test(d)) {
                return d;
            }
            if (System.nanoTime() > deadline) {
                fail(what + " not reached within " + WAIT_SECONDS + "s; last description: " + summary(d));
            }
            sleep(250);
        }
    }

    static Set<String> tasks(List<StreamsGroupMemberAssignment.TaskIds> ids) {
        Set<String> out = new TreeSet<>();
        for (StreamsGroupMemberAssignment.TaskIds t : ids) {
            for (int p : t.partitions()) {
                out.add(t.subtopologyId() + "_" + p);
            }
        }
        return out;
    }

    static Set<String> active(StreamsGroupMemberDescription m) {
        return tasks(m.assignment().activeTasks());
    }

    /** Active tasks of all members, each once, covering the 6 tasks. */
    static boolean allTasksOnce(Collection<StreamsGroupMemberDescription> members) {
        List<String> all = new ArrayList<>();
        for (StreamsGroupMemberDescription m : members) {
            all.addAll(active(m));
        }
        return all.size() == ALL_TASKS.size() && new HashSet<>(all).equals(ALL_TASKS);
    }

    static String summary(StreamsGroupDescription d) {
        StringBuilder sb = new StringBuilder();
        sb.append("state ").append(d.groupState()).append(", group epoch ").append(d.groupEpoch())
                .append(", assignment epoch ").append(d.targetAssignmentEpoch()).append(", topology epoch ")
                .append(d.topologyEpoch()).append(", members [");
        List<StreamsGroupMemberDescription> members = new ArrayList<>(d.members());
        members.sort(Comparator.comparing(StreamsGroupMemberDescription::clientId));
        for (StreamsGroupMemberDescription m : members) {
            sb.append("{").append(m.clientId()).append(" epoch ").append(m.memberEpoch()).append(" process ")
                    .append(m.processId()).append(" active ").append(active(m)).append(" target ")
                    .append(tasks(m.targetAssignment().activeTasks())).append("}");
        }
        return sb.append("]").toString();
    }

    // ---- the checks ------------------------------------------------------------------

    static void checkInternalTopics() {
        Map<String, TopicDescription> topics = await("describeTopics internal topics",
                admin.describeTopics(List.of(repartition, changelog)).allTopicNames());
        check(topics.get(repartition).partitions().size() == PARTITIONS
                        && topics.get(changelog).partitions().size() == PARTITIONS,
                "topics: the broker created " + repartition + " and " + changelog + " with " + PARTITIONS
                        + " partitions each");
        ConfigResource rc = new ConfigResource(ConfigResource.Type.TOPIC, repartition);
        ConfigResource cc = new ConfigResource(ConfigResource.Type.TOPIC, changelog);
        Map<ConfigResource, Config> configs = await("describeConfigs internal topics",
                admin.describeConfigs(List.of(rc, cc)).all());
        String compact = configs.get(cc).get("cleanup.policy").value();
        check("compact".equals(compact), "topics: the changelog has cleanup.policy=compact (" + compact + ")");
        Config r = configs.get(rc);
        String rPolicy = r.get("cleanup.policy").value();
        String rRetention = r.get("retention.ms").value();
        String rSegment = r.get("segment.bytes").value();
        check("delete".equals(rPolicy) && "-1".equals(rRetention) && "52428800".equals(rSegment),
                "topics: the repartition topic has the configs Streams asked for: cleanup.policy=delete,"
                        + " retention.ms=-1, segment.bytes=52428800 (" + rPolicy + ", " + rRetention + ", "
                        + rSegment + ")");
    }

    static void checkStableTwoMembers() {
        StreamsGroupDescription d = awaitGroup("Stable with 2 members splitting the 6 active tasks",
                g -> g.groupState() == GroupState.STABLE && g.members().size() == 2 && allTasksOnce(g.members()));
        ok("describe: Stable, 2 members, active tasks " + ALL_TASKS + " split with no overlap (" + summary(d) + ", "
                + elapsed() + ")");
        Set<String> processes = d.members().stream().map(StreamsGroupMemberDescription::processId)
                .filter(p -> p != null && !p.isEmpty()).collect(Collectors.toSet());
        check(processes.size() == 2, "describe: each member has its own process id " + processes);
        check(d.members().stream().allMatch(m -> !active(m).isEmpty()),
                "describe: both members have active tasks");
        check(d.groupEpoch() >= 1 && d.targetAssignmentEpoch() >= 1 && d.targetAssignmentEpoch() == d.groupEpoch(),
                "describe: group epoch " + d.groupEpoch() + " and assignment epoch " + d.targetAssignmentEpoch()
                        + " are >= 1 and equal (Stable)");
        check(d.members().stream().allMatch(m -> m.memberEpoch() == d.targetAssignmentEpoch()
                        && active(m).equals(tasks(m.targetAssignment().activeTasks()))),
                "describe: every member is at the assignment epoch with its target assignment");
        check(d.members().stream().allMatch(m -> m.assignment().standbyTasks().isEmpty()
                        && m.assignment().warmupTasks().isEmpty()),
                "describe: no standby or warm-up tasks (the broker's default of 0 standby replicas)");
        check(d.topologyEpoch() == 0 && d.members().stream().allMatch(m -> m.topologyEpoch() == 0),
                "describe: topology epoch 0, group and members");
        check(d.assignorName().equals(Optional.of("sticky")),
                "describe: assignor \"sticky\" (" + d.assignorName() + ")");

        Map<String, StreamsGroupSubtopologyDescription> subs = new TreeMap<>();
        for (StreamsGroupSubtopologyDescription s : d.subtopologies()) {
            subs.put(s.subtopologyId(), s);
        }
        check(subs.keySet().equals(Set.of("0", "1")), "describe: the topology has subtopologies 0 and 1 "
                + subs.keySet());
        StreamsGroupSubtopologyDescription s0 = subs.get("0"), s1 = subs.get("1");
        check(s0.sourceTopics().equals(List.of(input)) && s0.repartitionSinkTopics().equals(List.of(repartition))
                        && s0.stateChangelogTopics().isEmpty() && s0.repartitionSourceTopics().isEmpty(),
                "describe: subtopology 0 reads " + input + " and writes " + repartition + " (" + s0 + ")");
        StreamsGroupSubtopologyDescription.TopicInfo rs = s1.repartitionSourceTopics().get(repartition);
        StreamsGroupSubtopologyDescription.TopicInfo cl = s1.stateChangelogTopics().get(changelog);
        check(s1.sourceTopics().isEmpty() && s1.repartitionSinkTopics().isEmpty()
                        && s1.repartitionSourceTopics().size() == 1 && rs != null && rs.partitions() == PARTITIONS
                        && s1.stateChangelogTopics().size() == 1 && cl != null && cl.partitions() == PARTITIONS,
                "describe: subtopology 1 reads " + repartition + " and has changelog " + changelog + ", "
                        + PARTITIONS + " partitions each (" + s1 + ")");
        check("compact".equals(cl.topicConfigs().get("cleanup.policy"))
                        && "delete".equals(rs.topicConfigs().get("cleanup.policy")),
                "describe: the internal topics carry the configs Streams sent (" + new TreeMap<>(cl.topicConfigs())
                        + ", " + new TreeMap<>(rs.topicConfigs()) + ")");
    }

    static void checkListed() {
        Collection<GroupListing> streamsGroups = await("listGroups(forStreamsGroups)",
                admin.listGroups(ListGroupsOptions.forStreamsGroups()).all());
        Optional<GroupListing> listed = streamsGroups.stream().filter(g -> g.groupId().equals(appId)).findFirst();
        check(listed.isPresent() && listed.get().type().orElse(null) == GroupType.STREAMS,
                "list: listGroups(forStreamsGroups) lists " + appId + " with type streams (" + listed.orElse(null)
                        + ")");
        check("streams".equals(listed.get().protocol()) && listed.get().groupState().orElse(null) == GroupState.STABLE,
                "list: protocol type \"streams\", state Stable (" + listed.get() + ")");
        Collection<GroupListing> all = await("listGroups()", admin.listGroups().all());
        check(all.stream().anyMatch(g -> g.groupId().equals(appId) && g.type().orElse(null) == GroupType.STREAMS),
                "list: listGroups() with no filter lists it as a streams group too");
        Collection<GroupListing> consumerGroups = await("listGroups(forConsumerGroups)",
                admin.listGroups(ListGroupsOptions.forConsumerGroups()).all());
        check(consumerGroups.stream().noneMatch(g -> g.groupId().equals(appId)),
                "list: listGroups(forConsumerGroups) does not list it");
    }

    static void checkOffsets(String what) {
        Map<TopicPartition, OffsetSpec> latestSpec = new HashMap<>();
        for (int i = 0; i < PARTITIONS; i++) {
            latestSpec.put(new TopicPartition(input, i), OffsetSpec.latest());
        }
        Map<TopicPartition, Long> ends = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
        await("listOffsets " + input, admin.listOffsets(latestSpec).all())
                .forEach((tp, info) -> ends.put(tp, info.offset()));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        Map<TopicPartition, Long> committedInput = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
        Map<TopicPartition, OffsetAndMetadata> committed;
        while (true) {
            committed = await("listStreamsGroupOffsets " + appId,
                    admin.listStreamsGroupOffsets(Map.of(appId, new ListStreamsGroupOffsetsSpec()))
                            .partitionsToOffsetAndMetadata(appId));
            committedInput.clear();
            committed.forEach((tp, om) -> {
                if (tp.topic().equals(input) && om != null) {
                    committedInput.put(tp, om.offset());
                }
            });
            if (committedInput.equals(ends)) {
                break;
            }
            if (System.nanoTime() > deadline) {
                fail(what + ": committed input offsets " + committedInput + " did not reach the input's end " + ends
                        + " within " + WAIT_SECONDS + "s");
            }
            checkAlive();
            sleep(250);
        }
        ok(what + ": listStreamsGroupOffsets: committed input offsets " + committedInput + " are the input's end");
        Set<String> topics = committed.keySet().stream().map(TopicPartition::topic).collect(Collectors.toCollection(TreeSet::new));
        check(topics.equals(new TreeSet<>(Set.of(input, repartition))),
                what + ": offsets committed for the input and the repartition topic only " + topics);
    }

    // ---- main ------------------------------------------------------------------------

    public static void main(String[] args) throws Exception {
        onFail = StreamsGroupsDriver::closeOpen;
        metadataMaxAgeMs = null;
        watchdog(WATCHDOG_SECONDS, "the driver did not finish in " + WATCHDOG_SECONDS + " s");

        appId = "streams-groups-app" + run;
        input = "streams-groups-in" + run;
        output = "streams-groups-out" + run;
        repartition = appId + "-counts-store-repartition";
        changelog = appId + "-counts-store-changelog";
        String dir = System.getenv("STRAND_STREAMS_STATE_DIR");
        stateRoot = dir != null ? Files.createDirectories(Path.of(dir))
                : Files.createTempDirectory("strand-streams-groups-");
        System.out.println("group.protocol=streams word count against " + bootstrap + " (application.id " + appId
                + ")");

        admin = newAdmin("streams-groups-admin");
        await("createTopics", admin.createTopics(List.of(
                new NewTopic(input, Optional.of(PARTITIONS), Optional.empty()),
                new NewTopic(output, Optional.of(PARTITIONS), Optional.empty()))).all());

        Map<String, Long> expected = new TreeMap<>();
        addCounts(expected, 1, 300);
        produce(1, 300);
        ok("produced 300 lines to " + input + " (" + PARTITIONS + " partitions)");

        // 1. Two instances, one member each; the broker's initial rebalance delay (3 s by
        // default) lets both join before the first assignment.
        long started = System.nanoTime();
        KafkaStreams a = startInstance("a");
        KafkaStreams b = startInstance("b");
        Map<String, KafkaStreams> both = new TreeMap<>(Map.of("a", a, "b", b));
        awaitRunning(both);
        ok("both instances RUNNING with group.protocol=streams after "
                + String.format("%.1fs", (System.nanoTime() - started) / 1e9));
        KafkaConsumer<String, Long> reader = outputReader();
        Map<String, Long> latest = new TreeMap<>();
        awaitCounts(reader, latest, expected, "counts");

        // 2. The internal topics, created by the broker from the heartbeat's topology.
        checkInternalTopics();

        // 3. The group as the broker describes it.
        checkStableTwoMembers();

        // 4. Listed as a streams group.
        checkListed();

        // 5. Failover: b leaves, a takes every task and counts new input.
        String aClient = consumerClientId(a);
        int epochBefore = describe().groupEpoch();
        close(b, "b");
        StreamsGroupDescription d = awaitGroup("Stable with the remaining member holding all 6 active tasks",
                g -> g.groupState() == GroupState.STABLE && g.members().size() == 1
                        && active(g.members().iterator().next()).equals(ALL_TASKS));
        StreamsGroupMemberDescription survivor = d.members().iterator().next();
        check(survivor.clientId().equals(aClient),
                "failover: the remaining member is instance a (" + survivor.clientId() + ") with all 6 active tasks ("
                        + summary(d) + ", " + elapsed() + ")");
        check(d.groupEpoch() > epochBefore, "failover: the group epoch moved on (" + epochBefore + " -> "
                + d.groupEpoch() + ")");
        awaitRunning(Map.of("a", a));
        addCounts(expected, 2, 150);
        produce(2, 150);
        ok("produced 150 more lines after the failover");
        awaitCounts(reader, latest, expected, "failover");
        reader.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(5)));

        // 6. Committed offsets (at_least_once: OffsetCommit with the member epoch).
        checkOffsets("offsets");

        // 7. The last instance leaves: the group stays, Empty.
        close(a, "a");
        d = awaitGroup("Empty with no members", g -> g.groupState() == GroupState.EMPTY && g.members().isEmpty());
        ok("empty: after both instances left the group is Empty with no members (" + summary(d) + ")");
        // The last member's leave bumps the group epoch and writes the (empty) target
        // assignment at that epoch.
        check(d.targetAssignmentEpoch() == d.groupEpoch(),
                "empty: assignment epoch " + d.targetAssignmentEpoch() + " = group epoch " + d.groupEpoch());
        checkOffsets("empty");

        admin.close(Duration.ofSeconds(10));
        try (Stream<Path> paths = Files.walk(stateRoot)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
        System.out.println("driver done in " + elapsed());
        System.exit(0);
    }
}

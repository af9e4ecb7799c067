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
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.ListStreamsGroupOffsetsSpec;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Grouped;

public final class StreamsGroupsFailover extends StreamsWordCount {
    static final long START_SECONDS = 90;
    static final long WATCHDOG_SECONDS = 330;

    static final Map<String, KafkaStreams> apps = new TreeMap<>();

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
        removeStateDir();
    }

    // ---- the application -------------------------------------------------------------

    static KafkaStreams startInstance(String name) throws IOException {
        Properties p = fedProps(appId + "-" + name, Files.createDirectories(stateDir.resolve(name)), 1);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        KafkaStreams app = new KafkaStreams(topology(Grouped.with(Serdes.String(), Serdes.String()), "counts-store"), p);
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

    static void finish() throws InterruptedException {
        Map<String, Long> expected = finishInput(false);
        awaitCounts(expected, StreamsGroupsFailover::states, StreamsGroupsFailover::printGroup);
        check(allRunning(), "both instances RUNNING at the end (" + states() + ")");
        stopVerifier();

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

        checkOutput(expected, "(aborted transactions; reported, not checked)");
        checkCommittedInput("the group's", () -> await("listStreamsGroupOffsets " + appId,
                admin.listStreamsGroupOffsets(Map.of(appId, new ListStreamsGroupOffsetsSpec()))
                        .partitionsToOffsetAndMetadata(appId)));
    }

    // ---- main ------------------------------------------------------------------------

    public static void main(String[] args) throws Exception {
        onFail = StreamsGroupsFailover::cleanUp;
        awaitTrace = Trace.BEFORE;
        deathMessage = t -> "a Kafka Streams instance failed: " + t + " caused by " + t.getCause();
        clients = "streams-groups-failover";
        vocabulary = 40;
        maxLines = 60000;
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
        String run = System.getenv().getOrDefault("STREAMS_GROUPS_RUN", "");
        watchdog(WATCHDOG_SECONDS, "the app did not finish in " + WATCHDOG_SECONDS + " s");

        appId = "streams-groups-failover-app" + run;
        input = "streams-groups-failover-in" + run;
        output = "streams-groups-failover-out" + run;
        stateDir = makeStateDir("strand-streams-groups-failover-");
        System.out.println("group.protocol=streams, exactly_once_v2 word count on two instances against " + bootstrap
                + " (application.id " + appId + ", " + rate + " lines/s)");
        System.out.flush();

        admin = newAdmin("streams-groups-failover-admin");
        createTopics();

        producer = new InputProducer();
        verifier = new Verifier();
        verifier.thread.start();
        producer.thread.start();
        startInstance("a");
        startInstance("b");
        Thread reporter = new Thread(() -> progress(StreamsGroupsFailover::states), "progress");
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

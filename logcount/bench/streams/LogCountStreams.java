/*
 * kafka_streams_eos: the per-minute ERROR count as a Kafka shop would write it with Kafka Streams.
 *
 * stream(input) -> parse -> groupBy(minute) (a repartition topic) -> count() (RocksDB, the default
 * store, with its changelog) -> mapValues to logcount's output JSON -> to(output). Exactly-once v2,
 * 2 stream threads, the default commit interval (100 ms under exactly-once), a fresh application
 * id and a fresh state directory per run (under --state-dir, deleted at exit). Everything else is
 * Kafka Streams' defaults.
 *
 * The parse rule is the bench's other contenders' (bench/quix_app.py): a line starts with
 * "YYYY-MM-DD HH:MM:SS LEVEL" followed by a space or the end (a trailing \r dropped), the time
 * is a real calendar time, and LEVEL is exactly ERROR. Key = "YYYY-MM-DD HH:MM:00", value =
 * {"log_time": key, "log_count": N, "level": "ERROR"}, as logcount writes it
 * (logcount/core/records.py encode_total).
 *
 * Progress, for bench/phases.py: the main thread asks the broker every POLL_MS for the
 * application's committed offsets, and prints `progress R` when R input records have their
 * counts committed to the output. A count is committed with the repartition offsets it read
 * (one transaction), so R is the input committed at the newest poll whose repartition records
 * the count has all committed: a lower bound, late by at most one poll.
 *
 * --records N: stops once N input records are counted and committed, closes, and prints one JSON
 * line {"records", "seconds"} (seconds from start() to the last commit seen). Without it (the
 * latency runs): prints the first `progress R`, stops asking the broker, and runs until SIGTERM.
 */

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.time.format.ResolverStyle;
import java.util.ArrayDeque;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class LogCountStreams {
    private static final Pattern PREFIX =
        Pattern.compile("^(\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}) ([A-Za-z]+)(?: |\\z)");
    private static final DateTimeFormatter TIME =
        DateTimeFormatter.ofPattern("uuuu-MM-dd HH:mm:ss").withResolverStyle(ResolverStyle.STRICT);
    private static final String GROUPING = "by-minute";
    private static final long POLL_MS = 100;  // the commit interval: finer polls show nothing new
    // An admin request to the local broker answers in milliseconds; a minute means it is gone.
    private static final long ADMIN_TIMEOUT_S = 60;
    // Long enough for close() to commit the last transaction and leave the group.
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(30);

    private LogCountStreams() {}

    /** The minute of an ERROR line ("YYYY-MM-DD HH:MM:00"), or null for any other line. */
    static String errorMinute(String line) {
        if (line == null) {
            return null;
        }
        if (line.endsWith("\r")) {
            line = line.substring(0, line.length() - 1);
        }
        Matcher m = PREFIX.matcher(line);
        if (!m.lookingAt() || !m.group(2).equals("ERROR")) {
            return null;
        }
        try {
            if (LocalDateTime.parse(m.group(1), TIME).getYear() < 1) {
                return null;  // as Python's datetime (the other contenders): years 1 to 9999
            }
        } catch (DateTimeParseException e) {
            return null;
        }
        return m.group(1).substring(0, 16) + ":00";
    }

    static String outputJson(String minute, long count) {
        return "{\"log_time\": \"" + minute + "\", \"log_count\": " + count
            + ", \"level\": \"ERROR\"}";
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            a.put(argv[i], argv[i + 1]);
        }
        String bootstrap = a.get("--bootstrap-servers");
        String input = a.get("--topic");
        String output = a.get("--output-topic");
        String appId = a.get("--application-id");
        String stateParent = a.get("--state-dir");
        long records = Long.parseLong(a.getOrDefault("--records", "0"));
        if (bootstrap == null || input == null || output == null || appId == null
                || stateParent == null) {
            System.err.println("usage: LogCountStreams --bootstrap-servers B --topic IN "
                + "--output-topic OUT --application-id ID --state-dir DIR [--records N]");
            System.exit(2);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.String()))
            .mapValues(LogCountStreams::errorMinute)
            .filter((key, minute) -> minute != null)
            .groupBy((key, minute) -> minute, Grouped.with(GROUPING, Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts-by-minute"))
            .toStream()
            .mapValues(LogCountStreams::outputJson)
            .to(output, Produced.with(Serdes.String(), Serdes.String()));

        // Not in the OS temp directory, which Kafka Streams warns against (it may be cleared).
        Path stateDir = Files.createTempDirectory(
            Files.createDirectories(Path.of(stateParent)), appId + "-");
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch failed = new CountDownLatch(1);
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("kafka streams failed: " + e);
            failed.countDown();
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(CLOSE_TIMEOUT);
            deleteTree(stateDir);
        }));

        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            int partitions = admin.describeTopics(List.of(input)).allTopicNames()
                .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS).get(input).partitions().size();
            // Kafka Streams gives a repartition topic the source topic's partition count.
            Map<TopicPartition, OffsetSpec> repartition = new HashMap<>();
            for (int i = 0; i < partitions; i++) {
                repartition.put(new TopicPartition(appId + "-" + GROUPING + "-repartition", i),
                    OffsetSpec.latest());
            }
            long t0 = System.nanoTime();
            streams.start();
            Progress progress = new Progress(admin, appId, input, repartition);
            long last = 0;
            while (true) {
                if (failed.await(POLL_MS, TimeUnit.MILLISECONDS)) {
                    System.exit(1);
                }
                long done = progress.poll();
                if (done > last) {
                    last = done;
                    System.out.println("progress " + done);
                    System.out.flush();
                    if (records == 0 || done >= records) {
                        break;
                    }
                }
            }
            if (records == 0) {
                failed.await();  // the latency runs: until SIGTERM (the shutdown hook) or a failure
                System.exit(1);
            }
            double seconds = (System.nanoTime() - t0) / 1e9;
            System.out.println("{\"records\": " + last + ", \"seconds\": " + seconds + "}");
            System.out.flush();
        }
        System.exit(0);  // the shutdown hook closes the application and deletes its state
    }

    /** Polls the broker for the input records whose counts are committed (see the top). */
    static final class Progress {
        private final Admin admin;
        private final String appId;
        private final String input;
        private final Map<TopicPartition, OffsetSpec> repartition;
        private final String repartitionTopic;
        private boolean created;
        // (input committed, repartition ends) per poll, newest last, not yet fully counted
        private final Deque<Map.Entry<Long, Map<TopicPartition, Long>>> pending = new ArrayDeque<>();
        private long done;

        Progress(Admin admin, String appId, String input,
                 Map<TopicPartition, OffsetSpec> repartition) {
            this.admin = admin;
            this.appId = appId;
            this.input = input;
            this.repartition = repartition;
            this.repartitionTopic = repartition.keySet().iterator().next().topic();
        }

        long poll() throws InterruptedException, ExecutionException, TimeoutException {
            Map<TopicPartition, OffsetAndMetadata> committed = admin
                .listConsumerGroupOffsets(appId).partitionsToOffsetAndMetadata()
                .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            long in = 0;
            Map<TopicPartition, Long> counted = new HashMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet()) {
                if (e.getValue() == null) {
                    continue;
                }
                if (e.getKey().topic().equals(input)) {
                    in += e.getValue().offset();
                } else if (repartition.containsKey(e.getKey())) {
                    counted.put(e.getKey(), e.getValue().offset());
                }
            }
            created = created || admin.listTopics().names().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS)
                .contains(repartitionTopic);
            if (!created) {
                return done;  // Kafka Streams creates it as it starts
            }
            // The repartition topic's committed end, read after the input's offsets: every
            // record of the transactions that committed those offsets is below it.
            Map<TopicPartition, Long> ends = new HashMap<>();
            try {
                admin.listOffsets(repartition, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED))
                    .all().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS)
                    .forEach((tp, info) -> ends.put(tp, info.offset()));
            } catch (ExecutionException e) {
                return done;  // a partition just created may have no leader yet: the next poll
            }
            pending.addLast(Map.entry(in, ends));
            // The newest poll whose repartition records the count has all committed.
            Iterator<Map.Entry<Long, Map<TopicPartition, Long>>> newest = pending.descendingIterator();
            while (newest.hasNext()) {
                Map.Entry<Long, Map<TopicPartition, Long>> s = newest.next();
                boolean all = s.getValue().entrySet().stream()
                    .allMatch(e -> counted.getOrDefault(e.getKey(), 0L) >= e.getValue());
                if (all) {
                    done = Math.max(done, s.getKey());
                    while (pending.peekFirst() != s) {
                        pending.removeFirst();
                    }
                    break;
                }
            }
            return done;
        }
    }

    private static void deleteTree(Path root) {
        try (Stream<Path> paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).forEach(path -> {
                try {
                    Files.deleteIfExists(path);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
        } catch (IOException | UncheckedIOException e) {
            System.err.println("could not delete " + root + ": " + e);
        }
    }
}

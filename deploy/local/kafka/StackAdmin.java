// Small Kafka admin helper for deploy/local/stack.sh (compiled once into .stack/opt/kafka/classes).
//
//   java -cp 'classes:libs/*' StackAdmin ready  <bootstrap> <timeoutSec>
//       Waits (bounded) until the broker answers a metadata request (describeCluster + listTopics).
//   java -cp 'classes:libs/*' StackAdmin topics <bootstrap> <timeoutSec> <partitions> <retentionMs> <maxMessageBytes> <compactedTopics> <topic>...
//       Waits as above, then makes every topic exist: a missing topic is created with the given
//       partitions (replication factor 1), retention.ms and max.message.bytes, and
//       cleanup.policy=compact when it is one of <compactedTopics> (names separated by spaces, or an
//       empty argument); an existing topic is left alone, except that a topic with fewer partitions
//       than configured is grown to that count.
//
// Exit code 0 on success, 1 on failure (message on stderr).

import java.util.ArrayList;
import java.util.Collection;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.errors.TopicExistsException;

public final class StackAdmin {
    private StackAdmin() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            usage();
        }
        String mode = args[0];
        String bootstrap = args[1];
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(args[2]));

        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "stack-admin");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "200");
        props.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");

        try (Admin admin = Admin.create(props)) {
            Set<String> existing = waitForMetadata(admin, deadline);
            switch (mode) {
                case "ready":
                    System.out.println("[stack] kafka: broker answers metadata (" + existing.size() + " topics)");
                    break;
                case "topics":
                    if (args.length < 8) {
                        usage();
                    }
                    int partitions = Integer.parseInt(args[3]);
                    String retentionMs = args[4];
                    String maxMessageBytes = args[5];
                    Set<String> compacted = new HashSet<>(Arrays.asList(args[6].trim().split("\\s+")));
                    compacted.remove("");
                    List<String> topics = new ArrayList<>();
                    for (int i = 7; i < args.length; i++) {
                        if (!args[i].isBlank()) {
                            topics.add(args[i]);
                        }
                    }
                    ensureTopics(admin, existing, topics, compacted, partitions, retentionMs, maxMessageBytes);
                    break;
                default:
                    usage();
            }
        } catch (Exception e) {
            System.err.println("[stack] kafka admin: " + describe(e));
            System.exit(1);
        }
    }

    private static void usage() {
        System.err.println("usage: StackAdmin ready <bootstrap> <timeoutSec>\n"
                + "       StackAdmin topics <bootstrap> <timeoutSec> <partitions> <retentionMs> <maxMessageBytes> <compactedTopics> <topic>...");
        System.exit(2);
    }

    /** Polls describeCluster + listTopics until both answer or the deadline passes. */
    private static Set<String> waitForMetadata(Admin admin, long deadline) throws Exception {
        Exception last = null;
        while (System.nanoTime() < deadline) {
            try {
                Collection<?> nodes = admin.describeCluster(new DescribeClusterOptions().timeoutMs(5000))
                        .nodes().get(6, TimeUnit.SECONDS);
                if (!nodes.isEmpty()) {
                    return admin.listTopics(new ListTopicsOptions().listInternal(false).timeoutMs(5000))
                            .names().get(6, TimeUnit.SECONDS);
                }
            } catch (Exception e) {
                last = e;
            }
            Thread.sleep(500);
        }
        throw new IllegalStateException("broker did not answer metadata in time"
                + (last == null ? "" : ": " + describe(last)));
    }

    private static void ensureTopics(Admin admin, Set<String> existing, List<String> topics, Set<String> compacted,
                                     int partitions, String retentionMs, String maxMessageBytes) throws Exception {
        List<NewTopic> toCreate = new ArrayList<>();
        List<String> present = new ArrayList<>();
        for (String t : topics) {
            if (existing.contains(t)) {
                present.add(t);
            } else {
                Map<String, String> configs = new HashMap<>();
                configs.put("retention.ms", retentionMs);
                configs.put("max.message.bytes", maxMessageBytes);
                configs.put("cleanup.policy", compacted.contains(t) ? "compact" : "delete");
                toCreate.add(new NewTopic(t, partitions, (short) 1).configs(configs));
            }
        }

        if (!toCreate.isEmpty()) {
            for (Map.Entry<String, org.apache.kafka.common.KafkaFuture<Void>> e
                    : admin.createTopics(toCreate).values().entrySet()) {
                try {
                    e.getValue().get(30, TimeUnit.SECONDS);
                    System.out.println("[stack] kafka: created topic " + e.getKey() + " (partitions=" + partitions
                            + ", retention.ms=" + retentionMs + ", max.message.bytes=" + maxMessageBytes
                            + ", cleanup.policy=" + (compacted.contains(e.getKey()) ? "compact" : "delete") + ")");
                } catch (ExecutionException ex) {
                    if (ex.getCause() instanceof TopicExistsException) {
                        present.add(e.getKey()); // raced with someone else: treat as existing
                    } else {
                        throw ex;
                    }
                }
            }
        }

        if (!present.isEmpty()) {
            Map<String, TopicDescription> descs = admin.describeTopics(present).allTopicNames().get(30, TimeUnit.SECONDS);
            Map<String, NewPartitions> grow = new HashMap<>();
            for (String t : present) {
                int have = descs.get(t).partitions().size();
                if (have < partitions) {
                    grow.put(t, NewPartitions.increaseTo(partitions));
                    System.out.println("[stack] kafka: topic " + t + " has " + have + " partitions, increasing to " + partitions);
                } else {
                    System.out.println("[stack] kafka: topic " + t + " exists (partitions=" + have + "), left alone");
                }
            }
            if (!grow.isEmpty()) {
                admin.createPartitions(grow).all().get(30, TimeUnit.SECONDS);
            }
        }
    }

    private static String describe(Throwable e) {
        Throwable t = e;
        while ((t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName() + ": " + t.getMessage();
    }
}

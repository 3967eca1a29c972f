// Small Kafka admin helper for deploy/local/stack.sh (compiled once into .stack/opt/kafka/classes).
//
//   java -cp 'classes:libs/*' StackAdmin [--config <client.properties>] [--security <specFile>] <mode> ...
//       --config: Java client properties merged into the admin client's (security settings of a
//       secured listener: security.protocol, sasl.*, ssl.*).
//       --security: after the mode's work, apply a principal spec as the `security` mode does (one
//       JVM and one connection for both).
//   java -cp 'classes:libs/*' StackAdmin ready  <bootstrap> <timeoutSec>
//       Waits (bounded) until the broker answers a metadata request (describeCluster + listTopics).
//   java -cp 'classes:libs/*' StackAdmin topics <bootstrap> <timeoutSec> <partitions> <retentionMs> <maxMessageBytes> <compactedTopics> <topic>...
//       Waits as above, then makes every topic exist: a missing topic is created with the given
//       partitions (replication factor 1), retention.ms and max.message.bytes, and
//       cleanup.policy=compact when it is one of <compactedTopics> (names separated by spaces, or an
//       empty argument); an existing topic is left alone, except that a topic with fewer partitions
//       than configured is grown to that count.
//   java -cp 'classes:libs/*' StackAdmin security <bootstrap> <timeoutSec> <specFile>
//       Waits as above, then applies a principal spec, one entry per line (# starts a comment):
//         user <name> <passwordFile>        SCRAM-SHA-512 credentials, set (again) from the file
//         acl <user> <TOPIC|GROUP|CLUSTER> <LITERAL|PREFIXED> <resource> <OP>[,<OP>...]
//       Every user named in the spec ends up with exactly the ALLOW bindings listed for it: missing
//       ones are created and any other binding of that principal is deleted.
//
// Exit code 0 on success, 1 on failure (message on stderr).

import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
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
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.errors.TopicExistsException;

public final class StackAdmin {
    private StackAdmin() {}

    public static void main(String[] argv) throws Exception {
        Properties security = new Properties();
        Path securitySpec = null;
        String[] args = argv;
        while (args.length >= 2 && args[0].startsWith("--")) {
            if (args[0].equals("--config")) {
                try (InputStream in = new FileInputStream(args[1])) {
                    security.load(in);
                }
            } else if (args[0].equals("--security")) {
                securitySpec = Path.of(args[1]);
            } else {
                usage();
            }
            args = Arrays.copyOfRange(args, 2, args.length);
        }
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
        props.putAll(security);

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
                case "security":
                    if (args.length != 4) {
                        usage();
                    }
                    applySecuritySpec(admin, Path.of(args[3]));
                    break;
                default:
                    usage();
            }
            if (securitySpec != null) {
                applySecuritySpec(admin, securitySpec);
            }
        } catch (Exception e) {
            System.err.println("[stack] kafka admin: " + describe(e));
            System.exit(1);
        }
    }

    private static void usage() {
        System.err.println("usage: StackAdmin ready <bootstrap> <timeoutSec>\n"
                + "       StackAdmin topics <bootstrap> <timeoutSec> <partitions> <retentionMs> <maxMessageBytes> <compactedTopics> <topic>...\n"
                + "       StackAdmin security <bootstrap> <timeoutSec> <specFile>\n"
                + "       (any mode may be preceded by --config <client.properties> and --security <specFile>)");
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

    private static void applySecuritySpec(Admin admin, Path spec) throws Exception {
        Map<String, String> passwords = new LinkedHashMap<>();
        Set<AclBinding> wanted = new LinkedHashSet<>();
        int lineNo = 0;
        for (String raw : Files.readAllLines(spec, StandardCharsets.UTF_8)) {
            lineNo++;
            String line = raw.strip();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String[] f = line.split("\\s+");
            if (f[0].equals("user") && f.length == 3) {
                String password = Files.readString(Path.of(f[2]), StandardCharsets.UTF_8).strip();
                if (password.isEmpty()) {
                    throw new IllegalArgumentException(spec + ":" + lineNo + ": empty password file " + f[2]);
                }
                passwords.put(f[1], password);
            } else if (f[0].equals("acl") && f.length == 6) {
                ResourceType type = ResourceType.fromString(f[2]);
                PatternType pattern = PatternType.fromString(f[3]);
                if (type == ResourceType.UNKNOWN || pattern == PatternType.UNKNOWN) {
                    throw new IllegalArgumentException(spec + ":" + lineNo + ": bad resource type or pattern: " + line);
                }
                for (String op : f[5].split(",")) {
                    AclOperation operation = AclOperation.fromString(op);
                    if (operation == AclOperation.UNKNOWN) {
                        throw new IllegalArgumentException(spec + ":" + lineNo + ": unknown operation " + op);
                    }
                    wanted.add(new AclBinding(new ResourcePattern(type, f[4], pattern),
                            new AccessControlEntry("User:" + f[1], "*", operation, AclPermissionType.ALLOW)));
                }
            } else {
                throw new IllegalArgumentException(spec + ":" + lineNo + ": cannot read: " + line);
            }
        }

        // Upserting every time keeps the broker in step with the password files (a new salt is harmless).
        List<UserScramCredentialAlteration> users = new ArrayList<>();
        for (Map.Entry<String, String> u : passwords.entrySet()) {
            users.add(new UserScramCredentialUpsertion(u.getKey(),
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), u.getValue()));
        }
        if (!users.isEmpty()) {
            admin.alterUserScramCredentials(users).all().get(30, TimeUnit.SECONDS);
        }

        Set<String> principals = new HashSet<>();
        for (String u : passwords.keySet()) {
            principals.add("User:" + u);
        }
        for (AclBinding b : wanted) {
            principals.add(b.entry().principal());
        }
        Collection<AclBinding> existing = admin.describeAcls(AclBindingFilter.ANY).values().get(30, TimeUnit.SECONDS);
        List<AclBindingFilter> stale = new ArrayList<>();
        Set<AclBinding> present = new HashSet<>();
        for (AclBinding b : existing) {
            if (!principals.contains(b.entry().principal())) {
                continue;
            }
            if (wanted.contains(b)) {
                present.add(b);
            } else {
                stale.add(b.toFilter());
            }
        }
        List<AclBinding> missing = new ArrayList<>();
        for (AclBinding b : wanted) {
            if (!present.contains(b)) {
                missing.add(b);
            }
        }
        if (!stale.isEmpty()) {
            admin.deleteAcls(stale).all().get(30, TimeUnit.SECONDS);
        }
        if (!missing.isEmpty()) {
            admin.createAcls(missing).all().get(30, TimeUnit.SECONDS);
        }
        System.out.println("[stack] kafka: " + passwords.size() + " SCRAM users set, ACLs: " + wanted.size()
                + " bindings for " + principals.size() + " principals (" + missing.size() + " created, "
                + stale.size() + " removed)");
    }

    private static String describe(Throwable e) {
        Throwable t = e;
        while ((t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName() + ": " + t.getMessage();
    }
}

import { TOPICS, type TopicName } from '@agentrun/contracts';

/**
 * Every topic the platform uses, as a spec a cluster is made to match (`npm run topics -- apply`) and
 * checked against (`npm run topics -- check`, and each service at startup). Brokers never create
 * topics for us: producers and consumers pass allowAutoTopicCreation false.
 */
export interface TopicSpec {
  name: string;
  /** The least number of partitions; more is fine (partitions are never lowered). */
  partitions: number;
  replicationFactor: number;
  /** Topic configs as the broker spells them, values as strings. */
  configs: Record<string, string>;
}

export interface TopicSpecSettings {
  KAFKA_TOPIC_PARTITIONS: number;
  KAFKA_REPLICATION_FACTOR: number;
  KAFKA_MIN_INSYNC_REPLICAS: number;
  KAFKA_RETENTION_MS: number;
}

/** The broker's own default, said out loud so a cluster with a different default cannot surprise us. */
export const TOPIC_MAX_MESSAGE_BYTES = 1_048_576;

/**
 * Record bytes one produce request carries at most: half of what a topic takes in one record batch, so
 * a request's records for one partition (one batch) fit with room for the batch's own overhead. A run's
 * events are split to it before they are sent, and sends coalesced up to it.
 */
export const PRODUCE_REQUEST_BYTES = TOPIC_MAX_MESSAGE_BYTES / 2;

/** Dead-letter topics carry a handful of records: a few partitions spread them over brokers, no more is needed. */
const DLQ_MAX_PARTITIONS = 3;

/**
 * The platform's topics for the given settings, each name with the test prefix (empty in production).
 * Everything keyed by run id that services or outside systems read in parallel (commands, their
 * results, run events, run states) gets KAFKA_TOPIC_PARTITIONS, because one partition is read by one
 * consumer of a group: it caps the consumers that can share the work.
 */
export function platformTopicSpecs(settings: TopicSpecSettings, prefix = ''): TopicSpec[] {
  const partitions = settings.KAFKA_TOPIC_PARTITIONS;
  const dlqPartitions = Math.min(DLQ_MAX_PARTITIONS, partitions);
  const shared = {
    'min.insync.replicas': String(settings.KAFKA_MIN_INSYNC_REPLICAS),
    'max.message.bytes': String(TOPIC_MAX_MESSAGE_BYTES),
  };
  const windowed = { ...shared, 'cleanup.policy': 'delete', 'retention.ms': String(settings.KAFKA_RETENTION_MS) };
  // The newest state of each run stays for good; older ones are compacted away, so no time window.
  const compacted = { ...shared, 'cleanup.policy': 'compact' };
  const spec = (name: TopicName, count: number, configs: Record<string, string>): TopicSpec => ({
    name: prefix + name,
    partitions: count,
    replicationFactor: settings.KAFKA_REPLICATION_FACTOR,
    configs,
  });
  return [
    spec(TOPICS.commands, partitions, windowed),
    spec(TOPICS.commandResults, partitions, windowed),
    spec(TOPICS.commandsDlq, dlqPartitions, windowed),
    spec(TOPICS.runEvents, partitions, windowed),
    spec(TOPICS.runEventsDlq, dlqPartitions, windowed),
    spec(TOPICS.runState, partitions, compacted),
    // Live only (model replies as they stream), read by every gateway: the same window as the run events.
    spec(TOPICS.runTokens, partitions, windowed),
  ];
}

/** The topics each Kafka-using service reads or writes: what it checks before it starts. */
export const TOPICS_BY_SERVICE: Readonly<Record<string, readonly TopicName[]>> = {
  // Outcomes of the commands it takes over HTTP; reads the model replies its SSE streams carry.
  gateway: [TOPICS.commandResults, TOPICS.runTokens],
  // Reads commands; writes their outcomes, unreadable commands, the run events its workflows publish
  // and the deltas of the model calls it makes.
  orchestrator: [TOPICS.commands, TOPICS.commandResults, TOPICS.commandsDlq, TOPICS.runEvents, TOPICS.runTokens],
  // Reads run events; writes unreadable ones and each run's state.
  projector: [TOPICS.runEvents, TOPICS.runEventsDlq, TOPICS.runState],
};

export function topicsUsedBy(service: string): readonly TopicName[] {
  return TOPICS_BY_SERVICE[service] ?? [];
}

/** A topic as the cluster has it. */
export interface DescribedTopic {
  name: string;
  partitions: number;
  /** The smallest replica count of any partition. */
  replicationFactor: number;
  /** Every config's effective value; null when the principal may not read them (no DescribeConfigs). */
  configs: Record<string, string> | null;
  /** The configs set on the topic itself (not inherited): what an alter must send again to keep. */
  overrides: Record<string, string>;
}

export type TopicDifference =
  | { topic: string; kind: 'missing' }
  | { topic: string; kind: 'partitions'; actual: number; wanted: number }
  | { topic: string; kind: 'replication-factor'; actual: number; wanted: number }
  | { topic: string; kind: 'config'; config: string; actual: string | undefined; wanted: string }
  | { topic: string; kind: 'configs-unreadable' };

/** Every way the cluster falls short of the specs; a topic with more partitions than asked is not one. */
export function diffTopics(specs: readonly TopicSpec[], cluster: readonly DescribedTopic[]): TopicDifference[] {
  const byName = new Map(cluster.map((t) => [t.name, t]));
  const differences: TopicDifference[] = [];
  for (const spec of specs) {
    const topic = byName.get(spec.name);
    if (!topic) {
      differences.push({ topic: spec.name, kind: 'missing' });
      continue;
    }
    if (topic.partitions < spec.partitions) differences.push({ topic: spec.name, kind: 'partitions', actual: topic.partitions, wanted: spec.partitions });
    if (topic.replicationFactor !== spec.replicationFactor) {
      differences.push({ topic: spec.name, kind: 'replication-factor', actual: topic.replicationFactor, wanted: spec.replicationFactor });
    }
    const configs = topic.configs;
    if (!configs) {
      differences.push({ topic: spec.name, kind: 'configs-unreadable' });
      continue;
    }
    for (const [config, wanted] of Object.entries(spec.configs)) {
      const actual = configs[config];
      if (actual !== wanted) differences.push({ topic: spec.name, kind: 'config', config, actual, wanted });
    }
  }
  return differences;
}

/** Whether a service can run on the topic at all: it must exist and have the partitions the consumers expect. */
export function isBlocking(difference: TopicDifference): boolean {
  return difference.kind === 'missing' || difference.kind === 'partitions';
}

export function describeDifference(d: TopicDifference): string {
  switch (d.kind) {
    case 'missing':
      return `${d.topic}: missing`;
    case 'partitions':
      return `${d.topic}: ${d.actual} partitions, wanted at least ${d.wanted}`;
    case 'replication-factor':
      return `${d.topic}: replication factor ${d.actual}, wanted ${d.wanted} (apply cannot change it: reassign the partitions with the cluster's tools)`;
    case 'config':
      return `${d.topic}: ${d.config}=${d.actual ?? '(unset)'}, wanted ${d.wanted}`;
    case 'configs-unreadable':
      return `${d.topic}: its configs cannot be read (the principal lacks DescribeConfigs on it)`;
    default: {
      const unknown: never = d;
      return String(unknown);
    }
  }
}

/** The operations `applyTopics` needs from a cluster; `KafkaBus` has them. */
export interface TopicAdmin {
  describeTopics(names: string[]): Promise<DescribedTopic[]>;
  createTopics(specs: TopicSpec[]): Promise<void>;
  raisePartitions(changes: { topic: string; count: number }[]): Promise<void>;
  /** Replaces the topic's own configs with exactly these (the broker's non-incremental alter). */
  replaceTopicConfigs(topic: string, configs: Record<string, string>): Promise<void>;
}

export interface ApplyReport {
  created: string[];
  partitionsRaised: { topic: string; from: number; to: number }[];
  configsChanged: { topic: string; config: string; from: string | undefined; to: string }[];
  /** What apply cannot or will not fix, as found after applying. */
  remaining: TopicDifference[];
}

/**
 * Makes the cluster match the specs as far as it can, and is a no-op the second time: creates missing
 * topics, raises partition counts (never lowers them), and sets differing configs. Replication factors
 * are left alone and reported.
 */
export async function applyTopics(admin: TopicAdmin, specs: readonly TopicSpec[]): Promise<ApplyReport> {
  const names = specs.map((s) => s.name);
  const before = await admin.describeTopics(names);
  const differences = diffTopics(specs, before);
  const report: ApplyReport = { created: [], partitionsRaised: [], configsChanged: [], remaining: [] };

  const missing = new Set(differences.filter((d) => d.kind === 'missing').map((d) => d.topic));
  if (missing.size) {
    await admin.createTopics(specs.filter((s) => missing.has(s.name)));
    report.created.push(...missing);
  }
  const raises = differences.flatMap((d) => (d.kind === 'partitions' ? [{ topic: d.topic, from: d.actual, to: d.wanted }] : []));
  if (raises.length) {
    await admin.raisePartitions(raises.map((r) => ({ topic: r.topic, count: r.to })));
    report.partitionsRaised.push(...raises);
  }
  const configChanges = differences.flatMap((d) => (d.kind === 'config' ? [d] : []));
  const byTopic = new Map(before.map((t) => [t.name, t]));
  for (const topic of new Set(configChanges.map((d) => d.topic))) {
    const spec = specs.find((s) => s.name === topic)!;
    // The alter replaces every config set on the topic, so the ones we do not manage are sent back as they are.
    await admin.replaceTopicConfigs(topic, { ...byTopic.get(topic)!.overrides, ...spec.configs });
    for (const d of configChanges.filter((c) => c.topic === topic)) report.configsChanged.push({ topic, config: d.config, from: d.actual, to: d.wanted });
  }
  report.remaining = diffTopics(specs, await admin.describeTopics(names));
  return report;
}

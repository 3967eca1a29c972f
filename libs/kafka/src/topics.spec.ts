import { TOPICS } from '@agentrun/contracts';
import { applyTopics, diffTopics, describeDifference, platformTopicSpecs, topicsUsedBy, type DescribedTopic, type TopicAdmin, type TopicSpec } from './topics';

const production = { KAFKA_TOPIC_PARTITIONS: 12, KAFKA_REPLICATION_FACTOR: 3, KAFKA_MIN_INSYNC_REPLICAS: 2, KAFKA_RETENTION_MS: 604_800_000 };

/** A cluster that has exactly the specs. */
const asCluster = (specs: TopicSpec[]): DescribedTopic[] =>
  specs.map((s) => ({ name: s.name, partitions: s.partitions, replicationFactor: s.replicationFactor, configs: { ...s.configs, 'segment.bytes': '1073741824' }, overrides: { ...s.configs } }));

describe('platformTopicSpecs', () => {
  it('declares every platform topic with the production defaults', () => {
    const table = platformTopicSpecs(production).map((s) => [s.name, s.partitions, s.replicationFactor, s.configs['min.insync.replicas'], s.configs['retention.ms'], s.configs['cleanup.policy'], s.configs['max.message.bytes']]);
    expect(table).toEqual([
      [TOPICS.commands, 12, 3, '2', '604800000', 'delete', '1048576'],
      [TOPICS.commandResults, 12, 3, '2', '604800000', 'delete', '1048576'],
      [TOPICS.commandsDlq, 3, 3, '2', '604800000', 'delete', '1048576'],
      [TOPICS.runEvents, 12, 3, '2', '604800000', 'delete', '1048576'],
      [TOPICS.runEventsDlq, 3, 3, '2', '604800000', 'delete', '1048576'],
      [TOPICS.runState, 12, 3, '2', undefined, 'compact', '1048576'],
      [TOPICS.runTokens, 12, 3, '2', '604800000', 'delete', '1048576'],
    ]);
    expect(new Set(platformTopicSpecs(production).map((s) => s.name))).toEqual(new Set(Object.values(TOPICS)));
  });

  it('follows the settings and the prefix; dead-letter topics never get more partitions than the others', () => {
    const specs = platformTopicSpecs({ KAFKA_TOPIC_PARTITIONS: 1, KAFKA_REPLICATION_FACTOR: 1, KAFKA_MIN_INSYNC_REPLICAS: 1, KAFKA_RETENTION_MS: 1000 }, 't1.');
    expect(specs.every((s) => s.name.startsWith('t1.agentrun.') && s.partitions === 1 && s.replicationFactor === 1)).toBe(true);
    expect(specs[0].configs).toMatchObject({ 'min.insync.replicas': '1', 'retention.ms': '1000' });
  });

  it('knows which topics each Kafka service uses, all of them declared', () => {
    const declared = new Set<string>(Object.values(TOPICS));
    for (const service of ['gateway', 'orchestrator', 'projector']) {
      expect(topicsUsedBy(service).length).toBeGreaterThan(0);
      for (const topic of topicsUsedBy(service)) expect(declared.has(topic)).toBe(true);
    }
    expect(topicsUsedBy('orchestrator')).toContain(TOPICS.commands);
    expect(topicsUsedBy('projector')).toContain(TOPICS.runEvents);
    expect(topicsUsedBy('gpu-worker')).toEqual([]);
  });
});

describe('diffTopics', () => {
  const specs = platformTopicSpecs(production);

  it('finds nothing when the cluster is as declared, and does not mind extra partitions or configs it does not manage', () => {
    const cluster = asCluster(specs).map((t) => ({ ...t, partitions: t.partitions + 6 }));
    expect(diffTopics(specs, cluster)).toEqual([]);
  });

  it('reports a missing topic, too few partitions, another replication factor and each differing config', () => {
    const cluster = asCluster(specs)
      .filter((t) => t.name !== TOPICS.runState)
      .map((t) => {
        if (t.name === TOPICS.commands) return { ...t, partitions: 3 };
        if (t.name === TOPICS.runEvents) return { ...t, replicationFactor: 1, configs: { ...t.configs, 'min.insync.replicas': '1', 'retention.ms': '86400000' } };
        if (t.name === TOPICS.commandsDlq) {
          const configs = { ...t.configs! };
          delete configs['max.message.bytes'];
          return { ...t, configs };
        }
        return t;
      });
    const differences = diffTopics(specs, cluster);
    expect(differences).toEqual([
      { topic: TOPICS.commands, kind: 'partitions', actual: 3, wanted: 12 },
      { topic: TOPICS.commandsDlq, kind: 'config', config: 'max.message.bytes', actual: undefined, wanted: '1048576' },
      { topic: TOPICS.runEvents, kind: 'replication-factor', actual: 1, wanted: 3 },
      { topic: TOPICS.runEvents, kind: 'config', config: 'min.insync.replicas', actual: '1', wanted: '2' },
      { topic: TOPICS.runEvents, kind: 'config', config: 'retention.ms', actual: '86400000', wanted: '604800000' },
      { topic: TOPICS.runState, kind: 'missing' },
    ]);
    expect(differences.map(describeDifference)).toEqual([
      `${TOPICS.commands}: 3 partitions, wanted at least 12`,
      `${TOPICS.commandsDlq}: max.message.bytes=(unset), wanted 1048576`,
      `${TOPICS.runEvents}: replication factor 1, wanted 3 (apply cannot change it: reassign the partitions with the cluster's tools)`,
      `${TOPICS.runEvents}: min.insync.replicas=1, wanted 2`,
      `${TOPICS.runEvents}: retention.ms=86400000, wanted 604800000`,
      `${TOPICS.runState}: missing`,
    ]);
  });

  it('says when configs could not be read rather than calling every one different', () => {
    const cluster = asCluster(specs).map((t) => ({ ...t, configs: null }));
    expect(diffTopics(specs.slice(0, 1), cluster)).toEqual([{ topic: TOPICS.commands, kind: 'configs-unreadable' }]);
  });
});

/** A cluster in memory, behaving as a broker does for these calls (alter replaces the topic's own configs). */
class FakeCluster implements TopicAdmin {
  readonly topics = new Map<string, DescribedTopic>();
  readonly calls: string[] = [];
  private readonly brokerDefaults: Record<string, string> = { 'cleanup.policy': 'delete', 'retention.ms': '604800000', 'min.insync.replicas': '1', 'max.message.bytes': '1048588' };

  async describeTopics(names: string[]): Promise<DescribedTopic[]> {
    return names.flatMap((n) => {
      const t = this.topics.get(n);
      return t ? [{ ...t, configs: { ...this.brokerDefaults, ...t.overrides }, overrides: { ...t.overrides } }] : [];
    });
  }
  async createTopics(specs: TopicSpec[]): Promise<void> {
    this.calls.push(`create ${specs.map((s) => s.name).join(',')}`);
    for (const s of specs) this.topics.set(s.name, { name: s.name, partitions: s.partitions, replicationFactor: s.replicationFactor, configs: null, overrides: { ...s.configs } });
  }
  async raisePartitions(changes: { topic: string; count: number }[]): Promise<void> {
    this.calls.push(`partitions ${changes.map((c) => `${c.topic}=${c.count}`).join(',')}`);
    for (const c of changes) this.topics.get(c.topic)!.partitions = c.count;
  }
  async replaceTopicConfigs(topic: string, configs: Record<string, string>): Promise<void> {
    this.calls.push(`configs ${topic}`);
    this.topics.get(topic)!.overrides = { ...configs };
  }
}

describe('applyTopics', () => {
  const local = { KAFKA_TOPIC_PARTITIONS: 3, KAFKA_REPLICATION_FACTOR: 1, KAFKA_MIN_INSYNC_REPLICAS: 1, KAFKA_RETENTION_MS: 604_800_000 };

  it('creates what is missing, and does nothing when run again', async () => {
    const cluster = new FakeCluster();
    const specs = platformTopicSpecs(local);
    const first = await applyTopics(cluster, specs);
    expect(first.created).toEqual(specs.map((s) => s.name));
    expect(first.remaining).toEqual([]);
    cluster.calls.length = 0;
    const second = await applyTopics(cluster, specs);
    expect(second).toEqual({ created: [], partitionsRaised: [], configsChanged: [], remaining: [] });
    expect(cluster.calls).toEqual([]);
  });

  it('raises partitions but never lowers them, and changes configs while keeping the ones it does not manage', async () => {
    const cluster = new FakeCluster();
    await applyTopics(cluster, platformTopicSpecs(local));
    cluster.topics.get(TOPICS.runEvents)!.overrides['segment.ms'] = '3600000';
    const report = await applyTopics(cluster, platformTopicSpecs({ ...local, KAFKA_TOPIC_PARTITIONS: 6, KAFKA_RETENTION_MS: 86_400_000 }));
    expect(report.partitionsRaised).toEqual([
      { topic: TOPICS.commands, from: 3, to: 6 },
      { topic: TOPICS.commandResults, from: 3, to: 6 },
      { topic: TOPICS.runEvents, from: 3, to: 6 },
      { topic: TOPICS.runState, from: 3, to: 6 },
      { topic: TOPICS.runTokens, from: 3, to: 6 },
    ]);
    expect(report.configsChanged).toContainEqual({ topic: TOPICS.runEvents, config: 'retention.ms', from: '604800000', to: '86400000' });
    expect(cluster.topics.get(TOPICS.runEvents)!.overrides['segment.ms']).toBe('3600000');
    expect(report.remaining).toEqual([]);

    const lower = await applyTopics(cluster, platformTopicSpecs({ ...local, KAFKA_TOPIC_PARTITIONS: 2, KAFKA_RETENTION_MS: 86_400_000 }));
    expect(lower.partitionsRaised).toEqual([]);
    expect(cluster.topics.get(TOPICS.commands)!.partitions).toBe(6);
  });

  it('leaves the replication factor alone and reports it as remaining', async () => {
    const cluster = new FakeCluster();
    await applyTopics(cluster, platformTopicSpecs(local));
    const report = await applyTopics(cluster, platformTopicSpecs({ ...local, KAFKA_REPLICATION_FACTOR: 3 }));
    expect(report.remaining).toHaveLength(7);
    expect(report.remaining.every((d) => d.kind === 'replication-factor')).toBe(true);
  });
});

import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ConfigResourceTypes, ConfigSource } from 'kafkajs';
import { TOPICS, type CommandOutcome, type DlqRecord, type RunEventEnvelope } from '@agentrun/contracts';
import { DEFAULT_MAX_DECOMPRESSED_BATCH_BYTES, installKafkaDecoding } from '@agentrun/kafka';
import { oneToN, scriptedRunShape, seqsOnTopic } from '../support/invariants';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { scrapeMetrics, total } from '../support/prometheus';
import { SseClient } from '../support/sse';
import { REPO_ROOT, stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

/**
 * Records in every codec, from an outside producer (kcat, on librdkafka), and record batches a
 * consumer cannot read: each consumer dead-letters (or, for live token deltas, counts) the batch and
 * applies the good record behind it, and no consumer stops. The platform here produces lz4 itself
 * (KAFKA_COMPRESSION) and refuses batches that inflate past 8 MiB, so a small zstd batch of 9 MiB
 * of one letter stands for any batch its client cannot read.
 */
const BOUND = 8 * 1024 * 1024;
const CODECS = ['gzip', 'snappy', 'lz4', 'zstd'] as const;

/** Runs a producer that reads its records from standard input; fails with its stderr if it exits non-zero. */
async function feed(name: string, command: string, args: string[], input: Buffer | string): Promise<void> {
  const child = spawn(command, args, { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  child.stdin.end(input);
  const code = await exited;
  if (code !== 0) throw new Error(`${name} exited with ${code}: ${stderr}`);
}

/** Publishes one batch with kcat (librdkafka): one kcat process, one produce request. Keys take Kafka's murmur2 partition, as ours do. */
async function kcat(topic: string, codec: (typeof CODECS)[number] | 'none', records: { key: string; value: string | Buffer }[]): Promise<void> {
  const args = ['-P', '-b', stackUrls().kafkaBrokers.join(','), '-t', topic, '-K', '\t', '-z', codec, '-X', 'topic.partitioner=murmur2_random', '-X', 'message.max.bytes=100000000'];
  await feed('kcat', 'kcat', args, Buffer.concat(records.flatMap((r) => [Buffer.from(`${r.key}\t`), Buffer.from(r.value), Buffer.from('\n')])));
}

/** Publishes one record with the Kafka Java client (its console producer, from the jars the stack installs). */
async function javaProducer(topic: string, codec: 'snappy' | 'lz4' | 'zstd', key: string, value: string): Promise<void> {
  const classpath = `${join(REPO_ROOT, '.stack/opt/kafka/libs')}/*`;
  const args = ['-Xshare:auto', '-XX:TieredStopAtLevel=1', '-cp', classpath, 'org.apache.kafka.tools.ConsoleProducer', '--bootstrap-server', stackUrls().kafkaBrokers.join(','), '--topic', topic];
  await feed('the Java console producer', 'java', [...args, '--compression-codec', codec, '--reader-property', 'parse.key=true', '--reader-property', 'key.separator=\t'], `${key}\t${value}\n`);
}

/** A value of one letter that zstd packs into a few hundred bytes and that inflates past the bound. */
const overTheBound = () => 'a'.repeat(BOUND + 1024 * 1024);

describe('Kafka records in any codec, and batches that cannot be read', () => {
  const platform = new Platform({ KAFKA_COMPRESSION: 'lz4', KAFKA_MAX_DECOMPRESSED_BATCH_BYTES: String(BOUND), TOOL_PACE_TICKS: '2', TOOL_PACE_MS: '50' });
  const org = 'codecs';
  let outcomes: TopicRecord<CommandOutcome>[];
  let commandsDlq: TopicRecord<DlqRecord>[];
  let eventsDlq: TopicRecord<DlqRecord>[];
  let events: TopicRecord<RunEventEnvelope>[];

  beforeAll(async () => {
    // The test's own readers take the platform's lz4 and the broker's zstd too.
    installKafkaDecoding(DEFAULT_MAX_DECOMPRESSED_BATCH_BYTES);
    await platform.start();
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
    commandsDlq = await platform.follow<DlqRecord>(TOPICS.commandsDlq);
    eventsDlq = await platform.follow<DlqRecord>(TOPICS.runEventsDlq);
    events = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
  });
  afterAll(() => platform.stop());

  const agentStart = (runId: string, maxSteps = 4) => JSON.stringify({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'read the notes', max_steps: maxSteps } });
  const readyz = async (app: 'orchestrator' | 'projector' | 'gateway') => (await fetch(`http://127.0.0.1:${platform.ports[app]}/readyz`)).status;

  it('an agent.start compressed with each codec by kcat runs to done', async () => {
    const runs = CODECS.map((codec) => ({ codec, runId: uniqueId(`start-${codec}`) }));
    await Promise.all(runs.map(({ codec, runId }) => kcat(platform.topic(TOPICS.commands), codec, [{ key: runId, value: agentStart(runId) }])));
    await Promise.all(runs.map(({ runId }) => platform.waitForStatus(org, runId, 'done')));
    for (const { codec, runId } of runs) {
      expect({ codec, outcomes: outcomes.filter((o) => o.value.run_id === runId).map((o) => o.value.outcome) }).toEqual({ codec, outcomes: ['accepted'] });
      const [row] = await platform.query<{ last_seq: number }>('SELECT last_seq FROM runs WHERE org = $1 AND run_id = $2', [org, runId]);
      expect({ codec, last_seq: row.last_seq }).toEqual({ codec, last_seq: scriptedRunShape(4).events });
    }
    expect(commandsDlq).toHaveLength(0);
  });

  it("an agent.start from the Java client in snappy (xerial framing), lz4 and zstd (frames without a size) runs to done", async () => {
    const runs = (['snappy', 'lz4', 'zstd'] as const).map((codec) => ({ codec, runId: uniqueId(`java-${codec}`) }));
    await Promise.all(runs.map(({ codec, runId }) => javaProducer(platform.topic(TOPICS.commands), codec, runId, agentStart(runId))));
    await Promise.all(runs.map(({ runId }) => platform.waitForStatus(org, runId, 'done')));
    for (const { codec, runId } of runs) {
      expect({ codec, outcomes: outcomes.filter((o) => o.value.run_id === runId).map((o) => o.value.outcome) }).toEqual({ codec, outcomes: ['accepted'] });
    }
    expect(commandsDlq).toHaveLength(0);
  });

  it('a command batch that cannot be read is dead-lettered whole, and the command behind it on the partition is decided', async () => {
    const runId = uniqueId('behind');
    // Two kcat processes: two batches, the unreadable one first, both in the run's partition.
    await kcat(platform.topic(TOPICS.commands), 'zstd', [{ key: runId, value: overTheBound() }]);
    await kcat(platform.topic(TOPICS.commands), 'none', [{ key: runId, value: agentStart(runId) }]);
    await platform.waitForStatus(org, runId, 'done');
    await waitFor('the batch on the commands DLQ', () => commandsDlq.some((d) => d.key === ''), 30_000);
    const [record] = commandsDlq.map((d) => d.value);
    expect(record).toMatchObject({ reason: 'undecodable_batch', source: { topic: platform.topic(TOPICS.commands), offset: expect.stringMatching(/^\d+$/) } });
    // librdkafka states a frame's size, or (a larger one) not: refused from the size it states or from its blocks' bound.
    expect(record.detail).toMatch(/^zstd: the batch (inflates|may inflate) to 9\d{6} bytes.*, over the 8388608-byte limit/);
    // One record in the batch: its first and last offsets are the same, and the batch's bytes are kept.
    expect(record.source.last_offset).toBe(record.source.offset);
    expect(Buffer.from(record.original_base64, 'base64').length).toBeGreaterThan(61);
    // The partition moved past it: the good command's offset is after the batch's.
    const outcome = outcomes.find((o) => o.value.run_id === runId);
    expect(outcome?.value.outcome).toBe('accepted');
    expect(await readyz('orchestrator')).toBe(200);
    const samples = await scrapeMetrics(platform.ports.orchestrator);
    expect(total(samples, 'agentrun_dlq_total', { topic: platform.topic(TOPICS.commandsDlq), reason: 'undecodable_batch' })).toBe(1);
  });

  it('a run-event batch that cannot be read is dead-lettered whole, and the event behind it is projected', async () => {
    const runId = uniqueId('ghost');
    await kcat(platform.topic(TOPICS.runEvents), 'zstd', [{ key: runId, value: overTheBound() }]);
    const event = { run_id: runId, org: 'probe', kind: 'agent', type: 'step_completed', seq: 1, ts: new Date().toISOString(), payload: { note: 'behind the batch' } };
    await platform.publishRunEvents([{ key: runId, value: JSON.stringify(event) }]);
    await waitFor('the event behind the batch projected', async () => (await platform.query('SELECT 1 FROM run_events WHERE org = $1 AND run_id = $2', ['probe', runId])).length === 1, 30_000);
    await waitFor('the batch on the run-events DLQ', () => eventsDlq.some((d) => d.value.reason === 'undecodable_batch'), 30_000);
    const records = eventsDlq.filter((d) => d.value.reason === 'undecodable_batch').map((d) => d.value);
    expect(records).toHaveLength(1);
    expect(records[0].source).toEqual({ topic: platform.topic(TOPICS.runEvents), partition: expect.any(Number), offset: records[0].source.last_offset, last_offset: expect.stringMatching(/^\d+$/) });
    expect(await readyz('projector')).toBe(200);
  });

  it('a token batch that cannot be read is counted and skipped, and the delta behind it reaches the stream', async () => {
    const runId = uniqueId('tok');
    expect((await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: 'take your time', max_steps: 40 } })).status).toBe(202);
    await platform.waitForStatus(org, runId, 'running');
    await platform.holdRun(org, runId);
    const stream = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': org });
    try {
      await waitFor('the stream open', () => stream.status === 200, 30_000);
      const before = total(await scrapeMetrics(platform.ports.gateway), 'agentrun_run_token_records_unreadable_total');
      await kcat(platform.topic(TOPICS.runTokens), 'zstd', [{ key: runId, value: overTheBound() }]);
      const delta = { org, run_id: runId, step: 1, attempt: 1, index: 0, delta: 'behind the batch' };
      await kcat(platform.topic(TOPICS.runTokens), 'snappy', [{ key: runId, value: JSON.stringify(delta) }]);
      await waitFor('the delta on the stream', () => stream.frames.some((f) => f.event === 'token' && (JSON.parse(f.data) as { delta: string }).delta === 'behind the batch'), 30_000);
      expect(total(await scrapeMetrics(platform.ports.gateway), 'agentrun_run_token_records_unreadable_total')).toBe(before + 1);
      expect(await readyz('gateway')).toBe(200);
    } finally {
      stream.close();
      await platform.http('POST', `/runs/${runId}/cancel`, { org });
    }
  });

  it('with compression.type=zstd on the run-event topics, a run goes the whole way: topic, read model and SSE agree', async () => {
    const admin = platform.kafka.admin();
    await admin.connect();
    try {
      for (const name of [TOPICS.runEvents, TOPICS.runState, TOPICS.runTokens].map((t) => platform.topic(t))) {
        const { resources } = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name }] });
        const kept = resources[0].configEntries
          .filter((e) => e.configSource === ConfigSource.TOPIC_CONFIG && !e.isSensitive && e.configName !== 'compression.type')
          .map((e) => ({ name: e.configName, value: e.configValue }));
        await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name, configEntries: [...kept, { name: 'compression.type', value: 'zstd' }] }] });
        const after = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name }] });
        expect(after.resources[0].configEntries.find((e) => e.configName === 'compression.type')?.configValue).toBe('zstd');
      }
    } finally {
      await admin.disconnect();
    }
    const runId = uniqueId('zstd');
    expect((await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: 'summarise the workspace', max_steps: 6 } })).status).toBe(202);
    await platform.waitForStatus(org, runId, 'done');
    const n = scriptedRunShape(6).events;
    await waitFor('every event on the topic', () => seqsOnTopic(events, org, runId).length === n, 30_000);
    expect(seqsOnTopic(events, org, runId)).toEqual(oneToN(n));
    const stored = await platform.query<{ seq: number }>('SELECT seq FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, runId]);
    expect(stored.map((r) => r.seq)).toEqual(oneToN(n));
    const sse = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': org });
    await sse.finished();
    expect(sse.events().map((e) => e.seq)).toEqual(oneToN(n));
    expect(eventsDlq.filter((d) => d.value.reason !== 'undecodable_batch')).toHaveLength(0);
  });

  it("after the command consumer's connections are killed, intake resumes", async () => {
    const pid = platform.pidOf('orchestrator');
    const { stdout } = await promisify(execFile)('ss', ['-tnpH', 'state', 'established', 'dport', '= :9092']);
    const ports = stdout
      .split('\n')
      .filter((line) => line.includes(`pid=${pid},`))
      .map((line) => /127\.0\.0\.1:(\d+)\s+127\.0\.0\.1:9092/.exec(line)?.[1])
      .filter((port): port is string => port !== undefined);
    // The consumer's group connection and fetch connection, and the producer's, at the least.
    expect(ports.length).toBeGreaterThanOrEqual(2);
    for (const port of ports) await promisify(execFile)('ss', ['-K', 'dst', '127.0.0.1', 'dport', '= :9092', 'sport', `= :${port}`]).catch(() => undefined);
    const after = await promisify(execFile)('ss', ['-tnpH', 'state', 'established', 'dport', '= :9092']);
    const stillOpen = after.stdout.split('\n').filter((line) => line.includes(`pid=${pid},`) && ports.some((p) => line.includes(`127.0.0.1:${p} `)));
    expect(stillOpen).toEqual([]);
    const runId = uniqueId('after-kill');
    await kcat(platform.topic(TOPICS.commands), 'lz4', [{ key: runId, value: agentStart(runId) }]);
    await platform.waitForStatus(org, runId, 'done');
    await waitFor('the orchestrator ready', async () => (await readyz('orchestrator')) === 200, 60_000);
  });
});

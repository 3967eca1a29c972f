/**
 * The projector's Kafka leg, codec by codec, in one run: the bench's run events, signed as the
 * orchestrator signs them, sent by a KafkaBus producing with each codec (KAFKA_COMPRESSION) to a
 * fresh topic; the bytes the broker then holds (its log segments on disk); and a KafkaBus consumer
 * reading them back (decompressing each fetched batch) and applying each batch to a fresh database
 * with applyRunEvents, committing as the projector does. `none` is the baseline measured in the
 * same run. Every topic and database is removed at the end.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DEVELOPMENT_EVENT_KEY } from '@agentrun/config';
import type { RunEventEnvelope } from '@agentrun/contracts';
import { EventSigner, KafkaBus, type KafkaCompression, type OutboundMessage } from '@agentrun/kafka';
import { applyRunEvents, createDataSource, migrate } from '@agentrun/persistence';
import { freshDatabase } from '../support/database';
import { REPO_ROOT, stackUrls } from '../support/stack-env';
import { buildBatches, PARTITIONS, SEQS } from './projector-events';

export interface CodecFigures {
  codec: KafkaCompression;
  events: number;
  brokerBytes: number;
  sendMs: number;
  readApplyMs: number;
  ok: boolean;
}

/** What the broker holds for a topic: the sizes of its partitions' log segments (the local stack's log.dirs). */
function brokerBytes(topic: string): number {
  const logs = join(REPO_ROOT, '.stack/data/kafka/logs');
  let bytes = 0;
  for (const dir of readdirSync(logs).filter((d) => d.startsWith(`${topic}-`))) {
    for (const file of readdirSync(join(logs, dir)).filter((f) => f.endsWith('.log'))) bytes += statSync(join(logs, dir, file)).size;
  }
  return bytes;
}

async function oneCodec(codec: KafkaCompression, events: RunEventEnvelope[], runs: number): Promise<CodecFigures> {
  const id = randomBytes(3).toString('hex');
  const topic = `bench-projector-${codec}-${id}`;
  const timings = { sessionTimeout: 10_000, heartbeatInterval: 1_000, rebalanceTimeout: 10_000 };
  const bus = new KafkaBus({ brokers: stackUrls().kafkaBrokers, clientId: `bench-projector-${codec}`, timings, compression: codec });
  const signer = new EventSigner(DEVELOPMENT_EVENT_KEY);
  const db = await freshDatabase();
  const dataSource = createDataSource({ url: db.url, poolSize: 2, applicationName: `bench-projector-kafka-${codec}` });
  try {
    await dataSource.initialize();
    await migrate(dataSource);
    await bus.createTopics([{ name: topic, partitions: PARTITIONS, replicationFactor: 1, configs: {} }]);
    const messages: OutboundMessage[] = events.map((e) => {
      const value = JSON.stringify(e);
      return { key: e.run_id, value, headers: signer.headers(value) };
    });
    // As the outbox sends: a run's events in order, many runs' sends sharing requests.
    const t0 = performance.now();
    const chunks: Promise<void>[] = [];
    for (let i = 0; i < messages.length; i += 100) chunks.push(bus.send(topic, messages.slice(i, i + 100)));
    await Promise.all(chunks);
    const sendMs = performance.now() - t0;
    const bytes = brokerBytes(topic);

    let applied = 0;
    let first = 0;
    let last = 0;
    let finished!: () => void;
    const all = new Promise<void>((resolve) => (finished = resolve));
    const consumer = await bus.consume({
      groupId: `bench-projector-${codec}-${id}`,
      topics: [topic],
      concurrency: 1,
      handle: async (batch, ctx) => {
        if (!first) first = performance.now();
        const parsed = batch.map((m) => JSON.parse(m.value!.toString('utf8')) as RunEventEnvelope);
        await applyRunEvents(dataSource, parsed);
        await ctx.commit(batch[batch.length - 1].offset);
        applied += batch.length;
        if (applied >= events.length) {
          last = performance.now();
          finished();
        }
      },
    });
    await all;
    await consumer.stop();
    const [row] = (await dataSource.query(`SELECT count(*)::int AS runs, (count(*) FILTER (WHERE last_seq = $1 AND status = 'done'))::int AS done, (SELECT count(*)::int FROM run_events) AS events FROM runs`, [SEQS])) as {
      runs: number;
      done: number;
      events: number;
    }[];
    return { codec, events: events.length, brokerBytes: bytes, sendMs, readApplyMs: last - first, ok: row.runs === runs && row.done === runs && row.events === events.length };
  } finally {
    await bus.deleteTopics([topic]).catch(() => undefined);
    await bus.close();
    await dataSource.destroy().catch(() => undefined);
    await db.drop().catch((err: unknown) => console.error(`could not drop database ${db.name}: ${(err as Error).message}`));
  }
}

/** Runs every codec over the same RUNS x SEQS events and prints them against `none`; false if any read model came out wrong. */
export async function kafkaCodecLeg(codecs: KafkaCompression[], runs: number): Promise<boolean> {
  const events = buildBatches('bench', runs, 500, 42).flat();
  const figures: CodecFigures[] = [];
  for (const codec of codecs) figures.push(await oneCodec(codec, events, runs));
  const base = figures.find((f) => f.codec === 'none') ?? figures[0];
  const row = (cells: string[]) => console.log(`| ${cells.join(' | ')} |`);
  console.log(`\nThrough Kafka: ${events.length.toLocaleString('en-US')} signed run events (${runs} runs x ${SEQS}), ${PARTITIONS} partitions, each codec on a fresh topic and database, in one run.\n`);
  row(['KAFKA_COMPRESSION', 'bytes on the broker', 'bytes / event', 'vs none', 'send', 'read + apply', 'events/s read + applied', 'vs none', 'read model']);
  row(['---', '---', '---', '---', '---', '---', '---', '---', '---']);
  for (const f of figures) {
    const rate = f.events / (f.readApplyMs / 1000);
    const baseRate = base.events / (base.readApplyMs / 1000);
    row([
      f.codec,
      f.brokerBytes.toLocaleString('en-US'),
      (f.brokerBytes / f.events).toFixed(0),
      `${(f.brokerBytes / base.brokerBytes).toFixed(3)}x`,
      `${(f.sendMs / 1000).toFixed(2)} s`,
      `${(f.readApplyMs / 1000).toFixed(2)} s`,
      Math.round(rate).toLocaleString('en-US'),
      `${(rate / baseRate).toFixed(2)}x`,
      f.ok ? 'correct' : 'WRONG',
    ]);
  }
  return figures.every((f) => f.ok);
}

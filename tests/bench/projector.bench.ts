/**
 * The projector's write path in numbers, on the shared Postgres, two fresh databases, one run:
 *
 *   (a) ours: what the projector's batch handler does in Postgres for one fetched Kafka batch of
 *       BATCH events: `applyRunEvents` (one transaction, one unnest insert, one upsert per run, one
 *       NOTIFY), then `readRunStates` for the runs of the batch (the committed states it publishes
 *       to the run-state topic; the Kafka send itself is not timed);
 *   (b) a naive baseline over the same events in the same order: one transaction per event doing
 *       INSERT into run_events, `SELECT max(seq)` for the run, then UPDATE (or INSERT) of its runs row;
 *   (c) `applyRunEvents` alone, as (a) without the run-state read, to show what that read costs.
 *
 * The events are RUNS runs x SEQS seqs, every one carrying the run's `state` as the workflow's outbox
 * attaches it. Runs are spread over the topic's partitions and interleaved within each partition as
 * concurrent runs publish (seq order kept per run); batches are cut per partition and taken in turn,
 * as a consumer fetching partition after partition sees them. Both are applied one batch (or event)
 * at a time on one connection: what is compared is the work per event, not parallelism.
 *
 * The projector sets no batch size of its own: a batch is one kafkajs fetch of a partition, capped by
 * kafkajs's default 1 MiB per partition (about 2,000 of these events when catching up; fewer when
 * live). BATCH = 500 is in that range.
 *
 * Each database is migrated, warmed up (one batch, then TRUNCATE) and measured from empty; after each,
 * the runs table must hold RUNS rows, all with last_seq = SEQS, and run_events RUNS x SEQS rows, or the
 * bench exits non-zero. Both databases are dropped at the end.
 *
 * Then (d), through Kafka: 10,000 of the same events, signed, produced with each KAFKA_COMPRESSION
 * (`none`, `lz4`, `zstd` by default; BENCH_CODECS=none,gzip,snappy,lz4,zstd for all), the bytes the
 * broker holds for each, and a KafkaBus consumer reading and applying them (projector-kafka.ts).
 *
 *   npm run bench:projector
 */
import { performance } from 'node:perf_hooks';
import type { RunEventEnvelope } from '@agentrun/contracts';
import { applyRunEvents, createDataSource, migrate, readRunStates } from '@agentrun/persistence';
import type { DataSource } from 'typeorm';
import { freshDatabase } from '../support/database';
import { KAFKA_COMPRESSIONS, type KafkaCompression } from '@agentrun/kafka';
import { buildBatches, PARTITIONS, SEQS } from './projector-events';
import { kafkaCodecLeg } from './projector-kafka';

const ORG = 'bench';
const RUNS = 200;
const BATCH = 500;
const TARGET_RATIO = 10;

/** The baseline: one transaction per event; insert it, read the run's max seq, then update or create the row. */
async function applyNaively(dataSource: DataSource, event: RunEventEnvelope): Promise<void> {
  await dataSource.transaction(async (tx) => {
    await tx.query('INSERT INTO run_events (org, run_id, seq, type, ts, event) VALUES ($1, $2, $3, $4, $5, $6)', [
      event.org,
      event.run_id,
      event.seq,
      event.type,
      event.ts,
      JSON.stringify(event),
    ]);
    const [{ max }] = (await tx.query('SELECT max(seq) AS max FROM run_events WHERE org = $1 AND run_id = $2', [event.org, event.run_id])) as { max: number }[];
    const state = event.payload.state ?? { status: 'queued' };
    const model = typeof state.model === 'string' ? state.model : null;
    const [, updated] = (await tx.query(
      `UPDATE runs SET status = $3, state = $4, state_seq = $5, last_seq = $6, model = COALESCE($7, model), updated_at = $8
       WHERE org = $1 AND run_id = $2`,
      [event.org, event.run_id, state.status, JSON.stringify(state), event.seq, max, model, event.ts],
    )) as [unknown, number];
    if (updated === 0) {
      await tx.query(
        `INSERT INTO runs (org, run_id, kind, status, state, state_seq, last_seq, first_seq, model, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $6, $8, $9, $9)`,
        [event.org, event.run_id, event.kind, state.status, JSON.stringify(state), event.seq, max, model, event.ts],
      );
    }
  });
}

interface Measured {
  ms: number;
  /** One entry per timed unit (a batch for ours, an event for the baseline), in ms. */
  latencies: number[];
}

/** A fresh, migrated database; `work` runs once on a warm-up batch (then the tables are emptied) and once measured. */
async function onFreshDatabase(label: string, work: (dataSource: DataSource, batches: RunEventEnvelope[][]) => Promise<number[]>, check: Check[]): Promise<Measured> {
  const db = await freshDatabase();
  const dataSource = createDataSource({ url: db.url, poolSize: 2, applicationName: `bench-projector-${label}` });
  try {
    await dataSource.initialize();
    await migrate(dataSource);
    await work(dataSource, buildBatches('warmup', 6, BATCH, 7).slice(0, 1));
    await dataSource.query('TRUNCATE runs, run_events, snapshots');
    const batches = buildBatches(ORG, RUNS, BATCH, 42);
    const t0 = performance.now();
    const latencies = await work(dataSource, batches);
    const ms = performance.now() - t0;
    check.push(await verify(label, dataSource));
    return { ms, latencies };
  } finally {
    await dataSource.destroy().catch(() => undefined);
    try {
      await db.drop();
      dropped.push(db.name);
    } catch (err) {
      console.error(`could not drop database ${db.name} (${label}), drop it by hand: ${(err as Error).message}`);
      process.exitCode = 1;
    }
  }
}

/** The throwaway databases, once dropped. */
const dropped: string[] = [];

interface Check {
  label: string;
  runs: number;
  atLastSeq: number;
  minLastSeq: number | null;
  maxLastSeq: number | null;
  done: number;
  events: number;
  ok: boolean;
}

async function verify(label: string, dataSource: DataSource): Promise<Check> {
  const [row] = (await dataSource.query(
    `SELECT count(*)::int AS runs,
            (count(*) FILTER (WHERE last_seq = $2))::int AS at_last_seq,
            min(last_seq) AS min_last_seq, max(last_seq) AS max_last_seq,
            (count(*) FILTER (WHERE status = 'done'))::int AS done,
            (SELECT count(*)::int FROM run_events WHERE org = $1) AS events
       FROM runs WHERE org = $1`,
    [ORG, SEQS],
  )) as { runs: number; at_last_seq: number; min_last_seq: number | null; max_last_seq: number | null; done: number; events: number }[];
  const check = {
    label,
    runs: row.runs,
    atLastSeq: row.at_last_seq,
    minLastSeq: row.min_last_seq,
    maxLastSeq: row.max_last_seq,
    done: row.done,
    events: row.events,
  };
  return { ...check, ok: check.runs === RUNS && check.atLastSeq === RUNS && check.done === RUNS && check.events === RUNS * SEQS };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const perSecond = (events: number, ms: number) => events / (ms / 1000);
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const msText = (ms: number) => `${ms.toFixed(2)} ms`;
const row = (cells: string[]) => console.log(`| ${cells.join(' | ')} |`);

async function main(): Promise<void> {
  const total = RUNS * SEQS;
  const sample = buildBatches(ORG, RUNS, BATCH, 42);
  const bytes = sample.flat().reduce((sum, e) => sum + Buffer.byteLength(JSON.stringify(e)), 0);
  const checks: Check[] = [];

  const batched = (withRunStates: boolean) => async (dataSource: DataSource, batches: RunEventEnvelope[][]) => {
    const latencies: number[] = [];
    for (const batch of batches) {
      const t0 = performance.now();
      const result = await applyRunEvents(dataSource, batch);
      const runs = new Map(batch.map((e) => [`${e.org}/${e.run_id}`, { org: e.org, run_id: e.run_id }]));
      const states = withRunStates ? await readRunStates(dataSource, [...runs.values()]) : [];
      latencies.push(performance.now() - t0);
      if (result.inserted !== batch.length) throw new Error(`a batch of ${batch.length} inserted ${result.inserted}`);
      if (withRunStates && states.length !== runs.size) throw new Error(`a batch of ${runs.size} runs read ${states.length} run states`);
    }
    return latencies;
  };
  const ours = await onFreshDatabase('ours', batched(true), checks);
  const applyOnly = await onFreshDatabase('apply only', batched(false), checks);
  const naive = await onFreshDatabase(
    'naive',
    async (dataSource, batches) => {
      const latencies: number[] = [];
      for (const event of batches.flat()) {
        const t0 = performance.now();
        await applyNaively(dataSource, event);
        latencies.push(performance.now() - t0);
      }
      return latencies;
    },
    checks,
  );

  const oursRate = perSecond(total, ours.ms);
  const naiveRate = perSecond(total, naive.ms);
  const ratio = oursRate / naiveRate;
  console.log(`\n${RUNS} runs x ${SEQS} seqs = ${fmt(total)} run events (${Math.round(bytes / total)} bytes of JSON each on average, state on every event),`);
  console.log(`over ${PARTITIONS} partitions, interleaved within each; ${sample.length} batches of up to ${BATCH}; each side on its own fresh database, one connection, applied in order.\n`);
  row(['what', 'events', 'time', 'events/s', 'p50', 'p99']);
  row(['---', '---', '---', '---', '---', '---']);
  row([`ours: applyRunEvents + readRunStates, batches of ${BATCH}`, fmt(total), `${(ours.ms / 1000).toFixed(2)} s`, fmt(oursRate), `${msText(percentile(ours.latencies, 50))} / batch`, `${msText(percentile(ours.latencies, 99))} / batch`]);
  row([`apply only: applyRunEvents, batches of ${BATCH}`, fmt(total), `${(applyOnly.ms / 1000).toFixed(2)} s`, fmt(perSecond(total, applyOnly.ms)), `${msText(percentile(applyOnly.latencies, 50))} / batch`, `${msText(percentile(applyOnly.latencies, 99))} / batch`]);
  row(['naive: a transaction per event (insert, select max, update)', fmt(total), `${(naive.ms / 1000).toFixed(2)} s`, fmt(naiveRate), `${msText(percentile(naive.latencies, 50))} / event`, `${msText(percentile(naive.latencies, 99))} / event`]);
  console.log(`\nratio ours / naive (events/s): ${ratio.toFixed(1)}x (target >= ${TARGET_RATIO}x: ${ratio >= TARGET_RATIO ? 'met' : 'NOT met'})`);
  console.log(`apply only / naive: ${(perSecond(total, applyOnly.ms) / naiveRate).toFixed(1)}x; the run-state read adds ${(((ours.ms - applyOnly.ms) / applyOnly.ms) * 100).toFixed(0)}% to the batched time\n`);
  row(['database', 'runs rows', `last_seq = ${SEQS}`, 'min..max last_seq', "status 'done'", 'run_events rows', 'correct']);
  row(['---', '---', '---', '---', '---', '---', '---']);
  for (const c of checks) row([c.label, String(c.runs), String(c.atLastSeq), `${c.minLastSeq}..${c.maxLastSeq}`, String(c.done), fmt(c.events), c.ok ? 'yes' : 'NO']);
  console.log(`\ndatabases dropped: ${dropped.join(', ')}`);
  const codecs = (process.env.BENCH_CODECS ?? 'none,lz4,zstd').split(',').map((c) => c.trim()) as KafkaCompression[];
  const unknown = codecs.filter((c) => !KAFKA_COMPRESSIONS.includes(c));
  if (unknown.length) throw new Error(`BENCH_CODECS: ${unknown.join(', ')} is not one of ${KAFKA_COMPRESSIONS.join(', ')}`);
  if (!(await kafkaCodecLeg(codecs, 100))) {
    console.error('\nread model wrong after the Kafka leg');
    process.exitCode = 1;
  }
  if (checks.length !== 3 || checks.some((c) => !c.ok)) {
    console.error(`\nread model wrong: expected ${RUNS} runs rows, all with last_seq ${SEQS} and status done, and ${fmt(total)} run_events rows`);
    process.exitCode = 1;
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

/**
 * What signing run events costs, in one run on the shared Postgres:
 *
 *   (1) the publisher's side: HMAC-SHA256 of each record's value (`EventSigner.headers`), per event,
 *       beside the `JSON.stringify` the publish activity already does for it;
 *   (2) the projector's check alone: `EventVerifier.verify` per event (key lookup, HMAC, timingSafeEqual);
 *   (3) the projector's batch path without Kafka, on a fresh database per side: for each fetched batch
 *       (records as bytes + headers) verify each record or not, `readRunEvent`, `applyRunEvents`
 *       (contiguous-prefix apply), `readRunStates`. Sides run off, on, on, off, so a drift in the
 *       machine's load during the run weighs on both alike; events/s and the on/off ratio are printed.
 *
 * The events are those of the projector bench (tests/bench/projector-events.ts): 200 runs x 100 seqs,
 * the full state on each, interleaved over the partitions, batches of 500. Every side's read model is
 * checked (200 runs at last_seq 100, 20,000 events) or the bench exits non-zero; databases are dropped.
 *
 *   npm run bench:event-signing
 */
import { performance } from 'node:perf_hooks';
import { readRunEvent } from '@agentrun/contracts/validation';
import { EventSigner, EventVerifier, type EventKey } from '@agentrun/kafka';
import { applyRunEvents, createDataSource, migrate, readRunStates } from '@agentrun/persistence';
import type { RunEventEnvelope } from '@agentrun/contracts';
import { freshDatabase } from '../support/database';
import { buildBatches, PARTITIONS, SEQS } from './projector-events';

const ORG = 'bench';
const RUNS = 200;
const BATCH = 500;
const KEYS: EventKey[] = [
  { kid: 'bench-2026b', secret: Buffer.from('b7'.repeat(32)) },
  { kid: 'bench-2026a', secret: Buffer.from('a5'.repeat(32)) },
];

interface SignedRecord {
  value: Buffer;
  headers: Record<string, string>;
}

/** The batches as the projector receives them: the value bytes the publisher sent, signed with the current key. */
function records(batches: RunEventEnvelope[][]): SignedRecord[][] {
  const signer = new EventSigner(KEYS[0]);
  return batches.map((batch) =>
    batch.map((e) => {
      const value = JSON.stringify(e);
      return { value: Buffer.from(value), headers: { org: e.org, seq: String(e.seq), type: e.type, ...signer.headers(value) } };
    }),
  );
}

/** Best of `rounds` timings of `work` over every event, in microseconds per event. */
function perEvent(events: number, rounds: number, work: () => void): number {
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    work();
    best = Math.min(best, performance.now() - t0);
  }
  return (best * 1000) / events;
}

interface Side {
  label: string;
  verify: boolean;
  ms: number;
  ok: boolean;
}

async function projectorSide(label: string, verify: boolean): Promise<Side> {
  const db = await freshDatabase();
  const dataSource = createDataSource({ url: db.url, poolSize: 2, applicationName: `bench-event-signing-${verify ? 'on' : 'off'}` });
  const verifier = new EventVerifier(KEYS);
  const run = async (batches: SignedRecord[][]) => {
    for (const batch of batches) {
      const events: RunEventEnvelope[] = [];
      for (const record of batch) {
        if (verify && !verifier.verify(record.value, record.headers).ok) throw new Error('a signed record did not verify');
        const reading = readRunEvent(record.value);
        if (!reading.ok) throw new Error(`unreadable: ${reading.detail}`);
        events.push(reading.event);
      }
      await applyRunEvents(dataSource, events);
      await readRunStates(dataSource, [...new Map(events.map((e) => [`${e.org}/${e.run_id}`, { org: e.org, run_id: e.run_id }])).values()]);
    }
  };
  try {
    await dataSource.initialize();
    await migrate(dataSource);
    await run(records(buildBatches('warmup', 6, BATCH, 7).slice(0, 1)));
    await dataSource.query('TRUNCATE runs, run_events, snapshots');
    const batches = records(buildBatches(ORG, RUNS, BATCH, 42));
    const t0 = performance.now();
    await run(batches);
    const ms = performance.now() - t0;
    const [row] = (await dataSource.query(
      `SELECT (count(*) FILTER (WHERE last_seq = $2))::int AS at_last, (SELECT count(*)::int FROM run_events WHERE org = $1) AS events FROM runs WHERE org = $1`,
      [ORG, SEQS],
    )) as { at_last: number; events: number }[];
    return { label, verify, ms, ok: row.at_last === RUNS && row.events === RUNS * SEQS };
  } finally {
    await dataSource.destroy().catch(() => undefined);
    await db.drop().catch((err: Error) => {
      console.error(`could not drop database ${db.name}, drop it by hand: ${err.message}`);
      process.exitCode = 1;
    });
  }
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const row = (cells: string[]) => console.log(`| ${cells.join(' | ')} |`);

async function main(): Promise<void> {
  const total = RUNS * SEQS;
  const all = buildBatches(ORG, RUNS, BATCH, 42).flat();
  const values = all.map((e) => JSON.stringify(e));
  const bytes = values.reduce((sum, v) => sum + Buffer.byteLength(v), 0);
  const signer = new EventSigner(KEYS[0]);
  const verifier = new EventVerifier(KEYS);
  const signed = records([all])[0];

  let sink = 0;
  const stringifyUs = perEvent(total, 5, () => all.forEach((e) => (sink += JSON.stringify(e).length)));
  const signUs = perEvent(total, 5, () => values.forEach((v) => (sink += signer.headers(v)['agentrun-signature'].length)));
  const verifyUs = perEvent(total, 5, () => signed.forEach((r) => (sink += verifier.verify(r.value, r.headers).ok ? 1 : 0)));
  const readUs = perEvent(total, 5, () => signed.forEach((r) => (sink += readRunEvent(r.value).ok ? 1 : 0)));
  if (sink === 0) throw new Error('nothing measured');

  const sides: Side[] = [];
  for (const [label, verify] of [['off 1', false], ['on 1', true], ['on 2', true], ['off 2', false]] as const) sides.push(await projectorSide(label, verify));
  const rate = (s: Side) => total / (s.ms / 1000);
  const mean = (verify: boolean) => {
    const chosen = sides.filter((s) => s.verify === verify);
    return total / (chosen.reduce((sum, s) => sum + s.ms, 0) / chosen.length / 1000);
  };

  console.log(`\n${RUNS} runs x ${SEQS} seqs = ${fmt(total)} run events, ${Math.round(bytes / total)} bytes of JSON each on average, over ${PARTITIONS} partitions, batches of ${BATCH}.\n`);
  row(['per event (CPU, best of 5)', 'µs']);
  row(['---', '---']);
  row(['publisher: JSON.stringify (already done)', stringifyUs.toFixed(2)]);
  row(['publisher: sign (HMAC-SHA256, hex)', signUs.toFixed(2)]);
  row(['projector: verify (HMAC-SHA256, timingSafeEqual)', verifyUs.toFixed(2)]);
  row(['projector: readRunEvent (parse + validate, already done)', readUs.toFixed(2)]);
  console.log();
  row(['projector batch path (verify? + read + apply + run-state read)', 'verification', 'time', 'events/s', 'read model']);
  row(['---', '---', '---', '---', '---']);
  for (const s of sides) row([s.label, s.verify ? 'on' : 'off', `${(s.ms / 1000).toFixed(2)} s`, fmt(rate(s)), s.ok ? 'correct' : 'WRONG']);
  const on = mean(true);
  const off = mean(false);
  console.log(`\nmean events/s: off ${fmt(off)}, on ${fmt(on)}; on / off = ${(on / off).toFixed(3)} (${(((off - on) / off) * 100).toFixed(1)}% slower with verification)`);
  console.log(`sign / stringify: ${(signUs / stringifyUs).toFixed(2)}x; verify / readRunEvent: ${(verifyUs / readUs).toFixed(2)}x; verify per event as a share of the projector's per-event time with it: ${((verifyUs / (1e6 / on)) * 100).toFixed(2)}%`);
  if (sides.some((s) => !s.ok)) {
    console.error(`\nread model wrong on a side: expected ${RUNS} runs at last_seq ${SEQS} and ${fmt(total)} events`);
    process.exitCode = 1;
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

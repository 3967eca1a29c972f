import { AsyncLocalStorage } from 'node:async_hooks';
import type { RunEventEnvelope, RunStatus } from '@agentrun/contracts';
import { applyRunEvents, contiguousPrefix, createDataSource, migrate, ReadModel, RUN_EVENTS_CHANNEL, shippedMigrations } from '@agentrun/persistence';
import { Client } from 'pg';
import type { DataSource } from 'typeorm';
import { freshDatabase } from '../support/database';
import { waitFor } from '../support/wait';

function event(runId: string, seq: number, status?: RunStatus, ts = `2026-11-29T17:00:${String(seq).padStart(2, '0')}.000Z`): RunEventEnvelope {
  return {
    run_id: runId,
    org: 'acme',
    kind: 'agent',
    seq,
    type: status ? 'status_changed' : 'step_completed',
    ts,
    payload: status ? { state: { status, goal: 'g', step: seq, max_steps: 9, policy: 'scripted', tier: 'batch' } } : { step: seq },
  };
}

describe('the projection into Postgres', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let dataSource: DataSource;
  let readModel: ReadModel;

  beforeAll(async () => {
    db = await freshDatabase();
    // Three services starting at once: the advisory lock lets exactly one migrate.
    const sources = [1, 2, 3].map((i) => createDataSource({ url: db.url, poolSize: 2, applicationName: `migrate-${i}` }));
    await Promise.all(sources.map((s) => s.initialize()));
    const applied = await Promise.all(sources.map((s) => migrate(s)));
    const migrators = applied.filter((names) => names.length > 0);
    expect(migrators).toHaveLength(1);
    // Every migration of this build, in order, applied by exactly one of the racing starters.
    expect(migrators[0]).toEqual(shippedMigrations());
    await Promise.all(sources.slice(1).map((s) => s.destroy()));
    dataSource = sources[0];
    readModel = new ReadModel(dataSource);
  });
  afterAll(async () => {
    await dataSource?.destroy();
    await db?.drop();
  });

  const runRow = async (runId: string) => (await dataSource.query('SELECT status, state_seq, last_seq, created_at FROM runs WHERE org = $1 AND run_id = $2', ['acme', runId]))[0];

  it('applies a batch once: a replay of the same events changes nothing', async () => {
    const batch = [event('r1', 1, 'running'), event('r1', 2), event('r1', 3, 'done')];
    expect((await applyRunEvents(dataSource, batch)).inserted).toBe(3);
    const before = await runRow('r1');
    expect((await applyRunEvents(dataSource, batch)).inserted).toBe(0);
    expect(await runRow('r1')).toEqual(before);
    expect(before).toMatchObject({ status: 'done', state_seq: 3, last_seq: 3 });
  });

  it('writes the snapshot manifest from snapshot_captured events, once; a row the table cannot hold is left out, its event kept', async () => {
    const row = { snapshot_id: 'snap-0001', source_agent_name: 'AgentRun', source_context_id: 'm1', elapsed_s: 1, captured_at_utc: '2026-11-29T17:00:01.000Z', is_final: false, capture_status: 'ok', step: 1, version: 1, turn: 1 };
    const captured = (seq: number, snapshot: Record<string, unknown>): RunEventEnvelope => ({ ...event('m1', seq), type: 'snapshot_captured', payload: { snapshot } });
    const batch = [
      captured(1, row),
      captured(2, { ...row, snapshot_id: 'snap-0002', step: 1.5 }),
      captured(3, { ...row, snapshot_id: 'snap-0003', capture_status: 'great', captured_at_utc: 'yesterday' }),
      captured(4, { ...row, snapshot_id: 'snap-0004', captured_at_utc: 'not a time', bytes: -1 }),
    ];
    expect((await applyRunEvents(dataSource, batch)).inserted).toBe(4);
    expect((await applyRunEvents(dataSource, batch)).inserted).toBe(0);
    const manifest = await dataSource.query(`SELECT snapshot_id, seq, step, bytes, captured_at FROM snapshots WHERE org = 'acme' AND run_id = 'm1' ORDER BY seq`);
    // snap-0002's step is not an integer: stored with step 0 rather than refusing the event; snap-0003's status is unknown: left out.
    expect(manifest.map((r: { snapshot_id: string; step: number }) => [r.snapshot_id, r.step])).toEqual([
      ['snap-0001', 1],
      ['snap-0002', 0],
      ['snap-0004', 1],
    ]);
    expect(manifest[2].bytes).toBeNull();
    expect(new Date(manifest[2].captured_at).toISOString()).toBe(batch[3].ts);
  });

  it('moves a run only along its contiguous seq prefix: an event past a gap is stored, and applied with those after it when the gap fills', async () => {
    expect(await applyRunEvents(dataSource, [event('r2', 3, 'paused'), event('r2', 4)])).toEqual({ inserted: 2, applied: 0, touched: [] });
    // Stored, but nothing anyone reads shows it: no row, no events.
    expect(await runRow('r2')).toBeUndefined();
    expect(await readModel.eventsAfter('acme', 'r2', 0, 100)).toEqual([]);
    await applyRunEvents(dataSource, [event('r2', 1, 'running')]);
    expect(await runRow('r2')).toMatchObject({ status: 'running', state_seq: 1, last_seq: 1 });
    expect((await readModel.lastEvents('acme', 'r2', 10)).map((e) => e.seq)).toEqual([1]);
    // Seq 2 fills the gap: 2, then the stored 3 and 4, in order; the batch's own copy of 3 is a replay.
    const filled = await applyRunEvents(dataSource, [event('r2', 2, 'running'), event('r2', 3, 'paused')]);
    expect(filled).toEqual({ inserted: 1, applied: 3, touched: [{ org: 'acme', run_id: 'r2', seq: 4 }] });
    const row = await runRow('r2');
    expect(row).toMatchObject({ status: 'paused', state_seq: 3, last_seq: 4 });
    expect(row.created_at.toISOString()).toBe('2026-11-29T17:00:01.000Z');
    await applyRunEvents(dataSource, [event('r2', 5, 'cancelled'), event('r2', 2, 'running')]);
    expect(await runRow('r2')).toMatchObject({ status: 'cancelled', state_seq: 5, last_seq: 5 });
    expect((await readModel.eventsAfter('acme', 'r2', 0, 100)).map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
  });

  it('a seq far past the prefix (the forged jump to 99999) changes no state, no last_seq and no event list', async () => {
    await applyRunEvents(dataSource, [event('r5', 1, 'running'), event('r5', 2, 'done')]);
    const before = await runRow('r5');
    const forged: RunEventEnvelope = { ...event('r5', 99_999, 'failed', '2026-11-29T17:01:00.000Z'), payload: { state: { status: 'failed', goal: 'pwned', step: 0, max_steps: 9, policy: 'scripted', tier: 'batch' } } };
    expect(await applyRunEvents(dataSource, [forged])).toEqual({ inserted: 1, applied: 0, touched: [] });
    expect(await runRow('r5')).toEqual(before);
    expect(await readModel.getRun('acme', 'r5')).toMatchObject({ status: 'done', last_seq: 2, state: { goal: 'g' } });
    expect((await readModel.lastEvents('acme', 'r5', 10)).map((e) => e.seq)).toEqual([1, 2]);
    expect((await readModel.eventsAfter('acme', 'r5', 0, 100)).map((e) => e.seq)).toEqual([1, 2]);
  });

  it('reads many runs in one query (the live streams\' batched read): each from its own seq, its applied prefix only, its own org only, a page each', async () => {
    const globex = (seq: number): RunEventEnvelope => ({ ...event('m7', seq, seq === 1 ? 'running' : undefined), org: 'globex' });
    await applyRunEvents(dataSource, [1, 2, 3, 4, 5].map((seq) => event('m7', seq, seq === 1 ? 'running' : undefined)));
    // m8: 1..2 applied, 4 stored past the gap at 3.
    await applyRunEvents(dataSource, [event('m8', 1, 'running'), event('m8', 2), event('m8', 4)]);
    // The same run id in another org.
    await applyRunEvents(dataSource, [1, 2, 3].map(globex));
    const reads = [
      { org: 'acme', runId: 'm7', after: 1 },
      { org: 'acme', runId: 'm8', after: 0 },
      { org: 'acme', runId: 'no-such-run', after: 0 },
      { org: 'globex', runId: 'm7', after: 0 },
      { org: 'other', runId: 'm7', after: 0 },
      { org: 'acme', runId: 'm7', after: 4 },
    ];
    const got = await readModel.eventsAfterMany(reads, 3);
    expect(got.map((events) => events.map(({ event: e }) => `${e.org}/${e.run_id}/${e.seq}`))).toEqual([
      ['acme/m7/2', 'acme/m7/3', 'acme/m7/4'],
      ['acme/m8/1', 'acme/m8/2'],
      [],
      ['globex/m7/1', 'globex/m7/2', 'globex/m7/3'],
      [],
      ['acme/m7/5'],
    ]);
    expect(got[1][0]).toEqual({ seq: 1, event: event('m8', 1, 'running'), traceparent: null });
    // The same rows as one eventsAfter per run.
    for (const [i, r] of reads.entries()) expect(got[i]).toEqual(await readModel.eventsAfter(r.org, r.runId, r.after, 3));
    expect(await readModel.eventsAfterMany([], 3)).toEqual([]);
    // From a seq known to be applied the run's bound is not looked up, and the contiguous prefix is the same.
    const known = await readModel.eventsAfterMany(reads.map((r) => ({ ...r, afterApplied: true })), 3);
    expect(known.map((events, i) => contiguousPrefix(events, reads[i].after))).toEqual(got);
    // A resume point only claimed (3, in m8's gap) is checked against the bound: 4 is stored, not applied.
    expect(await readModel.eventsAfterMany([{ org: 'acme', runId: 'm8', after: 3 }], 3)).toEqual([[]]);
    // Handed over as the rows come: every read once, in the order given, the empty ones too, each in
    // the caller's async context (the rows arrive in that of whoever opened the pooled connection, which
    // the reads above opened outside this one).
    const handed: [number, number[], string | undefined][] = [];
    const context = new AsyncLocalStorage<string>();
    await context.run('the reader', () => readModel.eachEventsAfter(reads, 3, (i, events) => handed.push([i, events.map((e) => e.seq), context.getStore()])));
    expect(handed).toEqual(got.map((events, i) => [i, events.map((e) => e.seq), 'the reader']));
    // A handler that throws stops the handing; the read rejects with its error once the query is over.
    const seen: number[] = [];
    await expect(
      readModel.eachEventsAfter(reads, 3, (i) => {
        seen.push(i);
        if (i === 1) throw new Error('the stream broke');
      }),
    ).rejects.toThrow('the stream broke');
    expect(seen).toEqual([0, 1]);
    // Each read gave its connection back to the pool, the failed one too.
    const pool = (dataSource.driver as unknown as { master: { totalCount: number; idleCount: number } }).master;
    expect(pool.idleCount).toBe(pool.totalCount);
  });

  it('two batches of one run applied at once, each holding what fills the other\'s gap, leave the whole prefix applied', async () => {
    await applyRunEvents(dataSource, [event('r6', 1, 'running')]);
    for (let round = 0; round < 5; round++) {
      const base = 2 + round * 2;
      await Promise.all([applyRunEvents(dataSource, [event('r6', base, 'running')]), applyRunEvents(dataSource, [event('r6', base + 1, 'running')])]);
    }
    expect(await runRow('r6')).toMatchObject({ last_seq: 11, state_seq: 11 });
  });

  it('NOTIFYs once per committed batch, naming the newest seq per run, and not for a pure replay', async () => {
    const listener = new Client({ connectionString: db.url });
    await listener.connect();
    const notices: string[] = [];
    listener.on('notification', (n) => notices.push(n.payload ?? ''));
    await listener.query(`LISTEN ${RUN_EVENTS_CHANNEL}`);
    try {
      await applyRunEvents(dataSource, [event('r3', 1, 'running'), event('r3', 2), event('r4', 1, 'running')]);
      await waitFor('a notice', () => notices.length === 1);
      expect(JSON.parse(notices[0])).toEqual([
        ['acme', 'r3', 2],
        ['acme', 'r4', 1],
      ]);
      await applyRunEvents(dataSource, [event('r3', 1, 'running')]);
      await applyRunEvents(dataSource, [event('r3', 3, 'done')]);
      await waitFor('the second notice', () => notices.length === 2);
      expect(JSON.parse(notices[1])).toEqual([['acme', 'r3', 3]]);
    } finally {
      await listener.end();
    }
  });
});

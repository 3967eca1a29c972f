import type { RunEventEnvelope, RunStatus } from '@agentrun/contracts';
import { applyRunEvents, createDataSource, migrate, ReadModel, RUN_EVENTS_CHANNEL, shippedMigrations } from '@agentrun/persistence';
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

  it('an out-of-order duplicate never moves the row backwards, and created_at is the first event\'s', async () => {
    await applyRunEvents(dataSource, [event('r2', 3, 'paused'), event('r2', 4)]);
    expect(await runRow('r2')).toMatchObject({ status: 'paused', last_seq: 4 });
    await applyRunEvents(dataSource, [event('r2', 1, 'running'), event('r2', 2, 'running'), event('r2', 3, 'paused')]);
    const row = await runRow('r2');
    expect(row).toMatchObject({ status: 'paused', state_seq: 3, last_seq: 4 });
    expect(row.created_at.toISOString()).toBe('2026-11-29T17:00:01.000Z');
    await applyRunEvents(dataSource, [event('r2', 5, 'cancelled'), event('r2', 2, 'running')]);
    expect(await runRow('r2')).toMatchObject({ status: 'cancelled', state_seq: 5, last_seq: 5 });
    expect((await readModel.eventsAfter('acme', 'r2', 0, 100)).map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
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

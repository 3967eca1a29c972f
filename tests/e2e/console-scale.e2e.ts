import type { RunEventEnvelope } from '@agentrun/contracts';
import { applyRunEvents, createDataSource } from '@agentrun/persistence';
import type { DataSource } from 'typeorm';
import { Platform } from '../support/platform';
import { stackUrls } from '../support/stack-env';

function started(org: string, runId: string, ts: string): RunEventEnvelope {
  return { run_id: runId, org, kind: 'eval', seq: 1, type: 'run_started', ts, payload: { state: { status: 'running', model: 'm' } } };
}

describe('the console at scale', () => {
  const platform = new Platform();
  let db: DataSource;
  beforeAll(async () => {
    await platform.start();
    db = createDataSource({ url: stackUrls().databaseUrl(platform.database), poolSize: 2, applicationName: 'console-scale' });
    await db.initialize();
  });
  afterAll(async () => {
    await db?.destroy();
    await platform.stop();
  });

  it('keyset pages over 1,000 runs return each run exactly once while new runs are inserted', async () => {
    const org = 'pager';
    const base = Date.parse('2026-11-01T00:00:00.000Z');
    const events = Array.from({ length: 1_000 }, (_, i) => started(org, `r-${String(i).padStart(4, '0')}`, new Date(base + Math.floor(i / 3) * 1000).toISOString()));
    for (let i = 0; i < events.length; i += 250) await applyRunEvents(db, events.slice(i, i + 250));

    const seen: string[] = [];
    let cursor: string | null = null;
    let inserted = 0;
    do {
      const res: { status: number; body: { runs: { run_id: string }[]; next_cursor: string | null } } = await platform.http(
        'GET',
        `/runs?limit=37${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        { org },
      );
      expect(res.status).toBe(200);
      seen.push(...res.body.runs.map((r) => r.run_id));
      cursor = res.body.next_cursor;
      // New runs arrive while the client pages: newer than everything, so they are on page one, not here.
      await applyRunEvents(db, [started(org, `new-${inserted++}`, new Date(base + 10_000_000 + inserted).toISOString())]);
    } while (cursor);
    const original = seen.filter((id) => id.startsWith('r-'));
    expect(new Set(seen).size).toBe(seen.length);
    expect(original).toHaveLength(1_000);
    // Newest first; ties on created_at broken by run id, descending.
    expect(original).toEqual([...original].sort((a, b) => (Number(a.slice(2)) - Number(b.slice(2)) === 0 ? 0 : Math.floor(Number(b.slice(2)) / 3) - Math.floor(Number(a.slice(2)) / 3) || b.localeCompare(a))));
  });
});

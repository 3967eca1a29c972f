/**
 * The console's read side under load: `GET /runs` pages over 100,000 runs in 10 orgs, and the delay
 * from the projector's commit to the SSE frame with 100 streams open. Baselines in the same run: the
 * same page query made directly against Postgres, and a bare LISTEN client's NOTIFY delay.
 *
 *   npm run bench:console
 */
import { performance } from 'node:perf_hooks';
import { Client as PgClient } from 'pg';
import type { RunEventEnvelope } from '@agentrun/contracts';
import { applyRunEvents, createDataSource, CursorCodec, ReadModel, RUN_EVENTS_CHANNEL } from '@agentrun/persistence';
import { Platform } from '../support/platform';
import { SseClient } from '../support/sse';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

const pct = (v: number[], p: number) => [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.ceil((p / 100) * v.length) - 1)];
const row = (name: string, v: number[], ps = [50, 95]) => `${name.padEnd(46)} ${ps.map((p) => `p${p} ${pct(v, p).toFixed(2).padStart(8)} ms`).join('   ')}   (n=${v.length})`;

async function main(): Promise<void> {
  const platform = new Platform();
  await platform.start();
  const db = createDataSource({ url: stackUrls().databaseUrl(platform.database), poolSize: 4, applicationName: 'bench-console' });
  await db.initialize();
  try {
    const t0 = performance.now();
    await db.query(`
      INSERT INTO runs (org, run_id, kind, status, state, state_seq, last_seq, first_seq, model, created_at, updated_at)
      SELECT 'org-' || (g % 10), 'run-' || g, CASE WHEN g % 2 = 0 THEN 'agent' ELSE 'eval' END,
             (ARRAY['running','done','failed','published'])[1 + g % 4],
             jsonb_build_object('status', (ARRAY['running','done','failed','published'])[1 + g % 4]),
             1, 1, 1, 'model-' || (g % 5), timestamptz '2026-01-01' + g * interval '1 second', now()
      FROM generate_series(1, 100000) g`);
    await db.query('ANALYZE runs');
    console.log(`filled 100,000 runs in 10 orgs in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    const readModel = new ReadModel(db);
    const codec = new CursorCodec('local-development-cursor-secret');
    const http: number[] = [];
    const direct: number[] = [];
    const deepHttp: number[] = [];
    const filtered: number[] = [];
    for (let i = 0; i < 200; i++) {
      const org = `org-${i % 10}`;
      let t = performance.now();
      const first = await platform.http('GET', '/runs?limit=20', { org });
      http.push(performance.now() - t);
      t = performance.now();
      await readModel.listRuns(org, {}, undefined, 20);
      direct.push(performance.now() - t);
      // Ten pages deep, following the cursor.
      let cursor: string = first.body.next_cursor;
      for (let page = 0; page < 9; page++) cursor = (await platform.http('GET', `/runs?limit=20&cursor=${encodeURIComponent(cursor)}`, { org })).body.next_cursor;
      t = performance.now();
      await platform.http('GET', `/runs?limit=20&cursor=${encodeURIComponent(cursor)}`, { org });
      deepHttp.push(performance.now() - t);
      t = performance.now();
      await platform.http('GET', '/runs?limit=20&status=done&kind=agent&model=model-2', { org });
      filtered.push(performance.now() - t);
      codec.decode(cursor);
    }
    console.log('\nGET /runs over 100,000 runs (10 orgs), 200 requests each, one at a time');
    console.log(row('first page, HTTP', http));
    console.log(row('eleventh page (cursor), HTTP', deepHttp));
    console.log(row('first page, status+kind+model filters, HTTP', filtered));
    console.log(row('baseline: the same first-page query, direct SQL', direct));
    console.log(`ratio p50 HTTP first page / direct query: ${(pct(http, 50) / pct(direct, 50)).toFixed(1)}x`);

    // 100 open streams; each round commits one event for every run in one transaction (one NOTIFY).
    const runs = Array.from({ length: 100 }, (_, i) => `live-${i}`);
    const event = (runId: string, seq: number): RunEventEnvelope => ({
      run_id: runId, org: 'org-live', kind: 'agent', seq, type: seq === 1 ? 'run_started' : 'step_completed', ts: new Date().toISOString(),
      payload: { state: { status: 'running', goal: 'g', step: seq, max_steps: 1000, policy: 'scripted', tier: 'batch' } },
    });
    await applyRunEvents(db, runs.map((r) => event(r, 1)));
    const streams = runs.map((r) => new SseClient(`${platform.gatewayUrl}/runs/${r}/events?after=1`, { 'X-Org': 'org-live' }));
    await waitFor('100 streams open', () => streams.every((s) => s.status === 200), 30_000, 10);
    const listener = new PgClient({ connectionString: stackUrls().databaseUrl(platform.database) });
    await listener.connect();
    let notified = 0;
    listener.on('notification', () => void (notified = performance.now()));
    await listener.query(`LISTEN ${RUN_EVENTS_CHANNEL}`);
    const toFrame: number[] = [];
    const toNotify: number[] = [];
    const arrival = new Map<SseClient, number>();
    for (const s of streams) {
      const push = s.frames.push.bind(s.frames);
      s.frames.push = (...items) => {
        arrival.set(s, performance.now());
        return push(...items);
      };
    }
    for (let round = 2; round <= 21; round++) {
      arrival.clear();
      notified = 0;
      await applyRunEvents(db, runs.map((r) => event(r, round)));
      const committed = performance.now();
      await waitFor('every frame', () => streams.every((s) => s.events().some((e) => e.seq === round)), 30_000, 1);
      await waitFor('the notice', () => notified > 0, 5_000, 1);
      for (const s of streams) toFrame.push(arrival.get(s)! - committed);
      toNotify.push(notified - committed);
    }
    console.log('\n100 open SSE streams, 20 commits of one event per stream (2,000 frames)');
    console.log(row('commit -> SSE frame', toFrame, [50, 99]));
    console.log(row('baseline: commit -> NOTIFY at a bare LISTEN client', toNotify, [50, 99]));
    console.log('the Python prototype polled SQLite every 0.5 s: 250 ms mean, 500 ms worst, before any work');
    for (const s of streams) s.close();
    await listener.end();
  } finally {
    await db.destroy();
    await platform.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

/**
 * The console's read side under load: `GET /runs` pages over 100,000 runs in 10 orgs, and the delay
 * from the projector's commit to the SSE frame with N streams open (by default 100 and 1,000, side by
 * side). Baselines in the same run: the same page query made directly against Postgres, and a bare
 * LISTEN client's NOTIFY delay.
 *
 *   npm run bench:console                              # 100 and 1,000 streams
 *   node dist/tests/bench/console.bench.js 1000        # after a build: the stream counts given
 */
import { performance } from 'node:perf_hooks';
import { Client as PgClient } from 'pg';
import type { DataSource } from 'typeorm';
import type { RunEventEnvelope } from '@agentrun/contracts';
import { applyRunEvents, createDataSource, CursorCodec, ReadModel, RUN_EVENTS_CHANNEL } from '@agentrun/persistence';
import { Platform } from '../support/platform';
import { SseClient } from '../support/sse';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

const pct = (v: number[], p: number) => [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.ceil((p / 100) * v.length) - 1)];
const row = (name: string, v: number[], ps = [50, 95]) => `${name.padEnd(46)} ${ps.map((p) => `p${p} ${pct(v, p).toFixed(2).padStart(8)} ms`).join('   ')}   (n=${v.length})`;

/** Commits measured per stream count, after one unmeasured warm-up commit. */
const ROUNDS = 20;

interface LiveFigures {
  count: number;
  toFrame: number[];
  toNotify: number[];
}

/**
 * `count` open streams, one per run of their own org; each round commits one event for every run in
 * one transaction (one NOTIFY; past 7,000 bytes of payload the notice is `*`). Arrival is taken where
 * the client parses the frame, so waiting costs nothing per frame.
 */
async function liveStreams(platform: Platform, db: DataSource, listener: PgClient, count: number): Promise<LiveFigures> {
  const org = `org-live-${count}`;
  const runs = Array.from({ length: count }, (_, i) => `live-${i}`);
  const event = (runId: string, seq: number): RunEventEnvelope => ({
    run_id: runId, org, kind: 'agent', seq, type: seq === 1 ? 'run_started' : 'step_completed', ts: new Date().toISOString(),
    payload: { state: { status: 'running', goal: 'g', step: seq, max_steps: 1000, policy: 'scripted', tier: 'batch' } },
  });
  await applyRunEvents(db, runs.map((r) => event(r, 1)));
  const streams = runs.map((r) => new SseClient(`${platform.gatewayUrl}/runs/${r}/events?after=1`, { 'X-Org': org }));
  await waitFor(`${count} streams open`, () => streams.every((s) => s.status === 200), 60_000, 10);
  // Arrival of each seq, per stream; counted as frames come in.
  const arrival = streams.map(() => new Map<number, number>());
  const seen = new Map<number, number>();
  streams.forEach((s, i) => {
    const push = s.frames.push.bind(s.frames);
    s.frames.push = (...items) => {
      const at = performance.now();
      for (const f of items) {
        if (f.id === undefined) continue;
        const seq = Number(f.id);
        // A repeat is counted, not timed (and fails the check after the rounds).
        if (arrival[i].has(seq)) continue;
        arrival[i].set(seq, at);
        seen.set(seq, (seen.get(seq) ?? 0) + 1);
      }
      return push(...items);
    };
  });
  let notified = 0;
  const onNotice = () => void (notified = performance.now());
  listener.on('notification', onNotice);
  await listener.query(`LISTEN ${RUN_EVENTS_CHANNEL}`);
  const toFrame: number[] = [];
  const toNotify: number[] = [];
  try {
    for (let seq = 2; seq <= ROUNDS + 2; seq++) {
      notified = 0;
      await applyRunEvents(db, runs.map((r) => event(r, seq)));
      const committed = performance.now();
      await waitFor(`seq ${seq} on every stream`, () => seen.get(seq) === count, 30_000, 1);
      await waitFor('the notice', () => notified > 0, 5_000, 1);
      if (seq === 2) continue; // warm-up: streams may still be reading their own backlog
      for (const a of arrival) toFrame.push(a.get(seq)! - committed);
      toNotify.push(notified - committed);
    }
    // Exactly the contiguous prefix, once each, on every stream.
    streams.forEach((s, i) => {
      const seqs = s.events().map((e) => e.seq);
      if (seqs.join() !== Array.from({ length: ROUNDS + 1 }, (_, k) => k + 2).join()) throw new Error(`stream ${i} got seqs ${seqs.join(',')}`);
    });
  } finally {
    listener.off('notification', onNotice);
    await listener.query(`UNLISTEN ${RUN_EVENTS_CHANNEL}`);
    for (const s of streams) s.close();
  }
  return { count, toFrame, toNotify };
}

async function main(): Promise<void> {
  const counts = process.argv.slice(2).map(Number);
  if (counts.some((n) => !Number.isInteger(n) || n < 1 || n > 10_000)) throw new Error(`stream counts are whole numbers 1..10000, got ${process.argv.slice(2).join(' ')}`);
  if (counts.length === 0) counts.push(100, 1_000);
  // Every org of the bench may hold all its streams; the gateway's pool is the default's size (10).
  const platform = new Platform({ AGENTRUN_QUOTAS: JSON.stringify({ default: { sse_streams: 10_000 } }), GATEWAY_SSE_MAX_STREAMS: '20000', DATABASE_POOL_SIZE: '10' });
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

    const listener = new PgClient({ connectionString: stackUrls().databaseUrl(platform.database) });
    await listener.connect();
    const live: LiveFigures[] = [];
    try {
      for (const count of counts) live.push(await liveStreams(platform, db, listener, count));
    } finally {
      await listener.end();
    }
    const head = live.map((f) => `${f.count.toLocaleString('en-US')} streams`.padStart(26)).join('');
    console.log(`\nopen SSE streams (one run each), ${ROUNDS} commits of one event per stream's run, each commit one transaction`);
    console.log(`${''.padEnd(50)}${head}`);
    const cell = (v: number[]) => `p50 ${pct(v, 50).toFixed(2).padStart(7)}  p99 ${pct(v, 99).toFixed(2).padStart(7)}`.padStart(26);
    console.log(`${'commit -> SSE frame (ms)'.padEnd(50)}${live.map((f) => cell(f.toFrame)).join('')}`);
    console.log(`${'baseline: commit -> NOTIFY at a bare LISTEN (ms)'.padEnd(50)}${live.map((f) => cell(f.toNotify)).join('')}`);
    console.log(`${'frames'.padEnd(50)}${live.map((f) => String(f.toFrame.length).padStart(26)).join('')}`);
    for (const f of live) console.log(row(`${f.count} streams: commit -> SSE frame`, f.toFrame, [50, 95, 99]));
    console.log('the Python prototype polled SQLite every 0.5 s: 250 ms mean, 500 ms worst, before any work');
  } finally {
    await db.destroy();
    await platform.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

import { readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { snapshotObjectKeys, trajectorySegmentKey, type RunEventEnvelope, type SnapshotRow } from '@agentrun/contracts';
import { CaptureSources } from '@agentrun/persistence';
import type { DataSource } from 'typeorm';
import { oneToN } from '../support/invariants';
import { Platform, uniqueId } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

/**
 * Issue 16, finding 7 (its last part): every capture used to re-read and re-upload the whole
 * trajectory, so a per-turn series stored bytes quadratic in the run's length. Captures now append
 * segments; these tests measure what a long per-turn series stores, read every capture's trajectory
 * back, fork from the middle of the series, and read a snapshot taken before segments.
 */
describe('captures append trajectory segments', () => {
  // 500 steps per execution by default: one workflow history holds every capture's timing.
  const platform = new Platform();
  const org = 'acme';
  const turns = 50;
  let connection: Connection;
  let client: Client;
  let runId: string;
  let rows: SnapshotRow[];

  const runEvents = async (id: string): Promise<RunEventEnvelope[]> =>
    (await platform.query<{ event: RunEventEnvelope }>('SELECT event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [org, id])).map((r) => r.event);
  const rowsOf = async (id: string): Promise<SnapshotRow[]> =>
    (await runEvents(id)).filter((e) => e.type === 'snapshot_captured').map((e) => e.payload.snapshot as SnapshotRow);
  const waitFinished = (id: string) =>
    waitFor(`run ${id} to finish`, async () => (await runEvents(id)).find((e) => e.type === 'run_finished'), 300_000, 200);
  /** The events 1..lastSeq as a capture writes them: one JSON per line. */
  const jsonl = (events: RunEventEnvelope[], lastSeq: number): string =>
    events
      .filter((e) => e.seq <= lastSeq)
      .map((e) => JSON.stringify(e) + '\n')
      .join('');
  const trajectory = (id: string, snapshotId: string) => platform.http('GET', `/runs/${id}/snapshots/${snapshotId}/trajectory`, { org });
  /** A trajectory's text as it came (the helper parses a one-line body as JSON). */
  const text = (res: { body: unknown }): string => (typeof res.body === 'string' ? res.body : JSON.stringify(res.body) + '\n');
  const download = async (id: string, snapshotId: string): Promise<string> => {
    const res = await trajectory(id, snapshotId);
    expect(res.status).toBe(200);
    return text(res);
  };
  /** Every trajectory object stored for a run, whatever its layout: the bytes its series cost. */
  const storedTrajectoryBytes = (id: string): number => {
    let total = 0;
    const walk = (dir: string): void => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) walk(path);
        else if (entry.name.endsWith('.jsonl')) total += statSync(path).size;
      }
    };
    walk(join(platform.dataDir, 'objects', org, id));
    return total;
  };

  beforeAll(async () => {
    await platform.start();
    connection = await Connection.connect({ address: stackUrls().temporalAddress });
    client = new Client({ connection, namespace: stackUrls().namespace });
    runId = uniqueId('series');
    const started = await platform.http('POST', '/agents', { org, body: { run_id: runId, goal: 'a long per-turn series', max_steps: turns, snapshots: { per_turn: true, max_snapshots: turns + 10 } } });
    expect(started.status).toBe(202);
    expect((await waitFinished(runId)).payload.state).toMatchObject({ status: 'done', step: turns });
    rows = await rowsOf(runId);
  });
  afterAll(async () => {
    await connection?.close();
    await platform.stop();
  });

  it(`a ${turns}-turn series stores about the final trajectory once, not once per capture`, async () => {
    expect(rows.map((r) => r.turn).filter((t) => t !== undefined)).toEqual(oneToN(turns));
    expect(rows[rows.length - 1]).toMatchObject({ is_final: true, capture_status: 'ok' });
    const events = await runEvents(runId);
    const whole = Buffer.byteLength(jsonl(events, Number.MAX_SAFE_INTEGER));
    const stored = storedTrajectoryBytes(runId);
    // What whole-trajectory captures write: at each capture, every event so far.
    const cumulative = rows.reduce((sum, row) => sum + Buffer.byteLength(jsonl(events, row.trajectory_last_seq ?? 0)), 0);
    const history = await client.workflow.getHandle(`${org}/${runId}`).fetchHistory();
    const scheduled = new Map<string, number>();
    const captureMs: number[] = [];
    const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined): number => Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;
    for (const e of history.events ?? []) {
      if (e.activityTaskScheduledEventAttributes?.activityType?.name === 'captureSnapshot') scheduled.set(String(e.eventId), ms(e.eventTime));
      const done = e.activityTaskCompletedEventAttributes;
      if (done && scheduled.has(String(done.scheduledEventId))) captureMs.push(ms(e.eventTime) - scheduled.get(String(done.scheduledEventId))!);
    }
    captureMs.sort((a, b) => a - b);
    console.log(
      `${turns}-turn series: ${rows.length} captures, ${events.length} events, final trajectory ${whole} B; ` +
        `trajectory bytes stored ${stored} B (whole-trajectory captures: ${cumulative} B); ` +
        `capture time median ${captureMs[captureMs.length >> 1]?.toFixed(0)} ms, p90 ${captureMs[Math.floor(captureMs.length * 0.9)]?.toFixed(0)} ms, ` +
        `total ${captureMs.reduce((a, b) => a + b, 0).toFixed(0)} ms over ${captureMs.length}`,
    );
    // Linear: each event is stored once. Whole-trajectory captures store about turns/2 times this.
    expect(stored).toBeLessThan(2 * whole);
    expect(stored).toBeGreaterThan(0);
  });

  it("every capture's trajectory reads back as exactly the run's events up to it, its segment holding only the new ones", async () => {
    const events = await runEvents(runId);
    let previous = 0;
    for (const row of rows) {
      expect({ snapshot: row.snapshot_id, last: row.trajectory_last_seq }).toEqual({ snapshot: row.snapshot_id, last: expect.any(Number) });
      const last = row.trajectory_last_seq!;
      // Segments follow one another: each starts right after the last one written, or is that one again.
      expect({ first: row.trajectory_first_seq, last }).toEqual(last > previous ? { first: previous + 1, last } : { first: row.trajectory_first_seq, last: previous });
      previous = last;
      // Its own segment in the platform's object store (a folder: a file URL).
      expect(row.trajectory_s3_uri).toBe(pathToFileURL(join(platform.dataDir, 'objects', trajectorySegmentKey(org, runId, last))).href);
      const res = await trajectory(runId, row.snapshot_id);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/application\/x-ndjson/);
      expect(text(res)).toBe(jsonl(events, last));
    }
    // The final capture saw every event before it: the run's last events are its final row and run_finished.
    const final = rows[rows.length - 1];
    expect(final.trajectory_last_seq).toBeGreaterThan(turns);
  });

  it('a fork from the middle of the series restores it, its trajectory still reads back, and the fork keeps a series of its own', async () => {
    const middle = rows.find((r) => r.turn === turns / 2)!;
    const child = uniqueId('fork');
    const res = await platform.http('POST', `/runs/${runId}/fork`, { org, body: { run_id: child, snapshot_id: middle.snapshot_id, snapshots: { per_turn: true } } });
    expect(res.status).toBe(202);
    const end = await waitFinished(child);
    expect(end.payload.state).toMatchObject({ status: 'done', step: turns, parent_run_id: runId, forked_from_snapshot: middle.snapshot_id });
    const childEvents = await runEvents(child);
    expect(childEvents[0]).toMatchObject({ type: 'run_started', payload: { forked_from: { run_id: runId, snapshot_id: middle.snapshot_id, step: middle.step } } });
    expect(childEvents.filter((e) => e.type === 'step_completed').map((e) => e.payload.step)).toEqual(oneToN(turns - middle.step).map((n) => middle.step + n - 1));
    // The parent's middle trajectory is the parent's events up to it, after the fork as before.
    expect(await download(runId, middle.snapshot_id)).toBe(jsonl(await runEvents(runId), middle.trajectory_last_seq!));
    // The fork's own captures are segments of its own events, from its seq 1.
    const childRows = await rowsOf(child);
    const childFinal = childRows[childRows.length - 1];
    expect(childFinal).toMatchObject({ is_final: true, capture_status: 'ok' });
    expect(await download(child, childFinal.snapshot_id)).toBe(jsonl(childEvents, childFinal.trajectory_last_seq!));
    expect(storedTrajectoryBytes(child)).toBeLessThan(2 * Buffer.byteLength(jsonl(childEvents, Number.MAX_SAFE_INTEGER)));
  });

  it("deleting an older snapshot's objects leaves a later one's trajectory whole; a lost segment is a 410 for the snapshots that need it only", async () => {
    const events = await runEvents(runId);
    const [first, second] = rows;
    rmSync(join(platform.dataDir, 'objects', org, runId, 'snapshots', first.snapshot_id), { recursive: true });
    const later = rows[5];
    expect(await download(runId, later.snapshot_id)).toBe(jsonl(events, later.trajectory_last_seq!));

    const lost = rows.find((r) => r.turn === 10)!;
    expect(lost.trajectory_first_seq).toBeGreaterThan(1);
    rmSync(join(platform.dataDir, 'objects', trajectorySegmentKey(org, runId, lost.trajectory_last_seq!)));
    const gone = await trajectory(runId, rows[rows.length - 1].snapshot_id);
    expect(gone.status).toBe(410);
    expect(gone.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(gone.body).toMatchObject({ status: 410, title: 'trajectory gone' });
    expect(JSON.stringify(gone.body)).not.toMatch(/file:|objects\//);
    // Captures before the lost segment never needed it.
    const before = rows.filter((r) => r.trajectory_last_seq! < lost.trajectory_first_seq!).pop()!;
    expect(before.turn).toBeGreaterThanOrEqual(8);
    expect(await download(runId, before.snapshot_id)).toBe(jsonl(events, before.trajectory_last_seq!));
    expect((await trajectory(runId, second.snapshot_id)).status).toBe(200);
    expect((await trajectory(runId, 'snap-0999')).status).toBe(404);
    expect((await platform.http('GET', `/runs/${runId}/snapshots/${second.snapshot_id}/trajectory`, { org: 'globex' })).status).toBe(404);
  });

  it('a segment ends before the first gap in the projected events, so an event projected late into the gap is in the next one', async () => {
    // CaptureSources only issues queries: the test's own connection to the platform's database stands in for TypeORM's.
    const sources = new CaptureSources({ query: (sql: string, params: unknown[]) => platform.query(sql, params) } as unknown as DataSource);
    const gappy = uniqueId('gappy');
    const insert = async (seqs: number[]) => {
      for (const seq of seqs) {
        await platform.query("INSERT INTO run_events (org, run_id, seq, type, ts, event) VALUES ($1, $2, $3, 'step_completed', now(), $4)", [
          org,
          gappy,
          seq,
          JSON.stringify({ org, run_id: gappy, seq, type: 'step_completed', payload: { step: seq } }),
        ]);
      }
    };
    expect(await sources.contiguousEnd(org, gappy, 0)).toBe(0);
    await insert([2, 3]);
    expect(await sources.contiguousEnd(org, gappy, 0)).toBe(0);
    await insert([1, 4, 6, 7, 9]);
    expect(await sources.contiguousEnd(org, gappy, 0)).toBe(4);
    expect(await sources.contiguousEnd(org, gappy, 4)).toBe(4);
    await insert([5]);
    expect(await sources.contiguousEnd(org, gappy, 4)).toBe(7);
    expect(await sources.contiguousEnd(org, gappy, 7)).toBe(7);
    const pages: number[][] = [];
    for await (const page of sources.trajectoryPages(org, gappy, 2, 7, 2)) pages.push(page.map((row) => row.seq));
    expect(pages).toEqual([[3, 4], [5, 6], [7]]);
  });

  it('a snapshot taken before segments (one whole-trajectory object, no seqs in its row) still downloads whole and still forks', async () => {
    const parent = uniqueId('old');
    expect((await platform.http('POST', '/agents', { org, body: { run_id: parent, goal: 'an old-style capture', max_steps: 4, snapshots: { per_turn: true } } })).status).toBe(202);
    await waitFinished(parent);
    const at2 = (await rowsOf(parent)).find((r) => r.turn === 2)!;
    const events = await runEvents(parent);
    // What the capture wrote before segments: the whole trajectory under the snapshot's own prefix,
    // and a manifest row naming it without seqs.
    const wholeKey = snapshotObjectKeys(org, parent, at2.snapshot_id).trajectory;
    writeFileSync(join(platform.dataDir, 'objects', wholeKey), jsonl(events, at2.trajectory_last_seq!));
    await platform.query(
      `UPDATE snapshots SET row = (row - 'trajectory_first_seq' - 'trajectory_last_seq') || jsonb_build_object('trajectory_s3_uri', $4::text)
       WHERE org = $1 AND run_id = $2 AND snapshot_id = $3`,
      [org, parent, at2.snapshot_id, `file://${join(platform.dataDir, 'objects', wholeKey)}`],
    );
    for (const segment of readdirSync(join(platform.dataDir, 'objects', org, parent, 'trajectory'))) rmSync(join(platform.dataDir, 'objects', org, parent, 'trajectory', segment));
    expect(await download(parent, at2.snapshot_id)).toBe(jsonl(events, at2.trajectory_last_seq!));
    const child = uniqueId('fork-old');
    expect((await platform.http('POST', `/runs/${parent}/fork`, { org, body: { run_id: child, snapshot_id: at2.snapshot_id } })).status).toBe(202);
    expect((await waitFinished(child)).payload.state).toMatchObject({ status: 'done', step: 4, forked_from_snapshot: at2.snapshot_id });
  });
});

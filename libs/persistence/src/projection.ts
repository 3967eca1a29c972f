import { CAPTURE_STATUSES, type RunEventEnvelope, type SnapshotRow } from '@agentrun/contracts';
import type { DataSource, EntityManager } from 'typeorm';

/** The channel the projector NOTIFYs once per committed batch; the gateway LISTENs on it. */
export const RUN_EVENTS_CHANNEL = 'agentrun_run_events';

/** A NOTIFY payload must stay under 8000 bytes; past this the notice says "look at everything". */
const MAX_NOTIFY_BYTES = 7_000;

export interface RunTouch {
  org: string;
  run_id: string;
  seq: number;
}

export interface ApplyResult {
  /** Events that were new to the read model (replays are not counted). */
  inserted: number;
  /** The newest seq now stored per run that this batch added to. */
  touched: RunTouch[];
}

/**
 * Applies a batch of run events in one transaction. Idempotent by `(org, run_id, seq)`: an event
 * already stored inserts nothing, and a run's row changes only when a newer seq with a state arrives,
 * so replays and out-of-order duplicates change nothing.
 */
export async function applyRunEvents(dataSource: DataSource, events: RunEventEnvelope[]): Promise<ApplyResult> {
  if (events.length === 0) return { inserted: 0, touched: [] };
  return dataSource.transaction(async (tx) => {
    const inserted = await insertEvents(tx, events);
    if (inserted.length === 0) return { inserted: 0, touched: [] };
    await upsertRuns(tx, events);
    await insertSnapshots(tx, events);
    await upsertCaseResults(tx, events);
    const touched = newestPerRun(inserted);
    await notify(tx, touched);
    return { inserted: inserted.length, touched };
  });
}

async function insertEvents(tx: EntityManager, events: RunEventEnvelope[]): Promise<RunTouch[]> {
  const rows: RunTouch[] = await tx.query(
    `INSERT INTO run_events (org, run_id, seq, type, ts, event)
     SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::timestamptz[], $6::jsonb[])
     ON CONFLICT (org, run_id, seq) DO NOTHING
     RETURNING org, run_id, seq`,
    [
      events.map((e) => e.org),
      events.map((e) => e.run_id),
      events.map((e) => e.seq),
      events.map((e) => e.type),
      events.map((e) => e.ts),
      events.map((e) => JSON.stringify(e)),
    ],
  );
  return rows;
}

/** One upsert per run, from the newest event in the batch that carries a state. */
async function upsertRuns(tx: EntityManager, events: RunEventEnvelope[]): Promise<void> {
  const newest = new Map<string, { withState?: RunEventEnvelope; lastSeq: number; firstSeq: number; first: RunEventEnvelope }>();
  for (const event of events) {
    const key = `${event.org}\u0000${event.run_id}`;
    const entry = newest.get(key) ?? { lastSeq: 0, firstSeq: Number.MAX_SAFE_INTEGER, first: event };
    entry.lastSeq = Math.max(entry.lastSeq, event.seq);
    if (event.seq < entry.firstSeq) {
      entry.firstSeq = event.seq;
      entry.first = event;
    }
    if (event.payload?.state && (!entry.withState || event.seq > entry.withState.seq)) entry.withState = event;
    newest.set(key, entry);
  }
  for (const { withState, lastSeq, firstSeq, first } of newest.values()) {
    const shown = withState ?? first;
    const state = withState?.payload.state ?? null;
    const model = typeof state?.model === 'string' ? state.model : null;
    const parent = typeof state?.parent_run_id === 'string' ? state.parent_run_id : null;
    // A row is created by whichever event arrives first; state moves only forward in seq, and
    // created_at follows the lowest seq seen, so it is the first event's time once seq 1 is in.
    await tx.query(
      `INSERT INTO runs AS r (org, run_id, kind, status, state, state_seq, last_seq, first_seq, model, parent_run_id, created_at, updated_at)
       VALUES ($1, $2, $3, COALESCE($4, 'queued'), COALESCE($5::jsonb, '{"status":"queued"}'::jsonb), $6, $7, $8, $9, $10, $11, $12)
       ON CONFLICT (org, run_id) DO UPDATE SET
         status = CASE WHEN excluded.state_seq > r.state_seq THEN excluded.status ELSE r.status END,
         state = CASE WHEN excluded.state_seq > r.state_seq THEN excluded.state ELSE r.state END,
         model = CASE WHEN excluded.state_seq > r.state_seq THEN COALESCE(excluded.model, r.model) ELSE r.model END,
         parent_run_id = COALESCE(r.parent_run_id, excluded.parent_run_id),
         state_seq = GREATEST(r.state_seq, excluded.state_seq),
         updated_at = CASE WHEN excluded.last_seq > r.last_seq THEN excluded.updated_at ELSE r.updated_at END,
         last_seq = GREATEST(r.last_seq, excluded.last_seq),
         created_at = CASE WHEN excluded.first_seq < r.first_seq THEN excluded.created_at ELSE r.created_at END,
         first_seq = LEAST(r.first_seq, excluded.first_seq)`,
      [
        shown.org,
        shown.run_id,
        shown.kind,
        state?.status ?? null,
        state ? JSON.stringify(state) : null,
        withState?.seq ?? 0,
        lastSeq,
        firstSeq,
        model,
        parent,
        first.ts,
        shown.ts,
      ],
    );
  }
}

/** Manifest rows from `snapshot_captured` events; a replay inserts nothing. */
async function insertSnapshots(tx: EntityManager, events: RunEventEnvelope[]): Promise<void> {
  const rows = events.flatMap((e) => {
    const row = e.type === 'snapshot_captured' ? (e.payload.snapshot as Partial<SnapshotRow> | undefined) : undefined;
    // A row the manifest cannot hold is left out of it; its event is still stored, never dead-lettered for it.
    const usable = row && typeof row.snapshot_id === 'string' && typeof row.is_final === 'boolean' && (CAPTURE_STATUSES as readonly string[]).includes(row.capture_status as string);
    return usable ? [{ event: e, row: row as SnapshotRow }] : [];
  });
  if (rows.length === 0) return;
  const num = (v: unknown): number | null => (typeof v === 'number' && Number.isSafeInteger(v) && Math.abs(v) < 2 ** 31 ? v : null);
  const big = (v: unknown): number | null => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : null);
  const time = (v: unknown, fallback: string): string => {
    const ms = typeof v === 'string' ? Date.parse(v) : NaN;
    return Number.isNaN(ms) || ms < 0 || ms > 253402300799999 ? fallback : new Date(ms).toISOString();
  };
  await tx.query(
    `INSERT INTO snapshots (org, run_id, snapshot_id, seq, step, version, turn, is_final, capture_status, capture_reason, bundle_object_url, bytes, captured_at, row)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::int[], $7::int[], $8::bool[], $9::text[], $10::text[], $11::text[], $12::bigint[], $13::timestamptz[], $14::jsonb[])
     ON CONFLICT (org, run_id, snapshot_id) DO NOTHING`,
    [
      rows.map((r) => r.event.org),
      rows.map((r) => r.event.run_id),
      rows.map((r) => r.row.snapshot_id),
      rows.map((r) => r.event.seq),
      rows.map((r) => num(r.row.step) ?? 0),
      rows.map((r) => num(r.row.version)),
      rows.map((r) => num(r.row.turn)),
      rows.map((r) => r.row.is_final),
      rows.map((r) => r.row.capture_status),
      rows.map((r) => (typeof r.row.capture_reason === 'string' ? r.row.capture_reason : null)),
      rows.map((r) => (typeof r.row.bundle_object_url === 'string' ? r.row.bundle_object_url : null)),
      rows.map((r) => big(r.row.bytes)),
      rows.map((r) => time(r.row.captured_at_utc, r.event.ts)),
      rows.map((r) => JSON.stringify(r.row)),
    ],
  );
}

/**
 * One row per case from `case_finished`. A case can finish more than once in a run's history only by a
 * replayed event, so the newest seq wins and a replay changes nothing.
 */
async function upsertCaseResults(tx: EntityManager, events: RunEventEnvelope[]): Promise<void> {
  // One row per case per statement (a batch may hold a duplicate delivery): the newest seq.
  const newest = new Map<string, RunEventEnvelope>();
  for (const e of events) {
    if (e.type !== 'case_finished' || typeof e.payload.case_id !== 'string' || typeof e.payload.status !== 'string') continue;
    const key = `${e.org}\u0000${e.run_id}\u0000${e.payload.case_id}`;
    const seen = newest.get(key);
    if (!seen || e.seq > seen.seq) newest.set(key, e);
  }
  const rows = [...newest.values()];
  if (rows.length === 0) return;
  const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  const int = (v: unknown): number | null => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v < 2 ** 31 ? v : null);
  const result = (e: RunEventEnvelope) => (typeof e.payload.result === 'object' && e.payload.result !== null ? (e.payload.result as Record<string, unknown>) : undefined);
  const usage = (e: RunEventEnvelope) => (result(e)?.usage ?? {}) as Record<string, unknown>;
  await tx.query(
    `INSERT INTO eval_case_results AS c (org, run_id, case_id, seq, status, score, error_type, attempts, prompt_tokens, completion_tokens, duration_ms, result, finished_at)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::float8[], $7::text[], $8::int[], $9::int[], $10::int[], $11::int[], $12::jsonb[], $13::timestamptz[])
     ON CONFLICT (org, run_id, case_id) DO UPDATE SET
       seq = excluded.seq, status = excluded.status, score = excluded.score, error_type = excluded.error_type, attempts = excluded.attempts,
       prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens, duration_ms = excluded.duration_ms,
       result = excluded.result, finished_at = excluded.finished_at
     WHERE excluded.seq > c.seq`,
    [
      rows.map((e) => e.org),
      rows.map((e) => e.run_id),
      rows.map((e) => e.payload.case_id as string),
      rows.map((e) => e.seq),
      rows.map((e) => e.payload.status as string),
      rows.map((e) => num(e.payload.score)),
      rows.map((e) => (typeof e.payload.error_type === 'string' ? e.payload.error_type : null)),
      rows.map((e) => int(e.payload.attempts)),
      rows.map((e) => int(usage(e).prompt_tokens)),
      rows.map((e) => int(usage(e).completion_tokens)),
      rows.map((e) => int(result(e)?.duration_ms)),
      rows.map((e) => (result(e) ? JSON.stringify(result(e)) : null)),
      rows.map((e) => e.ts),
    ],
  );
}

function newestPerRun(rows: RunTouch[]): RunTouch[] {
  const byRun = new Map<string, RunTouch>();
  for (const row of rows) {
    const key = `${row.org}\u0000${row.run_id}`;
    const seen = byRun.get(key);
    if (!seen || row.seq > seen.seq) byRun.set(key, { org: row.org, run_id: row.run_id, seq: Number(row.seq) });
  }
  return [...byRun.values()];
}

/** NOTIFY is delivered on commit, so listeners never see a batch before it is visible. */
async function notify(tx: EntityManager, touched: RunTouch[]): Promise<void> {
  let payload = JSON.stringify(touched.map((t) => [t.org, t.run_id, t.seq]));
  if (Buffer.byteLength(payload) > MAX_NOTIFY_BYTES) payload = '*';
  await tx.query('SELECT pg_notify($1, $2)', [RUN_EVENTS_CHANNEL, payload]);
}

/** Reads a NOTIFY payload back; `undefined` means "every run may have moved". */
export function parseRunTouches(payload: string | undefined): RunTouch[] | undefined {
  if (!payload || payload === '*') return undefined;
  try {
    const rows = JSON.parse(payload) as [string, string, number][];
    return rows.map(([org, run_id, seq]) => ({ org, run_id, seq }));
  } catch {
    return undefined;
  }
}

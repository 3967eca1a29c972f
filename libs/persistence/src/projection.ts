import { CAPTURE_STATUSES, type ModelCallUsage, type RunEventEnvelope, type SnapshotRow } from '@agentrun/contracts';
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
  /** Events that were new to the stored log (replays are not counted). */
  inserted: number;
  /** Events that joined their run's applied prefix in this batch (some may have been stored before). */
  applied: number;
  /** The newest applied seq per run that this batch moved. */
  touched: RunTouch[];
}

/** The class id of the per-run advisory locks (the other key is the run's hash): apart from the migration lock. */
const RUN_LOCK_CLASS = 0x52554e; // 'RUN'

/**
 * Applies a batch of run events in one transaction. Every event is stored (idempotent by
 * `(org, run_id, seq)`: an event already stored inserts nothing), but a run's read model (its row,
 * snapshot manifest, case results, the NOTIFY) moves only along its contiguous seq prefix from 1:
 * an event past a gap is kept and applied, with every stored event after it, when the gap fills.
 * A forged seq far ahead therefore changes nothing anyone reads, and replays change nothing at all.
 */
export async function applyRunEvents(dataSource: DataSource, events: RunEventEnvelope[], traceparents?: ReadonlyMap<RunEventEnvelope, string>): Promise<ApplyResult> {
  if (events.length === 0) return { inserted: 0, applied: 0, touched: [] };
  const unique = firstPerSeq(events);
  return dataSource.transaction(async (tx) => {
    await lockRuns(tx, unique);
    const inserted = await insertEvents(tx, unique, traceparents);
    if (inserted.length === 0) return { inserted: 0, applied: 0, touched: [] };
    const applied = await advancePrefixes(tx, unique, inserted);
    if (applied.length === 0) return { inserted: inserted.length, applied: 0, touched: [] };
    await upsertRuns(tx, applied);
    await insertSnapshots(tx, applied);
    await upsertCaseResults(tx, applied);
    await insertModelUsage(tx, applied);
    const touched = newestPerRun(applied);
    await notify(tx, touched);
    return { inserted: inserted.length, applied: applied.length, touched };
  });
}

const runKey = (e: { org: string; run_id: string }) => `${e.org}\u0000${e.run_id}`;
const eventKey = (e: { org: string; run_id: string; seq: number | string }) => `${e.org}\u0000${e.run_id}\u0000${Number(e.seq)}`;

/** One event per `(org, run_id, seq)`, the first given: so the event stored is the one applied. */
function firstPerSeq(events: RunEventEnvelope[]): RunEventEnvelope[] {
  const seen = new Set<string>();
  return events.filter((e) => {
    const key = eventKey(e);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * Serialises batches that touch the same run (two consumers during a rebalance): each must see the
 * other's stored events when it works out the prefix, or a gap filled by one while the other stored
 * the event after it would leave that event unapplied. Taken in hash order, so two batches cannot deadlock.
 */
async function lockRuns(tx: EntityManager, events: RunEventEnvelope[]): Promise<void> {
  const keys = [...new Set(events.map((e) => `${e.org}/${e.run_id}`))];
  await tx.query(
    `SELECT pg_advisory_xact_lock($2::int, h) FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest($1::text[]) AS k ORDER BY 1) AS locks`,
    [keys, RUN_LOCK_CLASS],
  );
}

/**
 * The events that join each run's applied prefix now, in seq order per run: from the run's applied
 * seq (its row's `last_seq`, 0 before seq 1), every stored seq that follows without a gap. Those this
 * batch inserted are taken from the batch; those stored earlier, past a gap this batch filled, are read back.
 */
async function advancePrefixes(tx: EntityManager, events: RunEventEnvelope[], inserted: RunTouch[]): Promise<RunEventEnvelope[]> {
  const runs = new Map<string, { org: string; run_id: string }>();
  for (const e of inserted) runs.set(runKey(e), { org: e.org, run_id: e.run_id });
  const rows: { org: string; run_id: string; applied: number | string; seq: number | string | null }[] = await tx.query(
    `SELECT k.org, k.run_id, COALESCE(r.last_seq, 0) AS applied, e.seq
     FROM unnest($1::text[], $2::text[]) AS k(org, run_id)
     LEFT JOIN runs r ON r.org = k.org AND r.run_id = k.run_id
     LEFT JOIN run_events e ON e.org = k.org AND e.run_id = k.run_id AND e.seq > COALESCE(r.last_seq, 0)
     ORDER BY k.org, k.run_id, e.seq`,
    [[...runs.values()].map((r) => r.org), [...runs.values()].map((r) => r.run_id)],
  );
  const ends = new Map<string, { org: string; run_id: string; from: number; to: number }>();
  for (const row of rows) {
    const key = runKey(row);
    const entry = ends.get(key) ?? { org: row.org, run_id: row.run_id, from: Number(row.applied), to: Number(row.applied) };
    if (row.seq !== null && Number(row.seq) === entry.to + 1) entry.to += 1;
    ends.set(key, entry);
  }
  const fresh = new Set(inserted.map(eventKey));
  const batch = new Map(events.map((e) => [eventKey(e), e]));
  const applied: RunEventEnvelope[] = [];
  const missing: { org: string; run_id: string; seq: number }[] = [];
  for (const { org, run_id, from, to } of ends.values()) {
    for (let seq = from + 1; seq <= to; seq++) {
      const key = eventKey({ org, run_id, seq });
      if (fresh.has(key)) applied.push(batch.get(key)!);
      else missing.push({ org, run_id, seq });
    }
  }
  if (missing.length > 0) {
    const stored: { event: RunEventEnvelope }[] = await tx.query(
      `SELECT e.event FROM unnest($1::text[], $2::text[], $3::int[]) AS k(org, run_id, seq)
       JOIN run_events e ON e.org = k.org AND e.run_id = k.run_id AND e.seq = k.seq`,
      [missing.map((m) => m.org), missing.map((m) => m.run_id), missing.map((m) => m.seq)],
    );
    applied.push(...stored.map((r) => r.event));
  }
  return applied.sort((a, b) => (a.org === b.org ? (a.run_id === b.run_id ? a.seq - b.seq : a.run_id < b.run_id ? -1 : 1) : a.org < b.org ? -1 : 1));
}

/** Stores the events (with the `traceparent` each was published with, when given), returning those new to the log. */
async function insertEvents(tx: EntityManager, events: RunEventEnvelope[], traceparents?: ReadonlyMap<RunEventEnvelope, string>): Promise<RunTouch[]> {
  const rows: RunTouch[] = await tx.query(
    `INSERT INTO run_events (org, run_id, seq, type, ts, event, traceparent)
     SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::timestamptz[], $6::jsonb[], $7::text[])
     ON CONFLICT (org, run_id, seq) DO NOTHING
     RETURNING org, run_id, seq`,
    [
      events.map((e) => e.org),
      events.map((e) => e.run_id),
      events.map((e) => e.seq),
      events.map((e) => e.type),
      events.map((e) => e.ts),
      events.map((e) => JSON.stringify(e)),
      events.map((e) => traceparents?.get(e) ?? null),
    ],
  );
  return rows;
}

/** One upsert per run, from the newest newly applied event that carries a state. */
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
    const state = outcomeOf(withState);
    const model = typeof state?.model === 'string' ? state.model : null;
    const parent = typeof state?.parent_run_id === 'string' ? state.parent_run_id : null;
    // Only applied events come here, so a row is created by seq 1 and moves along the prefix; the
    // monotonic updates keep a replayed or concurrent batch from moving it back.
    await tx.query(
      `INSERT INTO runs AS r (org, run_id, kind, status, state, state_seq, last_seq, first_seq, model, parent_run_id, created_at, updated_at)
       VALUES ($1, $2, $3, COALESCE($4, 'queued'), COALESCE($5::jsonb, '{"status":"queued"}'::jsonb), $6, $7, $8, $9, $10, $11, $12)
       ON CONFLICT (org, run_id) DO UPDATE SET
         status = CASE WHEN excluded.state_seq > r.state_seq THEN excluded.status ELSE r.status END,
         -- A run's answer, once its run_finished put it in the state, stays there through later events.
         state = CASE WHEN excluded.state_seq > r.state_seq
           THEN excluded.state || CASE WHEN r.state ? 'answer' AND NOT excluded.state ? 'answer' THEN jsonb_build_object('answer', r.state->'answer') ELSE '{}'::jsonb END
           ELSE r.state END,
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

/**
 * The state a run's row keeps from an event: the event's `state`, and from `run_finished` its outcome
 * too (an agent's `answer`), so `GET /runs/{id}` and the run-state topic have it after the run ends.
 */
export function outcomeOf(event: RunEventEnvelope | undefined): RunEventEnvelope['payload']['state'] | null {
  const state = event?.payload.state;
  if (!state) return null;
  const answer = event.type === 'run_finished' ? event.payload.answer : undefined;
  return typeof answer === 'string' ? { ...state, answer } : state;
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

/**
 * One row per model call from the `usage` of `step_completed` (applied events only, each once; the key
 * is the event's, so a replay inserts nothing). A usage that does not have the contract's shape is left
 * out: the event is still stored and applied, and `GET /usage` counts only what it can add up.
 */
async function insertModelUsage(tx: EntityManager, events: RunEventEnvelope[]): Promise<void> {
  const rows = events.flatMap((e) => {
    const usage = e.type === 'step_completed' ? modelCallUsage(e.payload.usage) : e.type === 'case_finished' ? caseUsage(e) : undefined;
    return usage ? [{ e, usage }] : [];
  });
  if (rows.length === 0) return;
  await tx.query(
    `INSERT INTO model_usage (org, run_id, seq, step, model, prompt_tokens, completion_tokens, cost_usd, priced, estimated, at)
     SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[], $6::bigint[], $7::bigint[], $8::numeric[], $9::bool[], $10::bool[], $11::timestamptz[])
     ON CONFLICT (org, run_id, seq) DO NOTHING`,
    [
      rows.map((r) => r.e.org),
      rows.map((r) => r.e.run_id),
      rows.map((r) => r.e.seq),
      rows.map((r) => (Number.isSafeInteger(r.e.payload.step) ? (r.e.payload.step as number) : 0)),
      rows.map((r) => r.usage.model),
      rows.map((r) => r.usage.prompt_tokens),
      rows.map((r) => r.usage.completion_tokens),
      rows.map((r) => r.usage.cost_usd.toFixed(8)),
      rows.map((r) => r.usage.priced),
      rows.map((r) => r.usage.estimated === true),
      rows.map((r) => r.e.ts),
    ],
  );
}

function modelCallUsage(v: unknown): ModelCallUsage | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const u = v as Record<string, unknown>;
  const count = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  if (typeof u.model !== 'string' || u.model.length === 0 || u.model.length > 200 || u.model.includes('\u0000')) return undefined;
  if (!count(u.prompt_tokens) || !count(u.completion_tokens)) return undefined;
  if (typeof u.cost_usd !== 'number' || !Number.isFinite(u.cost_usd) || u.cost_usd < 0 || u.cost_usd >= 1e12) return undefined;
  return { model: u.model, prompt_tokens: u.prompt_tokens as number, completion_tokens: u.completion_tokens as number, cost_usd: u.cost_usd, priced: u.priced === true, ...(u.estimated === true ? { estimated: true } : {}) };
}

/** An eval case's model calls (its solver's and its judge's) as one row, under the eval's model; priced when the worker had a price. */
function caseUsage(e: RunEventEnvelope): ModelCallUsage | undefined {
  const usage = (e.payload.result as { usage?: Record<string, unknown> } | undefined)?.usage;
  const model = (e.payload.state as { model?: unknown } | undefined)?.model;
  if (typeof usage !== 'object' || usage === null) return undefined;
  const cost = usage.cost_usd;
  return modelCallUsage({ model, prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens, cost_usd: typeof cost === 'number' ? cost : 0, priced: typeof cost === 'number' });
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

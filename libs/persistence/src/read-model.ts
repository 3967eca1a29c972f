import { RUN_STATUSES, TERMINAL_STATUSES, type ConversationMessage, type RunEventEnvelope, type RunKind, type RunStateView, type RunStatus, type RunSummary, type SnapshotRow, type UsageGroup, type UsageTotals } from '@agentrun/contracts';
import { AsyncResource } from 'node:async_hooks';
import { Query, type PoolClient } from 'pg';
import type { DataSource } from 'typeorm';
import type { RunCursor } from './cursor';

/** One run as the gateway lists it: the shape is the contracts' API shape. */
export type { RunSummary };

export interface RunFilters {
  kind?: string;
  status?: string;
  model?: string;
}

interface RunRecord {
  run_id: string;
  kind: RunKind;
  status: RunStatus;
  model: string | null;
  parent_run_id: string | null;
  created_at: Date;
  updated_at: Date;
  last_seq: number;
  state: RunStateView;
}

function toSummary(row: RunRecord): RunSummary {
  return {
    run_id: row.run_id,
    kind: row.kind,
    status: row.status,
    model: row.model,
    parent_run_id: row.parent_run_id,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    last_seq: Number(row.last_seq),
    state: row.state,
  };
}

const RUN_COLUMNS = 'run_id, kind, status, model, parent_run_id, created_at, updated_at, last_seq, state';

/** A stored run event as a live stream reads it: the event, and the trace context it was published in. */
export interface StoredRunEvent {
  seq: number;
  event: RunEventEnvelope;
  /** The W3C traceparent the event was published with, if it had one (the SSE frame's span is its child). */
  traceparent: string | null;
}

/** The columns of a `StoredRunEvent`, from `run_events` as `ev`. */
const STORED_EVENT_COLUMNS = 'ev.seq, ev.event, ev.traceparent';

/**
 * The batched read of `eachEventsAfter`. A run's last_seq is looked up inside the lateral (an index
 * probe per run: as a join, the planner hashes the whole runs table for it), and only for a read whose
 * `after` is not known to be applied: COALESCE evaluates its second argument only when the first is
 * null. Callers keep the contiguous prefix, which from an applied seq is exactly the applied events.
 * No ORDER BY on the whole: it would be a Sort over every row, so the first row would wait for the
 * last. A LATERAL subquery with a LIMIT on the outer row's columns can only be the inner side of a
 * nested loop over the unnest, which yields the reads in order, each read's rows in the subquery's seq
 * order; the row handler checks that order and fails the read if it ever breaks.
 */
const EVENTS_AFTER_MANY_SQL = `SELECT e.*, i::int AS i
  FROM unnest($1::text[], $2::text[], $3::int[], $4::int[]) WITH ORDINALITY AS v(org, run_id, after_seq, bound, i)
  CROSS JOIN LATERAL (
    SELECT ${STORED_EVENT_COLUMNS} FROM run_events ev
     WHERE ev.org = v.org AND ev.run_id = v.run_id AND ev.seq > v.after_seq
       AND ev.seq <= COALESCE(v.bound, (SELECT r.last_seq FROM runs r WHERE r.org = v.org AND r.run_id = v.run_id))
     ORDER BY ev.seq LIMIT $5) e`;

/** One run's part of a batched read: its events after `after`. */
export interface RunEventsRead {
  org: string;
  runId: string;
  after: number;
  /**
   * `after` is a seq the read model has already applied (0, or one a stream was sent). Every stored seq
   * that follows it without a gap is then applied too (a batch stores and applies in one transaction),
   * so the read need not look up the run's applied bound; a resume point a client merely claimed has to.
   */
  afterApplied?: boolean;
}

/** Queries the gateway serves. Every one is scoped to a single org: another org's run is no run. */
export class ReadModel {
  constructor(private readonly db: DataSource) {}

  /** Newest first, keyset on `(created_at, run_id)`: stable while new runs arrive. */
  async listRuns(org: string, filters: RunFilters, after: RunCursor | undefined, limit: number): Promise<{ runs: RunSummary[]; next?: RunCursor }> {
    const where = ['org = $1'];
    const params: unknown[] = [org];
    for (const [column, value] of [['kind', filters.kind], ['status', filters.status], ['model', filters.model]] as const) {
      if (value !== undefined) {
        params.push(value);
        where.push(`${column} = $${params.length}`);
      }
    }
    if (after) {
      params.push(after.createdAt, after.runId);
      where.push(`(created_at, run_id) < ($${params.length - 1}::timestamptz, $${params.length})`);
    }
    params.push(limit + 1);
    const rows: RunRecord[] = await this.db.query(
      `SELECT ${RUN_COLUMNS} FROM runs WHERE ${where.join(' AND ')}
       ORDER BY created_at DESC, run_id DESC LIMIT $${params.length}`,
      params,
    );
    const page = rows.slice(0, limit).map(toSummary);
    const last = rows.length > limit ? rows[limit - 1] : undefined;
    return { runs: page, next: last ? { createdAt: last.created_at.toISOString(), runId: last.run_id } : undefined };
  }

  /**
   * An org's model calls with `from <= at < to`, added up and grouped by model, run or UTC day: the
   * `limit` most expensive groups, and the total over all of them.
   */
  async usage(org: string, from: Date, to: Date, groupBy: UsageGroup, limit: number): Promise<{ total: UsageTotals; groups: (UsageTotals & { key: string })[]; truncated: boolean }> {
    const key = { model: 'model', run: 'run_id', day: `to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD')` }[groupBy];
    const sums = `count(*)::int AS calls, coalesce(sum(prompt_tokens), 0)::bigint AS prompt_tokens,
      coalesce(sum(completion_tokens), 0)::bigint AS completion_tokens, coalesce(sum(cost_usd), 0)::text AS cost_usd,
      (count(*) FILTER (WHERE estimated))::int AS estimated_calls, (count(*) FILTER (WHERE NOT priced))::int AS unpriced_calls`;
    const range = 'org = $1 AND at >= $2 AND at < $3';
    const [total]: UsageRow[] = await this.db.query(`SELECT ${sums} FROM model_usage WHERE ${range}`, [org, from, to]);
    const rows: (UsageRow & { key: string })[] = await this.db.query(
      `SELECT ${key} AS key, ${sums} FROM model_usage WHERE ${range} GROUP BY 1 ORDER BY sum(cost_usd) DESC, 1 LIMIT $4`,
      [org, from, to, limit + 1],
    );
    return { total: totalsOf(total), groups: rows.slice(0, limit).map((r) => ({ key: r.key, ...totalsOf(r) })), truncated: rows.length > limit };
  }

  async getRun(org: string, runId: string): Promise<RunSummary | undefined> {
    const rows: RunRecord[] = await this.db.query(`SELECT ${RUN_COLUMNS} FROM runs WHERE org = $1 AND run_id = $2`, [org, runId]);
    return rows[0] ? toSummary(rows[0]) : undefined;
  }

  /** The newest applied events: one stored past a gap is not part of the run yet. */
  async lastEvents(org: string, runId: string, count: number): Promise<RunEventEnvelope[]> {
    const rows: { event: RunEventEnvelope }[] = await this.db.query(
      `SELECT event FROM run_events WHERE org = $1 AND run_id = $2 AND seq <= (SELECT last_seq FROM runs WHERE org = $1 AND run_id = $2) ORDER BY seq DESC LIMIT $3`,
      [org, runId, count],
    );
    return rows.map((r) => r.event).reverse();
  }

  /**
   * An `llm` run's conversation as its applied `step_completed` events carried it (`messages`), in seq
   * order, each message with the step that added it. Read from the events, so it outlives the workflow.
   */
  async conversation(org: string, runId: string): Promise<(ConversationMessage & { step: number })[]> {
    const rows: { step: number; messages: ConversationMessage[] }[] = await this.db.query(
      `SELECT (event->'payload'->>'step')::int AS step, event->'payload'->'messages' AS messages FROM run_events
        WHERE org = $1 AND run_id = $2 AND type = 'step_completed' AND event->'payload' ? 'messages'
          AND seq <= (SELECT last_seq FROM runs WHERE org = $1 AND run_id = $2)
        ORDER BY seq`,
      [org, runId],
    );
    return rows.flatMap((r) => r.messages.map((m) => ({ step: r.step, ...m })));
  }

  /** Applied events after `seq`, in order, up to `limit`, as streams send them. Callers send only the contiguous prefix. */
  async eventsAfter(org: string, runId: string, seq: number, limit: number): Promise<StoredRunEvent[]> {
    return this.db.query(
      `SELECT ${STORED_EVENT_COLUMNS} FROM run_events ev
        WHERE ev.org = $1 AND ev.run_id = $2 AND ev.seq > $3 AND ev.seq <= (SELECT last_seq FROM runs WHERE org = $1 AND run_id = $2)
        ORDER BY ev.seq LIMIT $4`,
      [org, runId, seq, limit],
    );
  }

  /**
   * `eventsAfter` for many runs in one query: for each read, in the order given, the run's applied
   * events after its own `after`, in seq order, at most `limit` per run (a run with none, or none
   * applied, gets an empty list). Each read names its org: no run of another org is read.
   */
  async eventsAfterMany(reads: readonly RunEventsRead[], limit: number): Promise<StoredRunEvent[][]> {
    const out: StoredRunEvent[][] = [];
    // Every read is handed once, in order.
    await this.eachEventsAfter(reads, limit, (_, events) => void out.push(events));
    return out;
  }

  /**
   * `eventsAfterMany`, handed over as the rows arrive: `each(i, events)` once for every read, in the
   * order given, as soon as the rows of the reads after it start (or the result ends), so the first
   * runs' events are used while Postgres still sends the rest. Resolves once every read was handed;
   * if the query fails part-way it rejects, and the reads not handed yet get nothing. A throw from
   * `each` stops the handing and rejects the same way, once the query is over.
   */
  async eachEventsAfter(reads: readonly RunEventsRead[], limit: number, each: (index: number, events: StoredRunEvent[]) => void): Promise<void> {
    if (reads.length === 0) return;
    let next = 0;
    let run: StoredRunEvent[] = [];
    let stopped: unknown;
    /** Hands every read before `upTo` not handed yet: the one whose rows were gathering, then empty ones. */
    const handUpTo = (upTo: number): void => {
      while (stopped === undefined && next < upTo) {
        const events = run;
        run = [];
        try {
          each(next++, events);
        } catch (err) {
          stopped = err ?? new Error('a handler of the batched read failed');
        }
      }
    };
    const params = [reads.map((r) => r.org), reads.map((r) => r.runId), reads.map((r) => r.after), reads.map((r) => (r.afterApplied ? MAX_SEQ : null)), limit];
    // Rows arrive in the pool socket's async context, which is that of whatever request opened the
    // connection: the handler runs in this read's own (the log context and span of its caller).
    const onRow = AsyncResource.bind(({ i, ...event }: StoredRunEvent & { i: number }): void => {
      if (i - 1 < next || (run.length > 0 && i - 1 === next && event.seq <= run[run.length - 1].seq)) {
        stopped ??= new Error(`the batched read's rows came out of order (read ${i} seq ${event.seq} after read ${next + 1}): the query plan changed`);
        return;
      }
      handUpTo(i - 1);
      run.push(event);
    });
    const runner = this.db.createQueryRunner();
    try {
      const client = (await runner.connect()) as PoolClient;
      await new Promise<void>((resolve, reject) => {
        // The callback, not the `error` event: with a `query_timeout` node-postgres reports a
        // failure only to the callback. (A query with a callback keeps its rows until it ends, as the
        // whole-result read did; a read holds at most `limit` rows per run.)
        const query = new Query(EVENTS_AFTER_MANY_SQL, params, (err: Error | undefined) => (err ? reject(err) : resolve()));
        query.on('row', onRow);
        client.query(query);
      });
    } finally {
      await runner.release();
    }
    handUpTo(reads.length);
    if (stopped !== undefined) throw stopped;
  }

  /** A run exists once it has an event, or once its start was accepted (its first event may be in flight). */
  async runExists(org: string, runId: string): Promise<boolean> {
    const rows: unknown[] = await this.db.query(
      `SELECT 1 FROM runs WHERE org = $1 AND run_id = $2
       UNION ALL
       SELECT 1 FROM command_ledger WHERE org = $1 AND run_id = $2 AND (type LIKE '%.start' OR type = 'agent.fork') AND outcome = 'accepted'
       LIMIT 1`,
      [org, runId],
    );
    return rows.length > 0;
  }

  /**
   * The org's runs that hold capacity, for the active-runs quota: projected and not terminal, plus
   * starts accepted in the last ten minutes whose first event is not projected yet, so a burst of
   * starts faster than the projector is counted too. An eval awaiting review holds no worker and is
   * not counted. Two starts decided at the same moment may both see room: the limit is soft by the
   * number of starts deciding at once (COMMAND_CONCURRENCY per orchestrator, plus HTTP requests).
   */
  async activeRuns(org: string): Promise<number> {
    const rows: { n: string }[] = await this.db.query(
      `SELECT (SELECT count(*) FROM runs WHERE org = $1 AND status = ANY($2::text[]))
            + (SELECT count(*) FROM command_ledger l
                WHERE l.org = $1 AND l.outcome = 'accepted' AND (l.type LIKE '%.start' OR l.type = 'agent.fork')
                  AND l.decided_at > now() - interval '10 minutes'
                  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.org = l.org AND r.run_id = l.run_id)) AS n`,
      [org, ACTIVE_STATUSES],
    );
    return Number(rows[0]?.n ?? 0);
  }

  async ping(): Promise<void> {
    await this.db.query('SELECT 1');
  }
}

/** Above every seq (seqs are int4): the bound of a read that needs no applied-bound probe. */
const MAX_SEQ = 2_147_483_647;

/** Statuses of a run that holds capacity: `status = ANY(...)` keeps the count on the (org, status) index. */
const ACTIVE_STATUSES: string[] = RUN_STATUSES.filter((s) => !TERMINAL_STATUSES.includes(s) && s !== 'awaiting_review');

/** The longest run of seqs `after+1, after+2, ...` at the start of `events` (sorted by seq). */
export function contiguousPrefix<E extends { seq: number }>(events: E[], after: number): E[] {
  const out: E[] = [];
  let expected = after + 1;
  for (const event of events) {
    if (event.seq < expected) continue;
    if (event.seq !== expected) break;
    out.push(event);
    expected += 1;
  }
  return out;
}

/** One manifest row as stored: the published row plus the event seq it arrived with. */
export interface StoredSnapshot {
  seq: number;
  row: SnapshotRow;
}

/** The snapshot manifest, one org at a time. */
export class SnapshotManifest {
  constructor(private readonly db: DataSource) {}

  /** A run's rows in the order they landed. */
  async list(org: string, runId: string): Promise<StoredSnapshot[]> {
    const rows: { seq: number; row: SnapshotRow }[] = await this.db.query(
      'SELECT seq, row FROM snapshots WHERE org = $1 AND run_id = $2 ORDER BY seq',
      [org, runId],
    );
    return rows.map((r) => ({ seq: Number(r.seq), row: r.row }));
  }

  /** A row with the run's state as its event showed it (what a fork needs: policy, tier, max_steps). */
  async find(org: string, runId: string, snapshotId: string): Promise<(StoredSnapshot & { state: Record<string, unknown> | null }) | undefined> {
    const rows: { seq: number; row: SnapshotRow; state: Record<string, unknown> | null }[] = await this.db.query(
      `SELECT s.seq, s.row, e.event->'payload'->'state' AS state FROM snapshots s
       LEFT JOIN run_events e ON e.org = s.org AND e.run_id = s.run_id AND e.seq = s.seq
       WHERE s.org = $1 AND s.run_id = $2 AND s.snapshot_id = $3`,
      [org, runId, snapshotId],
    );
    return rows[0] ? { seq: Number(rows[0].seq), row: rows[0].row, state: rows[0].state } : undefined;
  }

  /** The snapshots of a run that stored an archive (`ok` and `partial` rows), and their archives' bytes. */
  async storedTotals(org: string, runId: string): Promise<{ count: number; bytes: number }> {
    const rows: { count: string; bytes: string | null }[] = await this.db.query(
      'SELECT count(*) AS count, sum(bytes) AS bytes FROM snapshots WHERE org = $1 AND run_id = $2 AND bundle_object_url IS NOT NULL',
      [org, runId],
    );
    return { count: Number(rows[0]?.count ?? 0), bytes: Number(rows[0]?.bytes ?? 0) };
  }

  /** The kind of a run this org has, as the read model knows it. */
  async runKind(org: string, runId: string): Promise<string | undefined> {
    const rows: { kind: string }[] = await this.db.query('SELECT kind FROM runs WHERE org = $1 AND run_id = $2', [org, runId]);
    return rows[0]?.kind;
  }
}

/** Statuses a run is not finished in (an eval awaiting review included). */
const NON_TERMINAL_STATUSES: string[] = RUN_STATUSES.filter((s) => !TERMINAL_STATUSES.includes(s));

/**
 * Every org's runs that are not terminal, counted by kind and status: one grouped query, for the
 * `agentrun_runs_active` gauge. Bounded by its own statement timeout, so a slow database does not
 * hold a metrics scrape or a pool connection for long.
 */
export async function activeRunsByKindAndStatus(db: DataSource, timeoutMs = 2_000): Promise<{ kind: string; status: string; count: number }[]> {
  return db.transaction(async (tx) => {
    await tx.query(`SELECT set_config('statement_timeout', $1, true)`, [String(Math.max(1, Math.floor(timeoutMs)))]);
    const rows: { kind: string; status: string; n: string }[] = await tx.query(
      `SELECT kind, status, count(*) AS n FROM runs WHERE status = ANY($1::text[]) GROUP BY kind, status`,
      [NON_TERMINAL_STATUSES],
    );
    return rows.map((r) => ({ kind: r.kind, status: r.status, count: Number(r.n) }));
  });
}

type UsageRow = { calls: number; prompt_tokens: string; completion_tokens: string; cost_usd: string; estimated_calls: number; unpriced_calls: number };

function totalsOf(r: UsageRow): UsageTotals {
  return {
    calls: r.calls,
    prompt_tokens: Number(r.prompt_tokens),
    completion_tokens: Number(r.completion_tokens),
    cost_usd: Number(r.cost_usd),
    estimated_calls: r.estimated_calls,
    unpriced_calls: r.unpriced_calls,
  };
}

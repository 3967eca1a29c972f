import { isTerminal, type RunEvent, type SnapshotRow } from '@agentrun/contracts';

/**
 * What the run page knows of a run, derived from its events only, so a reload or a reconnect that
 * replays events changes nothing: every event is kept once, by seq.
 */
export class EventLog {
  private readonly bySeq = new Map<number, RunEvent>();
  private ordered: RunEvent[] | undefined = [];

  /** Adds the events not seen yet; returns how many were new. */
  add(events: Iterable<RunEvent>): number {
    let added = 0;
    for (const event of events) {
      if (!Number.isInteger(event.seq) || event.seq < 1 || this.bySeq.has(event.seq)) continue;
      this.bySeq.set(event.seq, event);
      added++;
    }
    if (added) this.ordered = undefined;
    return added;
  }

  get size(): number {
    return this.bySeq.size;
  }

  /** The highest seq such that every seq from 1 to it is here: where a stream resumes. */
  contiguousSeq(): number {
    let seq = 0;
    while (this.bySeq.has(seq + 1)) seq++;
    return seq;
  }

  events(): RunEvent[] {
    this.ordered ??= [...this.bySeq.values()].sort((a, b) => a.seq - b.seq);
    return this.ordered;
  }

  /** The state carried by the newest event that has one. */
  latestState(): RunEvent['payload']['state'] | undefined {
    const events = this.events();
    for (let i = events.length - 1; i >= 0; i--) if (events[i].payload?.state) return events[i].payload.state;
    return undefined;
  }
}

const str = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);
const num = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);

/** A step that ran no tool has no lane of its own: name it by what it was. */
export function laneOf(payload: RunEvent['payload']): string {
  return str(payload.lane) ?? (payload.kind === 'llm' ? 'model' : payload.kind === 'research' ? 'research child' : String(payload.kind ?? 'other'));
}

/** One line a person can read for each event type; unknown types still show their type. */
export function describeEvent(event: RunEvent): string {
  const p = event.payload ?? {};
  const status = p.state?.status;
  switch (event.type) {
    case 'run_started':
      return `run started (${status ?? 'running'})`;
    case 'step_completed': {
      const what = p.tool ? `${String(p.tool)} on ${laneOf(p)}` : p.kind === 'llm' ? 'model call' : p.kind === 'research' ? 'research child finished' : String(p.kind ?? 'step');
      const parts = [`step ${num(p.step) ?? '?'}`, what];
      const attempt = num(p.attempt);
      if (attempt && attempt > 1) parts.push(`attempt ${attempt}`);
      if (p.duplicate) parts.push('duplicate (served from the ledger)');
      if (num(p.resumed_from_tick)) parts.push(`resumed from tick ${num(p.resumed_from_tick)}`);
      return parts.join(' · ');
    }
    case 'tool_called':
      return `tool ${str(p.tool) ?? '?'} called${p.lane ? ` on ${String(p.lane)}` : ''}`;
    case 'child_started':
      return `child started: ${str(p.child_workflow_id) ?? '?'}${p.question ? ` (${String(p.question)})` : ''}`;
    case 'status_changed':
      return `status: ${status ?? '?'}${p.reviewer ? ` by ${String(p.reviewer)}` : ''}`;
    case 'context_injected':
      return `context injected: ${str(p.text) ?? ''}`;
    case 'goal_changed':
      return `goal changed to "${str(p.state?.goal) ?? '?'}" (was "${str(p.previous_goal) ?? '?'}")`;
    case 'compensated':
      return `compensated: ${str(p.name) ?? '?'}`;
    case 'snapshot_captured': {
      const row = snapshotOf(event);
      return row ? `snapshot ${row.snapshot_id} captured (${row.capture_status}${row.is_final ? ', final' : ''})` : 'snapshot captured';
    }
    case 'case_finished':
      return `case ${str(p.case_id) ?? '?'}: ${str(p.status) ?? '?'}${num(p.score) !== undefined ? `, score ${num(p.score)}` : ''}${p.error_type ? ` (${String(p.error_type)})` : ''}`;
    case 'run_finished':
      return `run finished: ${status ?? '?'}${p.state?.message ? ` (${String(p.state.message)})` : ''}`;
    default:
      return event.type.replace(/_/g, ' ');
  }
}

/** A row of a run's snapshot series, as GET /runs/{id}/snapshots and `snapshot_captured` carry it. */
export type { SnapshotRow };

export function snapshotOf(event: RunEvent): SnapshotRow | undefined {
  const row = event.payload?.snapshot as SnapshotRow | undefined;
  return row && typeof row === 'object' && typeof row.snapshot_id === 'string' ? row : undefined;
}

/** Rows from the API and from events, one per snapshot id (the API's row wins), in capture order. */
export function mergeSnapshots(fromApi: SnapshotRow[], events: RunEvent[]): SnapshotRow[] {
  const byId = new Map<string, SnapshotRow>();
  for (const event of events) {
    const row = event.type === 'snapshot_captured' ? snapshotOf(event) : undefined;
    if (row) byId.set(row.snapshot_id, row);
  }
  for (const row of fromApi) byId.set(row.snapshot_id, row);
  // The capture ordinal (`version`) is the order they landed in; time and id break what it leaves open.
  return [...byId.values()].sort(
    (a, b) => (a.version ?? 0) - (b.version ?? 0) || a.captured_at_utc.localeCompare(b.captured_at_utc) || a.snapshot_id.localeCompare(b.snapshot_id),
  );
}

export interface StepDuration {
  step: number;
  lane: string;
  label: string;
  seconds: number;
}

/**
 * How long each step took, from event timestamps: from the previous step boundary (the run's start,
 * the last step, or a resume after a pause) to its `step_completed`. Time spent paused is not a step's.
 */
export function stepDurations(events: RunEvent[]): StepDuration[] {
  const out: StepDuration[] = [];
  let since: number | undefined;
  let paused = false;
  for (const event of events) {
    const at = Date.parse(event.ts);
    if (Number.isNaN(at)) continue;
    const status = event.payload?.state?.status;
    if (event.type === 'run_started') since = at;
    else if (event.type === 'status_changed' && status === 'paused') paused = true;
    else if (event.type === 'status_changed' && status === 'running' && paused) {
      paused = false;
      since = at;
    } else if (event.type === 'step_completed') {
      const p = event.payload;
      if (since !== undefined && !paused) {
        const lane = laneOf(p);
        out.push({ step: num(p.step) ?? out.length, lane, label: p.tool ? String(p.tool) : String(p.kind ?? 'step'), seconds: Math.max(0, (at - since) / 1000) });
      }
      since = at;
    }
  }
  return out;
}

export type CaseStatus = 'pending' | 'running' | 'ok' | 'failed' | 'ungraded';

export interface CaseCell {
  case_id: string;
  status: CaseStatus;
  score?: number;
  attempts?: number;
  error_type?: string;
}

export interface EvalSummary {
  model?: string;
  suite?: string;
  total: number;
  done: number;
  counts: { ok: number; failed: number; ungraded: number };
  score: number | null;
  reviewers: string[];
  approved_by?: string;
  cases: CaseCell[];
}

const CASE_STATUSES: readonly CaseStatus[] = ['pending', 'running', 'ok', 'failed', 'ungraded'];

/** An eval run's cases in a stable order (case ids compared as people read numbers), from its state. */
export function evalSummary(state: Record<string, unknown> | undefined): EvalSummary | undefined {
  if (!state || typeof state.cases !== 'object' || state.cases === null) return undefined;
  const cases = Object.entries(state.cases as Record<string, Record<string, unknown>>)
    .map(([case_id, view]): CaseCell => ({
      case_id,
      status: CASE_STATUSES.includes(view?.status as CaseStatus) ? (view.status as CaseStatus) : 'pending',
      ...(num(view?.score) !== undefined ? { score: num(view.score) } : {}),
      ...(num(view?.attempts) !== undefined ? { attempts: num(view.attempts) } : {}),
      ...(str(view?.error_type) ? { error_type: str(view.error_type) } : {}),
    }))
    .sort((a, b) => a.case_id.localeCompare(b.case_id, undefined, { numeric: true }));
  const counts = (state.counts ?? {}) as Record<string, unknown>;
  return {
    model: str(state.model),
    suite: str(state.suite),
    total: num(state.total) ?? cases.length,
    done: num(state.done) ?? cases.filter((c) => c.status === 'ok' || c.status === 'failed' || c.status === 'ungraded').length,
    counts: { ok: num(counts.ok) ?? 0, failed: num(counts.failed) ?? 0, ungraded: num(counts.ungraded) ?? 0 },
    score: num(state.score) ?? null,
    reviewers: Array.isArray(state.reviewers) ? state.reviewers.filter((r): r is string => typeof r === 'string') : [],
    ...(str(state.approved_by) ? { approved_by: str(state.approved_by) } : {}),
    cases,
  };
}

export interface AgentGauge {
  goal: string;
  step: number;
  max_steps: number;
  /** Workflow history events of the current execution and the budget that hands it over (continue-as-new). */
  history?: { length: number; budget: number };
}

/**
 * An agent's goal and progress from its state. The history length is shown only when the state
 * carries it (`history_length`, with `history_max_events` as the budget when given).
 */
export function agentGauge(state: Record<string, unknown> | undefined, defaultHistoryBudget = 2_000): AgentGauge | undefined {
  if (!state || typeof state.goal !== 'string') return undefined;
  const length = num(state.history_length);
  return {
    goal: state.goal,
    step: num(state.step) ?? 0,
    max_steps: num(state.max_steps) ?? 0,
    ...(length !== undefined ? { history: { length, budget: num(state.history_max_events) ?? defaultHistoryBudget } } : {}),
  };
}

export function isTerminalStatus(status: unknown): boolean {
  return typeof status === 'string' && isTerminal(status);
}

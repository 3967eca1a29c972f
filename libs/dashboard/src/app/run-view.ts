import { isTerminal, type CaseErrorType, type CaseStatus, type RunEvent, type RunEventOf, type RunStateView, type SnapshotRow } from '@agentrun/contracts';

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

/** A `token` frame of the run's stream: a piece of a model reply as it is written. */
export interface TokenDelta {
  step: number;
  attempt: number;
  index: number;
  delta: string;
}

/**
 * The model reply being written: the newest step's, its newest attempt's (a retry starts again and
 * replaces the old text), its pieces in index order whatever order they came in, each kept once.
 */
export class LiveReply {
  private step = -1;
  private attempt = 0;
  private readonly parts = new Map<number, string>();

  /** Takes a delta; false when it belongs to an older step or attempt (or repeats one held). */
  add(d: TokenDelta): boolean {
    if (d.step < this.step || (d.step === this.step && d.attempt < this.attempt)) return false;
    if (d.step > this.step || d.attempt > this.attempt) {
      this.step = d.step;
      this.attempt = d.attempt;
      this.parts.clear();
    }
    if (this.parts.has(d.index)) return false;
    this.parts.set(d.index, d.delta);
    return true;
  }

  /** The step and attempt shown, and the text so far; undefined before the first delta. */
  current(): { step: number; attempt: number; text: string } | undefined {
    if (this.step < 0) return undefined;
    const text = [...this.parts.entries()].sort((a, b) => a[0] - b[0]).map(([, piece]) => piece).join('');
    return { step: this.step, attempt: this.attempt, text };
  }
}

/**
 * A step's lane as the event gives it: on a workspace host that is the host's own task queue
 * (`cpu-tools@h1`). A step that ran no tool has no lane of its own: name it by what it was.
 */
export function laneOf(payload: RunEventOf<'step_completed'>['payload']): string {
  return payload.lane || (payload.kind === 'llm' ? 'model' : payload.kind === 'research' ? 'research child' : String(payload.kind ?? 'other'));
}

/**
 * A lane and the workspace host it ran on, apart: `cpu-tools@h1` is the lane `cpu-tools` on host `h1`,
 * so a run whose workspace moved from one host to another keeps one series per lane.
 */
export function splitLane(lane: string): { lane: string; host?: string } {
  const at = lane.lastIndexOf('@');
  if (at <= 0 || at === lane.length - 1) return { lane };
  return { lane: lane.slice(0, at), host: lane.slice(at + 1) };
}

/**
 * One line a person can read for each event type; unknown types still show their type. Events
 * written before a field existed lack it, hence the fallbacks.
 */
export function describeEvent(event: RunEvent): string {
  const status = event.payload.state?.status;
  switch (event.type) {
    case 'run_started':
      return `run started (${status ?? 'running'})`;
    case 'step_completed': {
      const p = event.payload;
      const what = p.tool ? `${p.tool} on ${laneOf(p)}` : p.kind === 'llm' ? 'model call' : p.kind === 'research' ? 'research child finished' : String(p.kind ?? 'step');
      const parts = [`step ${p.step ?? '?'}`, what];
      if (p.attempt > 1) parts.push(`attempt ${p.attempt}`);
      if (p.duplicate) parts.push('duplicate (served from the ledger)');
      if (p.resumed_from_tick) parts.push(`resumed from tick ${p.resumed_from_tick}`);
      return parts.join(' · ');
    }
    case 'tool_called':
      return `tool ${event.payload.tool || '?'} called${event.payload.lane ? ` on ${event.payload.lane}` : ''}`;
    case 'child_started':
      return `child started: ${event.payload.child_workflow_id || '?'}${event.payload.question ? ` (${event.payload.question})` : ''}`;
    case 'status_changed':
      return `status: ${status ?? '?'}${event.payload.reviewer ? ` by ${event.payload.reviewer}` : ''}`;
    case 'context_injected':
      return `context injected: ${event.payload.text ?? ''}`;
    case 'goal_changed':
      return `goal changed to "${event.payload.state?.goal || '?'}" (was "${event.payload.previous_goal || '?'}")`;
    case 'compensated':
      return `compensated: ${event.payload.name || '?'}`;
    case 'snapshot_captured': {
      const row = snapshotOf(event);
      return row ? `snapshot ${row.snapshot_id} captured (${row.capture_status}${row.is_final ? ', final' : ''})` : 'snapshot captured';
    }
    case 'case_finished': {
      const p = event.payload;
      return `case ${p.case_id || '?'}: ${p.status || '?'}${p.score !== undefined ? `, score ${p.score}` : ''}${p.error_type ? ` (${p.error_type})` : ''}`;
    }
    case 'workspace_moved': {
      const p = event.payload;
      const from = p.snapshot_id ? ` from ${p.snapshot_id}` : ' (fresh workspace)';
      const replayed = p.steps_replayed ?? 0;
      return `workspace moved ${p.from || '?'} → ${p.to || '?'}${from}, ${replayed} step${replayed === 1 ? '' : 's'} replayed`;
    }
    case 'budget_exhausted': {
      const p = event.payload;
      const unit = (v: number) => (p.limit === 'usd' ? `$${v}` : `${v} tokens`);
      return `paused: step ${p.step ?? '?'}'s model call needs up to ${unit(p.needed)}, ${p.scope === 'org' ? "the org's monthly" : "the run's"} budget has ${unit(p.left)} left (${unit(p.spent)} of ${unit(p.max)} spent)`;
    }
    case 'budget_raised': {
      const b = event.payload.state?.budget ?? {};
      return `budget raised to ${[b.max_tokens !== undefined ? `${b.max_tokens} tokens` : '', b.max_cost_usd !== undefined ? `$${b.max_cost_usd}` : ''].filter(Boolean).join(', ') || '?'}`;
    }
    case 'run_finished':
      return `run finished: ${status ?? '?'}${event.payload.state?.message ? ` (${event.payload.state.message})` : ''}`;
    default:
      return (event as { type: string }).type.replace(/_/g, ' ');
  }
}

/** A row of a run's snapshot series, as GET /runs/{id}/snapshots and `snapshot_captured` carry it. */
export type { SnapshotRow };

export function snapshotOf(event: RunEventOf<'snapshot_captured'>): SnapshotRow | undefined {
  const row = event.payload.snapshot as SnapshotRow | undefined;
  return row?.snapshot_id ? row : undefined;
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
  /** The lane without its workspace host (`cpu-tools`, not `cpu-tools@h1`): what the charts group by. */
  lane: string;
  /** The workspace host the step ran on, when its lane names one. */
  host?: string;
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
    const status = event.payload.state?.status;
    if (event.type === 'run_started') since = at;
    else if (event.type === 'status_changed' && status === 'paused') paused = true;
    else if (event.type === 'status_changed' && status === 'running' && paused) {
      paused = false;
      since = at;
    } else if (event.type === 'step_completed') {
      const p = event.payload;
      if (since !== undefined && !paused) {
        const { lane, host } = splitLane(laneOf(p));
        out.push({ step: p.step ?? out.length, lane, ...(host ? { host } : {}), label: p.tool || String(p.kind ?? 'step'), seconds: Math.max(0, (at - since) / 1000) });
      }
      since = at;
    }
  }
  return out;
}

export type { CaseStatus };

export interface CaseCell {
  case_id: string;
  status: CaseStatus;
  score?: number;
  attempts?: number;
  error_type?: CaseErrorType;
}

export interface EvalSummary {
  model?: string;
  suite?: string;
  /** A real eval's dataset (content hash) and solver; absent for a synthetic eval. */
  dataset_id?: string;
  solver?: string;
  total: number;
  done: number;
  counts: { ok: number; failed: number; ungraded: number };
  score: number | null;
  reviewers: string[];
  approved_by?: string;
  cases: CaseCell[];
  /** Its cases' spend, and against its budget, in words (as an agent's). */
  spend?: string;
  budget?: string;
  /** Paused on its budget: a case did not fit. */
  paused?: boolean;
}

/** An eval run's cases in a stable order (case ids compared as people read numbers), from its state. */
export function evalSummary(state: RunStateView | undefined): EvalSummary | undefined {
  if (!state?.cases) return undefined;
  const cases = Object.entries(state.cases)
    .map(([case_id, view]): CaseCell => ({
      case_id,
      status: view.status ?? 'pending',
      ...(view.score !== undefined ? { score: view.score } : {}),
      ...(view.attempts !== undefined ? { attempts: view.attempts } : {}),
      ...(view.error_type ? { error_type: view.error_type } : {}),
    }))
    .sort((a, b) => a.case_id.localeCompare(b.case_id, undefined, { numeric: true }));
  return {
    model: state.model || undefined,
    suite: state.suite || undefined,
    ...(state.dataset_id ? { dataset_id: state.dataset_id } : {}),
    ...(state.solver ? { solver: state.solver } : {}),
    total: state.total ?? cases.length,
    done: state.done ?? cases.filter((c) => c.status === 'ok' || c.status === 'failed' || c.status === 'ungraded').length,
    counts: { ok: state.counts?.ok ?? 0, failed: state.counts?.failed ?? 0, ungraded: state.counts?.ungraded ?? 0 },
    score: state.score ?? null,
    reviewers: state.reviewers ?? [],
    ...(state.approved_by ? { approved_by: state.approved_by } : {}),
    cases,
    ...(state.usage ? { spend: spendText(state.usage) } : {}),
    ...(state.budget ? { budget: budgetText(state.usage, state.budget) } : {}),
    ...(state.status === 'paused' && state.reason === 'budget_exhausted' ? { paused: true } : {}),
  };
}

export interface AgentGauge {
  goal: string;
  step: number;
  max_steps: number;
  /** Workflow history events of the current execution and the budget that hands it over (continue-as-new). */
  history?: { length: number; budget: number };
  /** What the run's model calls have spent, as one line (absent before its first call). */
  spend?: string;
  /** Spend against the run's budget, as one line (absent without a budget). */
  budget?: string;
}

/** `1,234 of 5,000 tokens (25%) · $0.0100 of $1.00 (1%)`: each limit the run has, with what is used of it. */
export function budgetText(usage: RunStateView['usage'], budget: NonNullable<RunStateView['budget']>): string {
  const n = (v: number) => v.toLocaleString('en-US');
  const dollars = (v: number) => `$${v >= 1 ? v.toFixed(2) : v.toFixed(4)}`;
  const pct = (used: number, max: number) => `${Math.min(999, Math.round((100 * used) / max))}%`;
  const parts: string[] = [];
  const tokens = usage ? usage.prompt_tokens + usage.completion_tokens : 0;
  if (budget.max_tokens !== undefined) parts.push(`${n(tokens)} of ${n(budget.max_tokens)} tokens (${pct(tokens, budget.max_tokens)})`);
  const cost = usage?.cost_usd ?? 0;
  if (budget.max_cost_usd !== undefined) parts.push(`${dollars(cost)} of ${dollars(budget.max_cost_usd)} (${pct(cost, budget.max_cost_usd)})`);
  return parts.join(' · ');
}

/** A run's usage as the page says it: `$0.0123 · 4,210 tokens (3,900 in, 310 out) in 3 model calls`, noting estimates. */
export function spendText(usage: NonNullable<RunStateView['usage']>): string {
  const dollars = usage.cost_usd >= 1 ? usage.cost_usd.toFixed(2) : usage.cost_usd.toFixed(4);
  const n = (v: number) => v.toLocaleString('en-US');
  const calls = `${n(usage.calls)} model call${usage.calls === 1 ? '' : 's'}`;
  const estimated = usage.estimated_calls > 0 ? `, ${n(usage.estimated_calls)} estimated` : '';
  return `$${dollars} · ${n(usage.prompt_tokens + usage.completion_tokens)} tokens (${n(usage.prompt_tokens)} in, ${n(usage.completion_tokens)} out) in ${calls}${estimated}`;
}

/**
 * An agent's goal and progress from its state. The history length is shown only when the state
 * carries it (`history_length`, with `history_max_events` as the budget when given).
 */
export function agentGauge(state: RunStateView | undefined, defaultHistoryBudget = 2_000): AgentGauge | undefined {
  if (state?.goal === undefined) return undefined;
  const length = state.history_length;
  return {
    goal: state.goal,
    step: state.step ?? 0,
    max_steps: state.max_steps ?? 0,
    ...(length !== undefined ? { history: { length, budget: state.history_max_events ?? defaultHistoryBudget } } : {}),
    ...(state.usage ? { spend: spendText(state.usage) } : {}),
    ...(state.budget ? { budget: budgetText(state.usage, state.budget) } : {}),
  };
}

export function isTerminalStatus(status: unknown): boolean {
  return typeof status === 'string' && isTerminal(status);
}

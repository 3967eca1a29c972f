import type { RunEvent } from '@agentrun/contracts';
import type { RunSummary } from './api';

/** Newest first, as GET /runs orders them: created_at, then run id, both descending. */
function newerFirst(a: RunSummary, b: RunSummary): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? 1 : -1;
  return a.run_id < b.run_id ? 1 : a.run_id > b.run_id ? -1 : 0;
}

/**
 * Folds fresher rows (a page, or the head of the list fetched again) into the rows shown: one row
 * per run id, the one with the higher `last_seq` kept, in the API's order.
 */
export function mergeRuns(rows: RunSummary[], incoming: RunSummary[]): RunSummary[] {
  const byId = new Map(rows.map((r) => [r.run_id, r]));
  for (const run of incoming) {
    const known = byId.get(run.run_id);
    if (!known || run.last_seq >= known.last_seq) byId.set(run.run_id, run);
  }
  return [...byId.values()].sort(newerFirst);
}

/** A row moved on by the events of its stream: status and state from the newest event that has one. */
export function applyEvents(row: RunSummary, events: RunEvent[]): RunSummary {
  let next = row;
  for (const event of events) {
    if (event.seq <= next.last_seq) continue;
    const state = event.payload?.state;
    next = {
      ...next,
      last_seq: event.seq,
      updated_at: event.ts,
      ...(state ? { status: state.status, state } : {}),
    };
  }
  return next;
}

/** What a row's progress column says: steps for an agent, finished cases for an eval. */
export function progressOf(run: RunSummary): string {
  const s: Partial<RunSummary['state']> = run.state ?? {};
  if (run.kind === 'eval') return s.total !== undefined ? `${s.done ?? 0}/${s.total} cases` : '';
  return s.max_steps !== undefined ? `step ${s.step ?? 0}/${s.max_steps}` : '';
}

/** The line that says what a run is about: an agent's goal, an eval's model and suite. */
export function subjectOf(run: RunSummary): string {
  const s: Partial<RunSummary['state']> = run.state ?? {};
  if (run.kind === 'eval') return [run.model ?? s.model, s.suite].filter((x) => x).join(' · ');
  return s.goal ?? '';
}

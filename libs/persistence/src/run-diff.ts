import type { DataSource } from 'typeorm';

/** A step as two runs are lined up by: what it was (kind, tool) and what it gave (its output's digest). */
export interface StepSignature {
  step: number;
  kind: string;
  tool: string | null;
  /** SHA-256 of the step's `output` as its event recorded it. */
  output_sha256: string;
}

/** A run's steps and where it was forked from, as its applied events say. */
export interface RunSteps {
  run_id: string;
  steps: StepSignature[];
  forked_from?: { run_id: string; snapshot_id: string; step: number };
}

export interface RunLineUp {
  /** The first step where the two runs did different things or got different results; null when none did. */
  first_divergent_step: number | null;
  /** Steps before it that both runs took alike (a fork's steps before its fork point are its parent's). */
  steps_shared: number;
  /** Steps each run took, its inherited ones included. */
  steps: { run: number; with: number };
}

/** The steps of a run, its ancestor's before its fork point included, by step. */
function stepsOf(run: RunSteps, other: RunSteps): Map<number, StepSignature> {
  const own = new Map(run.steps.map((s) => [s.step, s]));
  const fork = run.forked_from;
  if (!fork || fork.run_id !== other.run_id) return own;
  const inherited = new Map(other.steps.filter((s) => s.step < fork.step).map((s) => [s.step, s]));
  for (const [step, s] of own) if (step >= fork.step) inherited.set(step, s);
  return inherited;
}

const same = (a: StepSignature | undefined, b: StepSignature | undefined) => a !== undefined && b !== undefined && a.kind === b.kind && a.tool === b.tool && a.output_sha256 === b.output_sha256;

/**
 * Lines two runs up by step. A step is the same in both when its kind, tool and output agree (effect
 * keys name their run's workflow, so the step and what it did stand in for them). A fork counts its
 * parent's steps before its fork point as its own, so a fork and its parent agree at least up to it.
 */
export function lineUpRuns(run: RunSteps, other: RunSteps): RunLineUp {
  const a = stepsOf(run, other);
  const b = stepsOf(other, run);
  const last = Math.max(-1, ...a.keys(), ...b.keys());
  let first: number | null = null;
  for (let step = 0; step <= last; step++) {
    if (!a.has(step) && !b.has(step)) continue;
    if (!same(a.get(step), b.get(step))) {
      first = step;
      break;
    }
  }
  const sharedUpTo = first ?? last + 1;
  return { first_divergent_step: first, steps_shared: [...a.keys()].filter((s) => s < sharedUpTo && b.has(s)).length, steps: { run: a.size, with: b.size } };
}

/** A run's step signatures and fork origin from its applied events (`step_completed`, `run_started`). */
export async function readRunSteps(db: DataSource, org: string, runId: string): Promise<RunSteps> {
  const rows: { type: string; step: number | null; kind: string | null; tool: string | null; output_sha256: string | null; forked_from: RunSteps['forked_from'] | null }[] = await db.query(
    `SELECT type, (event->'payload'->>'step')::int AS step, event->'payload'->>'kind' AS kind, event->'payload'->>'tool' AS tool,
            encode(sha256(convert_to(coalesce(event->'payload'->>'output', ''), 'UTF8')), 'hex') AS output_sha256,
            event->'payload'->'forked_from' AS forked_from
       FROM run_events
      WHERE org = $1 AND run_id = $2 AND type IN ('step_completed', 'run_started')
        AND seq <= (SELECT last_seq FROM runs WHERE org = $1 AND run_id = $2)
      ORDER BY seq`,
    [org, runId],
  );
  const steps = new Map<number, StepSignature>();
  let forked: RunSteps['forked_from'];
  for (const r of rows) {
    if (r.type === 'run_started' && r.forked_from) forked = r.forked_from;
    // A step completed twice (a replayed publish the projector kept once) is the same step: the last wins.
    if (r.type === 'step_completed' && r.step !== null) steps.set(r.step, { step: r.step, kind: r.kind ?? '', tool: r.tool, output_sha256: r.output_sha256 ?? '' });
  }
  return { run_id: runId, steps: [...steps.values()].sort((x, y) => x.step - y.step), ...(forked ? { forked_from: forked } : {}) };
}

import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join, relative } from 'node:path';
import { plan } from '@agentrun/workflows';
import type { RunEventEnvelope } from '@agentrun/contracts';
import type { TopicRecord } from './platform';

/**
 * An event as a repeat must match it: all but when it was made. A workflow task that runs again (its
 * worker died, or the server refused its completion) emits the same events again at a later workflow
 * time (`ts`) and further into its history (`state.history_length`); nothing else may differ.
 */
export function sameEventText(event: RunEventEnvelope): string {
  const copy = JSON.parse(JSON.stringify(event)) as { ts?: string; payload: { state?: { history_length?: number } } };
  delete copy.ts;
  if (copy.payload.state) delete copy.payload.state.history_length;
  return JSON.stringify(copy);
}

/** The distinct seqs of one run on a topic must be exactly 1..n (a retried publish may repeat one). */
export function seqsOnTopic(records: TopicRecord<RunEventEnvelope>[], org: string, runId: string): number[] {
  const bySeq = new Map<number, string>();
  for (const r of records) {
    if (r.value.org !== org || r.value.run_id !== runId) continue;
    const text = sameEventText(r.value);
    const seen = bySeq.get(r.value.seq);
    // A repeat is only allowed as the same event published again.
    if (seen !== undefined && seen !== text) throw new Error(`two different events share seq ${r.value.seq} of ${org}/${runId}: ${seen} / ${text}`);
    bySeq.set(r.value.seq, text);
  }
  return [...bySeq.keys()].sort((a, b) => a - b);
}

export function oneToN(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i + 1);
}

/** A run's events, on the topic, must all sit in one partition (keyed by run id). */
export function partitionsOf(records: TopicRecord<RunEventEnvelope>[], org: string, runId: string): number[] {
  return [...new Set(records.filter((r) => r.value.org === org && r.value.run_id === runId).map((r) => r.partition))];
}

/** What a scripted run of `maxSteps` steps publishes, from the workflow's own plan. */
export function scriptedRunShape(maxSteps: number, researchEvery = 4): { events: number; research: number; effects: number } {
  let research = 0;
  for (let step = 0; step < maxSteps; step++) {
    if (plan({ step, max_steps: maxSteps, goal: 'g', context: '', research_every: researchEvery }).kind === 'research') research += 1;
  }
  // run_started, one step_completed per step, one child_started per research step, run_finished
  return { events: maxSteps + research + 2, research, effects: maxSteps - research };
}

/** A directory as comparable data: every entry by relative path, with its kind, mode and content (or link target). */
export function workspaceTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const full = join(d, name);
      const st = lstatSync(full);
      const rel = relative(dir, full);
      if (st.isSymbolicLink()) out[rel] = `link:${readlinkSync(full)}`;
      else if (st.isDirectory()) {
        out[rel] = `dir:${(st.mode & 0o777).toString(8)}`;
        walk(full);
      } else out[rel] = `file:${(st.mode & 0o777).toString(8)}:${readFileSync(full).toString('base64')}`;
    }
  };
  walk(dir);
  return out;
}

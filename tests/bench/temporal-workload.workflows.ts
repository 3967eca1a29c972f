/**
 * Workflow code of the benches that run bare Temporal, bundled on its own from dist/tests/bench:
 *
 *   - `benchWorkload` (tests/bench/temporal-sqlite.bench.ts): TIMERS durable timers interleaved with
 *     ACTIVITIES trivial activities, one after another, so every workflow writes the history a short
 *     agent run writes (activity scheduled/started/completed, timer started/fired, a workflow task
 *     between each);
 *   - `bareAgentRun` (the bare-Temporal baseline of tests/bench/load.bench.ts): the activities a
 *     scripted platform run makes, in its order and with its measured run times (`work` sleeps that
 *     long), a child workflow where the run starts one; nothing published, no search attributes.
 */
import { executeChild, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';

export interface BenchActivities {
  bump(n: number): Promise<number>;
}

const { bump } = proxyActivities<BenchActivities>({ startToCloseTimeout: '30 seconds', retry: { maximumAttempts: 3 } });

export async function benchWorkload(activities: number, timers: number, timerMs: number): Promise<number> {
  let n = 0;
  const timerEvery = timers > 0 ? Math.max(1, Math.floor(activities / timers)) : Infinity;
  let timersLeft = timers;
  for (let i = 0; i < activities; i++) {
    n = await bump(n);
    if (timersLeft > 0 && (i + 1) % timerEvery === 0) {
      await sleep(timerMs);
      timersLeft -= 1;
    }
  }
  while (timersLeft-- > 0) await sleep(timerMs);
  return n;
}

export interface BareActivities {
  /** Stands for the platform activity `type`: takes `ms`, as that one did. */
  work(type: string, ms: number): Promise<number>;
}

export type BareStep = { kind: 'activity'; type: string; ms: number } | { kind: 'child'; activities: { type: string; ms: number }[] };

const { work } = proxyActivities<BareActivities>({ startToCloseTimeout: '30 seconds', retry: { maximumAttempts: 3 } });

/** An activity of the platform's GPU lane (`...@gpu-tools`) runs on `gpuQueue`, whose worker has as few slots as the GPU lane's. */
function workOn(gpuQueue: string) {
  const gpu = proxyActivities<BareActivities>({ taskQueue: gpuQueue, startToCloseTimeout: '30 seconds', retry: { maximumAttempts: 3 } });
  return (a: { type: string; ms: number }) => (a.type.endsWith('@gpu-tools') ? gpu.work(a.type, a.ms) : work(a.type, a.ms));
}

export async function bareAgentRun(shape: BareStep[], gpuQueue: string): Promise<number> {
  const run = workOn(gpuQueue);
  let done = 0;
  for (const [i, step] of shape.entries()) {
    if (step.kind === 'activity') done += await run(step);
    else done += await executeChild(bareChild, { workflowId: `${workflowInfo().workflowId}/child/${i}`, args: [step.activities, gpuQueue] });
  }
  return done;
}

export async function bareChild(activities: { type: string; ms: number }[], gpuQueue: string): Promise<number> {
  const run = workOn(gpuQueue);
  let done = 0;
  for (const a of activities) done += await run(a);
  return done;
}

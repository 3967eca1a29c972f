/**
 * Workflow code of the Temporal dev-server bench (tests/bench/temporal-sqlite.bench.ts), bundled on
 * its own from dist/tests/bench: TIMERS durable timers interleaved with ACTIVITIES trivial activities,
 * one after another, so every workflow writes the history a short agent run writes (activity
 * scheduled/started/completed, timer started/fired, a workflow task between each).
 */
import { proxyActivities, sleep } from '@temporalio/workflow';

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

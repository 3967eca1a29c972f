/**
 * Host-pinned workspaces beside the shared volume, in one run: two platforms on the same stack, one
 * with its workspace on one shared root (the five apps), one with two workspace hosts (each its own
 * orchestrator cpu-tools role, gpu-worker and snapshotter, its own root). Each measures 40-step agent
 * runs, publish -> `done` (the SSE stream's end), one at a time, in alternating rounds so the machine's
 * drift falls on both; steps/s is 40 over that time. Then the failover: a run on a host, every process
 * of that host killed (SIGKILL) at step 6 or later, and the time until the run's next step lands on the
 * other host, a few times over.
 *
 *   npm run bench:hosts -- [runs=8] [kills=3]
 */
import { performance } from 'node:perf_hooks';
import { Platform, uniqueId } from '../support/platform';
import { waitFor } from '../support/wait';
import { measureSpine, percentile, row } from './command-to-sse.bench';

const STEPS = 40;
/** The failover's bounds: a dead host's in-flight call is noticed by its heartbeat, the retry by schedule-to-start. */
const HOST_WAIT_S = '5';
const HEARTBEAT_S = '10';

async function stepOf(platform: Platform, runId: string): Promise<{ step: number; host: string | null } | undefined> {
  const rows = await platform.query<{ step: number; host: string | null }>(
    `SELECT (state->>'step')::int AS step, state->>'workspace_host' AS host FROM runs WHERE org = 'bench' AND run_id = $1`,
    [runId],
  );
  return rows[0];
}

/** Kill the host holding a run mid-run; the time from the kill to the run's next step on another host. */
async function failover(platform: Platform): Promise<{ ms: number; from: string; to: string }> {
  const runId = uniqueId('failover');
  await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org: 'bench', run_id: runId, payload: { goal: 'measure me', max_steps: STEPS } });
  const at = await waitFor('the run a few steps in on a host', async () => {
    const s = await stepOf(platform, runId);
    return s && s.host && s.step >= 6 ? s : undefined;
  }, 120_000, 5);
  const from = at.host as string;
  const t0 = performance.now();
  await platform.stopHost(from, 'SIGKILL');
  const killedAt = (await stepOf(platform, runId))?.step ?? at.step;
  const next = await waitFor('the next step on another host', async () => {
    const s = await stepOf(platform, runId);
    return s && s.host !== from && s.step > killedAt ? s : undefined;
  }, 180_000, 5);
  const ms = performance.now() - t0;
  await platform.waitForStatus('bench', runId, 'done', 180_000);
  await platform.startHost(from);
  return { ms, from, to: next.host as string };
}

async function main(): Promise<void> {
  const runs = Number(process.argv[2] ?? 8);
  const kills = Number(process.argv[3] ?? 3);
  const settings = { AGENTRUN_HOST_SCHEDULE_TO_START_S: HOST_WAIT_S, AGENTRUN_TOOL_HEARTBEAT_S: HEARTBEAT_S };
  const shared = new Platform(settings);
  const pinned = new Platform(settings, { hosts: ['h1', 'h2'] });
  await shared.start();
  await pinned.start();
  try {
    await measureSpine(shared, 1, 'bench', { 'X-Org': 'bench' }, STEPS);
    await measureSpine(pinned, 1, 'bench', { 'X-Org': 'bench' }, STEPS);
    const rounds = 4;
    const per = Math.max(1, Math.ceil(runs / rounds));
    const done = { shared: [] as number[], pinned: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      done.shared.push(...(await measureSpine(shared, per, 'bench', { 'X-Org': 'bench' }, STEPS)).toDone);
      done.pinned.push(...(await measureSpine(pinned, per, 'bench', { 'X-Org': 'bench' }, STEPS)).toDone);
    }
    const rate = (v: number[]) => (STEPS / (percentile(v, 50) / 1000)).toFixed(1);
    console.log(`\n${per * rounds} runs of ${STEPS} steps per mode, one at a time, ${rounds} alternating rounds`);
    console.log(row('shared volume: publish -> done', done.shared));
    console.log(row('host-pinned (2 hosts): publish -> done', done.pinned));
    console.log(`steps/s at p50: shared ${rate(done.shared)}, host-pinned ${rate(done.pinned)}; ratio p50 pinned/shared ${(percentile(done.pinned, 50) / percentile(done.shared, 50)).toFixed(2)}x`);

    const failovers: number[] = [];
    for (let i = 0; i < kills; i++) {
      const f = await failover(pinned);
      failovers.push(f.ms);
      console.log(`failover ${i + 1}: ${f.from} killed -> next step on ${f.to} after ${(f.ms / 1000).toFixed(1)} s`);
    }
    console.log(row(`kill -9 of a host -> next step elsewhere (heartbeat ${HEARTBEAT_S} s, host wait ${HOST_WAIT_S} s)`, failovers));
  } finally {
    await Promise.all([shared.stop(), pinned.stop()]);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

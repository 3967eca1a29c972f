/**
 * The agent loop at length and in numbers, measured from outside on an isolated platform (default
 * settings: history budget 2,000 events, tools unpaced, event publishing on as always):
 *
 *   (a) wall time of one 200-step run, `agent.start` published -> the read model says `done`;
 *   (b) the history it cost: events per step and per execution (the parent workflow's executions,
 *       followed along the continue-as-new chain; research children have histories of their own),
 *       beside the Python prototype's figure of 519 events per 50 steps (it published no events);
 *   (c) steps/s of 20 runs of 40 steps started at once, beside
 *   (d) the same 20 runs one after another, the baseline measured in the same process.
 *
 *   npm run bench:agent
 */
import { performance } from 'node:perf_hooks';
import { Client, Connection } from '@temporalio/client';
import { scriptedRunShape } from '../support/invariants';
import { Platform, uniqueId } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

const ORG = 'bench';
const PROTOTYPE = { events: 519, steps: 50 };
const LONG_STEPS = 200;
const RUNS = 20;
const RUN_STEPS = 40;

const startCommand = (runId: string, maxSteps: number) => ({
  key: runId,
  value: JSON.stringify({ command_id: uniqueId('c'), type: 'agent.start', org: ORG, run_id: runId, payload: { goal: `measure ${runId}`, max_steps: maxSteps } }),
});

/** Publishes the starts in one send and returns when the read model has every run `done` (throws on a failed one). */
async function runAll(platform: Platform, runIds: string[], maxSteps: number, timeoutMs: number): Promise<void> {
  await platform.publishCommands(runIds.map((id) => startCommand(id, maxSteps)));
  const outcome = await waitFor(`${runIds.length} run(s) of ${maxSteps} steps to finish`, async () => {
    const rows = await platform.query<{ run_id: string; status: string }>('SELECT run_id, status FROM runs WHERE org = $1 AND run_id = ANY($2)', [ORG, runIds]);
    const bad = rows.find((r) => r.status === 'failed' || r.status === 'cancelled');
    if (bad) return `run ${bad.run_id} ended ${bad.status}`;
    return rows.length === runIds.length && rows.every((r) => r.status === 'done') && 'done';
  }, timeoutMs, 20);
  if (outcome !== 'done') throw new Error(outcome);
}

/** Every execution of a workflow id, first to last, following the continue-as-new chain in history. */
async function executionsOf(client: Client, workflowId: string): Promise<{ runId: string; status: string; historyLength: number }[]> {
  const latest = await client.workflow.getHandle(workflowId).describe();
  let runId = latest.raw.workflowExecutionInfo?.firstRunId || latest.runId;
  const out: { runId: string; status: string; historyLength: number }[] = [];
  for (;;) {
    const handle = client.workflow.getHandle(workflowId, runId);
    const d = await handle.describe();
    out.push({ runId, status: d.status.name, historyLength: d.historyLength });
    if (d.status.name !== 'CONTINUED_AS_NEW') return out;
    const history = await handle.fetchHistory();
    const next = history.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
    if (!next) throw new Error(`execution ${runId} of ${workflowId} continued as new, but its history names no next run`);
    runId = next;
  }
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

async function main(): Promise<void> {
  const platform = new Platform();
  await platform.start();
  const connection = await Connection.connect({ address: stackUrls().temporalAddress });
  const client = new Client({ connection, namespace: stackUrls().namespace });
  try {
    // Warm-up (not reported): workers, producer and projector all past their first message.
    await runAll(platform, [uniqueId('warm')], 8, 60_000);

    // (a) one 200-step run.
    const longId = uniqueId('long');
    let t0 = performance.now();
    await runAll(platform, [longId], LONG_STEPS, 600_000);
    const longMs = performance.now() - t0;

    // (b) its history.
    const executions = await executionsOf(client, `${ORG}/${longId}`);
    const totalEvents = executions.reduce((sum, e) => sum + e.historyLength, 0);
    const perStep = totalEvents / LONG_STEPS;
    const prototypePerStep = PROTOTYPE.events / PROTOTYPE.steps;
    const shape = scriptedRunShape(LONG_STEPS);

    // (c) 20 runs of 40 steps at once.
    const concurrentIds = Array.from({ length: RUNS }, (_, i) => uniqueId(`par${i}`));
    t0 = performance.now();
    await runAll(platform, concurrentIds, RUN_STEPS, 600_000);
    const concurrentMs = performance.now() - t0;

    // (d) the same 20 runs one after another.
    t0 = performance.now();
    for (let i = 0; i < RUNS; i++) await runAll(platform, [uniqueId(`seq${i}`)], RUN_STEPS, 300_000);
    const sequentialMs = performance.now() - t0;

    const totalSteps = RUNS * RUN_STEPS;
    const concurrentRate = totalSteps / (concurrentMs / 1000);
    const sequentialRate = totalSteps / (sequentialMs / 1000);

    console.log(`\nAgentRun, scripted policy, default settings (history budget 2000 events, tools unpaced), event publishing on`);
    console.log(`(a) one ${LONG_STEPS}-step run, publish -> read model done: ${seconds(longMs)} (${(LONG_STEPS / (longMs / 1000)).toFixed(1)} steps/s; ${shape.events} run events, ${shape.research} research children)`);
    console.log(`(b) history: ${totalEvents} events over ${executions.length} execution(s) = ${perStep.toFixed(2)} events per step`);
    console.log(`    per execution: [${executions.map((e) => e.historyLength).join(', ')}] (${executions.map((e) => e.status).join(', ')})`);
    console.log(`    Python prototype: ${PROTOTYPE.events} events per ${PROTOTYPE.steps} steps = ${prototypePerStep.toFixed(2)} per step; this run / prototype = ${(perStep / prototypePerStep).toFixed(2)}x`);
    console.log(`(c) ${RUNS} runs x ${RUN_STEPS} steps at once:        ${totalSteps} steps in ${seconds(concurrentMs)} = ${concurrentRate.toFixed(1)} steps/s`);
    console.log(`(d) baseline, the same runs one after another: ${totalSteps} steps in ${seconds(sequentialMs)} = ${sequentialRate.toFixed(1)} steps/s`);
    console.log(`ratio concurrent / one after another: ${(concurrentRate / sequentialRate).toFixed(2)}x`);
  } finally {
    await connection.close();
    await platform.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

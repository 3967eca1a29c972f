/**
 * The agent loop at length and in numbers, measured from outside on an isolated platform (default
 * settings: history budget 2,000 events, tools unpaced, event publishing on as always):
 *
 *   (a) wall time of one 200-step run, `agent.start` published -> the read model says `done`;
 *   (b) what it cost in Temporal, from its histories (every execution of the continue-as-new chain,
 *       fetched from Temporal; research children have histories of their own, counted apart): per
 *       step, workflow tasks, activities by type, local activities, search-attribute upserts, history
 *       events and Temporal Cloud billable actions (tests/support/history-counts.ts), beside the
 *       issue-18 goals; and the whole run's actions, each kind named; beside the Python prototype's
 *       figure of 519 events per 50 steps (it published no events);
 *   (c) steps/s of 20 runs of 40 steps started at once, beside
 *   (d) the same 20 runs one after another, the baseline measured in the same process.
 *
 *   npm run bench:agent -- [steps=200] [runs=20]     (runs=0 skips (c) and (d))
 */
import { performance } from 'node:perf_hooks';
import { Client, Connection } from '@temporalio/client';
import { addCounts, billableActions, countHistory, fetchRunHistories, stepGoals, type HistoryCounts } from '../support/history-counts';
import { scriptedRunShape } from '../support/invariants';
import { Platform, uniqueId } from '../support/platform';
import { stackUrls } from '../support/stack-env';
import { waitFor } from '../support/wait';

const ORG = 'bench';
const PROTOTYPE = { events: 519, steps: 50 };
const LONG_STEPS = Number(process.argv[2] ?? 200);
const RUNS = Number(process.argv[3] ?? 20);
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

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

/**
 * (b): per step, what the run's own executions hold and the actions they bill, beside the goals; then
 * the whole run's actions by kind, its research children's histories included.
 */
function printCost(steps: number, executions: { status: string; counts: HistoryCounts }[], children: HistoryCounts[]): void {
  const run = addCounts(...executions.map((e) => e.counts));
  const kids = addCounts(...children);
  const actions = billableActions(run);
  const per = (n: number) => (n / steps).toFixed(2);
  const row = (name: string, total: number, goal?: { goal: number; holds: boolean }) =>
    console.log(`    ${name.padEnd(58)} ${String(total).padStart(6)} ${per(total).padStart(8)}${goal ? `   <= ${String(goal.goal).padEnd(4)} ${goal.holds ? 'holds' : 'NOT MET'}` : ''}`);
  const goals = stepGoals(run, steps);
  console.log(`(b) Temporal cost, from the run's histories: ${run.events} events over ${executions.length} execution(s) [${executions.map((e) => `${e.counts.events} ${e.status}`).join(', ')}]; ${children.length} research children (own histories, ${kids.events} events, counted apart)`);
  console.log(`    ${'per step (the run\'s own executions)'.padEnd(58)} ${'total'.padStart(6)} ${'per step'.padStart(8)}   goal`);
  row('workflow tasks (WorkflowTaskCompleted)', run.workflowTasks.completed, goals[2]);
  row('  WorkflowTaskScheduled', run.workflowTasks.scheduled);
  if (run.workflowTasks.failed + run.workflowTasks.timedOut > 0) row('  WorkflowTaskFailed + WorkflowTaskTimedOut', run.workflowTasks.failed + run.workflowTasks.timedOut);
  row('  workflow-task events', run.workflowTasks.events);
  row('activities (ActivityTaskScheduled)', run.activities.scheduled);
  for (const [type, n] of Object.entries(run.activities.byType).sort((x, y) => y[1] - x[1])) row(`  ${type}`, n);
  row('  activity attempts started (retries included)', run.activities.attempts);
  row('  activity events', run.activities.events);
  row('local activities (MarkerRecorded core_local_activity)', run.localActivities.markers);
  row('  workflow tasks that recorded any (billed one each)', run.localActivities.workflowTasks);
  row('upserts (UpsertWorkflowSearchAttributes)', run.upserts.events);
  row('history events', run.events, goals[1]);
  row('billable actions: activities + local activities + upserts', actions.perStepKinds, goals[0]);
  console.log(`    events by type: ${Object.entries(run.byType).sort((x, y) => y[1] - x[1]).map(([t, n]) => `${t} ${n}`).join(', ')}`);
  const whole = billableActions(addCounts(run, kids));
  const kidsActions = billableActions(kids);
  console.log(
    `    whole run, billable actions: ${whole.total} = activities ${actions.activities} + local activities ${actions.localActivities} + upserts ${actions.upserts} + workflow start ${actions.workflowStarts}` +
      ` + continue-as-new ${actions.continueAsNew} + child workflows ${actions.childWorkflows} (2 each) + timers ${actions.timers} + signals ${actions.signals} + updates ${actions.updates}` +
      ` + in the children: activities ${kidsActions.activities}, local activities ${kidsActions.localActivities}, upserts ${kidsActions.upserts}, timers ${kidsActions.timers} = ${(whole.total / steps).toFixed(2)} per step (queries and heartbeats leave no event: not counted)`,
  );
  const prototypePerStep = PROTOTYPE.events / PROTOTYPE.steps;
  console.log(`    Python prototype: ${PROTOTYPE.events} events per ${PROTOTYPE.steps} steps = ${prototypePerStep.toFixed(2)} per step; this run / prototype = ${(run.events / steps / prototypePerStep).toFixed(2)}x`);
  console.log(`    goals (issue 18): ${goals.map((g) => `${g.name.split(' (')[0]} ${g.value.toFixed(2)} <= ${g.goal} ${g.holds ? 'holds' : 'NOT MET'}`).join('; ')}`);
}

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

    // (b) its histories, printed at once (the rest takes minutes).
    const shape = scriptedRunShape(LONG_STEPS);
    console.log(`\nAgentRun, scripted policy, default settings (history budget 2000 events, tools unpaced), event publishing on`);
    console.log(`(a) one ${LONG_STEPS}-step run, publish -> read model done: ${seconds(longMs)} (${(LONG_STEPS / (longMs / 1000)).toFixed(1)} steps/s; ${shape.events} run events, ${shape.research} research children)`);
    const histories = await fetchRunHistories(client, `${ORG}/${longId}`);
    printCost(LONG_STEPS, histories.executions.map((e) => ({ status: e.status, counts: countHistory(e.events) })), histories.children.map((c) => countHistory(c.events)));
    if (RUNS <= 0) return;

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

import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure, ContinueAsNew, continueAsNew, getExternalWorkflowHandle, workflowInfo } from '@temporalio/workflow';
import type { BudgetShortfall } from '@agentrun/contracts';
import { BUDGET_EXHAUSTED, type AgentRunInput, type AgentRunResult } from './agent-run.types';
import { registerAgentRunHandlers } from './agent-run.handlers';
import { caseBudgetExhaustedSignal } from './definitions';
import { RunLifecycle } from './agent-run.lifecycle';
import { AgentLoopState, type StepOutcome } from './agent-run.state';
import { agentRunActivities, GPU_CALLS_CARRY_PATCH, hostWaitSecondsOf, RESEARCH_CARRY_PATCH, SPARSE_CURRENT_STEP_PATCH, STEP_MESSAGES_PATCH, StepExecutor } from './agent-run.steps';
import { openOutbox, PUBLISH_BY_SINK_PATCH } from './outbox';
import { patchesSince, type Patches } from './patches';
import { openSnapshotSeries, type SnapshotSeries } from './snapshot-series';
import { recoveryConfig, WorkspaceHosts, type SeriesSlot } from './workspace-hosts';
import type { SnapshotSeriesConfig } from './agent-run.types';

/**
 * An agent run: `plan()` picks each step, the executor runs it, the lifecycle pauses, cancels,
 * hands over (continue-as-new) and ends the run; Signals, the Update and the Query only change state.
 *
 * The loop awaits each unit's promise directly, as it awaited the closures this code once was:
 * workflow histories already recorded replay only if commands come in the same order.
 */
export async function AgentRun(input: AgentRunInput): Promise<AgentRunResult> {
  // First thing: the baseline's marker must land in the execution's first task.
  const patches = agentRunPatches();
  const run = new AgentLoopState(input, workflowInfo().workflowId);
  const outbox = openOutbox({
    org: input.org,
    run_id: input.run_id,
    kind: 'agent',
    lane: input.lanes.agentWorkflows,
    firstSeq: run.firstSeq,
    state: () => run.view(workflowInfo().historyLength),
    patches,
    ...(input.events_via ? { eventsVia: input.events_via } : {}),
  });
  const activities = agentRunActivities(input, run.timeouts, run.placement, (a, since) => outbox.carry(a, since));
  // On a workspace host's queue a capture waits at most as long as any host work before the host counts as lost.
  const hostWaitS = hostWaitSecondsOf(run.timeouts);
  const openSeries = (config: SnapshotSeriesConfig, lane: string, onHost: boolean): SnapshotSeries =>
    openSnapshotSeries({
      org: input.org,
      run_id: input.run_id,
      workflow_id: run.workflowId,
      lane,
      config,
      ...(onHost ? { scheduleToStartS: hostWaitS } : {}),
      ...(input.carry?.snapshots ? { carry: input.carry.snapshots } : {}),
      state: () => run.forkState(),
      record: (row) => {
        outbox.emit('snapshot_captured', { snapshot: row });
        if (row.bundle_object_url) hosts.landed(row.step);
      },
    });
  // Host-pinned workspaces: a run with no series of its own still gets recovery points.
  const openRecovery = (lane: string): SnapshotSeries | undefined => (input.lanes.snapshots ? openSeries(recoveryConfig(input), lane, true) : undefined);
  const slot: SeriesSlot = {
    series:
      input.snapshots && input.lanes.snapshots
        ? openSeries(input.snapshots, run.placement?.lanes.snapshots ?? input.lanes.snapshots, run.placement !== undefined)
        : run.placement
          ? openRecovery(run.placement.lanes.snapshots)
          : undefined,
  };
  const hosts: WorkspaceHosts = new WorkspaceHosts(input, run, activities, outbox, slot, openRecovery);
  const lifecycle = new RunLifecycle(input, run, outbox, slot, activities);
  const steps = new StepExecutor(input, run, activities, outbox, patches, hosts);
  registerAgentRunHandlers(run, lifecycle, outbox, slot, input.budget_run_id);

  try {
    if (!input.carry && input.fork) {
      const restored = await lifecycle.restore(input.fork);
      hosts.adopt(restored.placement);
      lifecycle.forked(input.fork, restored);
    } else if (!input.carry) hosts.adopt(await lifecycle.started());
    const series = slot.series;
    series?.start();
    for (;;) {
      await lifecycle.untilRunnable();
      if (run.cancelRequested) {
        await lifecycle.cancel();
        break;
      }
      const next = run.nextStep();
      if (next.kind === 'finish') {
        if (series) {
          await series.finish({ cancelled: false });
          // A cancel that arrived during the final capture wins: the loop's top takes the cancel path.
          if (run.cancelRequested) continue;
          const missing = series.finalMissing();
          if (missing) throw ApplicationFailure.nonRetryable(missing, 'FinalSnapshotMissing');
        }
        lifecycle.done();
        break;
      }
      if (run.dueForHandOver(workflowInfo())) {
        if (!(await lifecycle.readyToHandOver())) continue;
        return await continueAsNew<typeof AgentRun>({ ...input, goal: run.goal, carry: lifecycle.carry() });
      }
      let done: StepOutcome;
      const limitsAtStep = run.spendLimit;
      try {
        if (next.kind === 'tool') done = next.call_id !== undefined ? await steps.requestedTool(next, next.call_id) : await steps.tool(next);
        else if (next.kind === 'llm') done = input.policy === 'llm' ? await steps.converse() : await steps.think(next.prompt);
        else done = await steps.research(next.question);
      } catch (err) {
        // A model call that did not fit a budget: paused, and the same step is planned again once it may go on.
        const shortfall = budgetShortfallOf(err);
        if (!shortfall) throw err;
        // Raised while the call was out: it was refused under the old limits, so it is tried again at once.
        if (run.spendLimit !== limitsAtStep && patches.has(RETRY_AFTER_RAISE_PATCH)) continue;
        lifecycle.budgetExhausted(run.step, shortfall);
        await tellBudgetRun(input, limitsAtStep ?? {}, shortfall);
        continue;
      }
      steps.completed(next, done);
      // After the turn, before the next input goes in: the agent is not writing to its workspace now.
      if (series && !run.cancelRequested) await series.turn(run.step);
    }
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err; // not a failure: this execution hands over to the next
    return await lifecycle.settle(err);
  }
  await lifecycle.close();
  // What an eval that ran this agent scores: its answer and its final workspace.
  const answer = input.policy === 'llm' ? run.conversation?.answer : undefined;
  const finalId = slot.series?.finalLanded();
  return { ...run.result(outbox.seq()), ...(answer !== undefined ? { answer } : {}), ...(finalId ? { final_snapshot_id: finalId } : {}) };
}

const RETRY_AFTER_RAISE_PATCH = 'agent-run-retry-refusal-after-raise';

/**
 * The marker that stands for every patch an AgentRun asks: executions recorded with it take them all
 * (as new executions did when each was asked on its own). A patch added later is asked on its own,
 * until a next baseline covers it too.
 */
export const AGENT_RUN_BASELINE_PATCH = 'agent-run-baseline-2026-12';

function agentRunPatches(): Patches {
  return patchesSince(AGENT_RUN_BASELINE_PATCH, [PUBLISH_BY_SINK_PATCH, GPU_CALLS_CARRY_PATCH, RESEARCH_CARRY_PATCH, SPARSE_CURRENT_STEP_PATCH, STEP_MESSAGES_PATCH, RETRY_AFTER_RAISE_PATCH]);
}

/**
 * An eval's agent case paused on the eval's budget tells its eval, which pauses too (no further case
 * starts) until the eval's budget is raised. An eval that has ended, or a run with no eval over it, has
 * no one to tell.
 */
async function tellBudgetRun(input: AgentRunInput, limits: NonNullable<AgentRunInput['budget']>, shortfall: BudgetShortfall): Promise<void> {
  const parent = workflowInfo().parent;
  if (!input.budget_run_id || !parent || !input.seed) return;
  try {
    await getExternalWorkflowHandle(parent.workflowId).signal(caseBudgetExhaustedSignal, { case_id: input.seed.case_id, limits, shortfall });
  } catch {
    // The eval is gone (cancelled or ended): this run stays paused until it is cancelled with it.
  }
}

/** The shortfall a `BudgetExhausted` model call reported, directly or through a research child; undefined for any other failure. */
export function budgetShortfallOf(err: unknown): BudgetShortfall | undefined {
  let cause: unknown = err;
  while (cause instanceof ChildWorkflowFailure || cause instanceof ActivityFailure) cause = cause.cause;
  if (!(cause instanceof ApplicationFailure) || cause.type !== BUDGET_EXHAUSTED) return undefined;
  const details = cause.details?.[0];
  return typeof details === 'object' && details !== null ? (details as BudgetShortfall) : undefined;
}
